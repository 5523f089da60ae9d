"""verify(): SSA, typing rules per equation, sub-jaxpr scopes, literals, consts, forced thunks."""
import re

import numpy as np
import pytest

from jaxprc import lax
from jaxprc.ir import (PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, JaxprTypeError, Literal, Primitive,
                       ShapedArray, Thunk, Var, trace_to_jaxpr)
from jaxprc.lax import control_flow as cf
from jaxprc.ir.verify import verify

f32 = np.dtype("float32")
X = ShapedArray((3,), f32)
S = ShapedArray((), f32)


def eqn(name, ins, outs, **params):
    return Eqn(PRIMITIVES[name], ins, outs, params)


def test_well_typed_programs_verify():
    cj = trace_to_jaxpr(lambda x: [lax.sin_p.bind(lax.mul_p.bind(x, x))], [X])
    verify(cj)
    verify(cj.jaxpr)


def test_variable_bound_twice():
    a, b = Var(X), Var(X)
    j = Jaxpr([], [a], [b], [eqn("sin", [a], [b]), eqn("cos", [a], [b])])
    with pytest.raises(JaxprTypeError, match=r"variable b:f32\[3\] is bound twice \(again as an output of equation 1\)"):
        verify(j)


def test_invar_bound_twice():
    a = Var(X)
    with pytest.raises(JaxprTypeError, match="bound twice"):
        verify(Jaxpr([], [a, a], [a], []))


def test_use_before_binding_names_equation_and_primitive():
    a, b, c = Var(X), Var(X), Var(X)
    j = Jaxpr([], [a], [c], [eqn("add", [a, b], [c]), eqn("sin", [a], [b])])
    with pytest.raises(JaxprTypeError) as info:
        verify(j)
    msg = str(info.value)
    assert "equation 0 (c:f32[3] = add a b)" in msg and "primitive 'add'" in msg
    assert "operand 1 (b:f32[3]) is used before it is bound" in msg


def test_unbound_outvar():
    a = Var(X)
    with pytest.raises(JaxprTypeError, match=r"outvar 0 \(b:f32\[3\]\) is not bound"):
        verify(Jaxpr([], [a], [Var(X)], []))


def test_declared_type_differs_from_typing_rule():
    a, b = Var(X), Var(ShapedArray((3,), np.int32))
    with pytest.raises(JaxprTypeError) as info:
        verify(Jaxpr([], [a], [b], [eqn("sin", [a], [b])]))
    msg = str(info.value)
    assert "equation 0 (b:i32[3] = sin a)" in msg
    assert "declared output types (i32[3]) differ from the typing rule's (f32[3])" in msg


def test_typing_rule_rejection_is_reported_with_equation():
    a, b, c = Var(X), Var(ShapedArray((3,), np.int32)), Var(X)
    with pytest.raises(JaxprTypeError, match=r"equation 0 .*primitive 'mul': typing rule failed: lax.mul requires arguments to have the same dtypes, got float32, int32"):
        verify(Jaxpr([], [a, b], [c], [eqn("mul", [a, b], [c])]))


def test_bad_params_are_type_errors():
    a, b = Var(S), Var(X)
    with pytest.raises(JaxprTypeError, match="broadcast_in_dim"):
        verify(Jaxpr([], [a], [b], [eqn("broadcast_in_dim", [a], [b], shape=(3,))]))


def test_weak_type_mismatch_is_caught():
    a, b = Var(S), Var(ShapedArray((), f32, weak_type=True))
    with pytest.raises(JaxprTypeError, match=r"\(~f32\[\]\) differ from the typing rule's \(f32\[\]\)"):
        verify(Jaxpr([], [a], [b], [eqn("neg", [a], [b])]))


def test_literal_must_hold_a_value_of_its_dtype():
    a, b = Var(S), Var(S)
    lit = Literal(1.0, S)
    lit.val = np.float64(1.0)          # corrupted after construction
    with pytest.raises(JaxprTypeError, match="literal value .* does not have its declared type f32"):
        verify(Jaxpr([], [a], [b], [eqn("add", [a, lit], [b])]))


@pytest.mark.parametrize("value,short", [(np.ones(4, np.float32), "f32[4]"),
                                         (np.ones(3, np.int32), "i32[3]")])
def test_const_value_must_have_its_constvar_type(value, short):
    a, c, b = Var(X), Var(X), Var(X)
    cj = ClosedJaxpr(Jaxpr([c], [a], [b], [eqn("add", [a, c], [b])]), [value])
    with pytest.raises(JaxprTypeError, match=rf"constvar a:f32\[3\]: its value has type {re.escape(short)}"):
        verify(cj)
    verify(ClosedJaxpr(cj.jaxpr, [np.ones(3, np.float32)]))


def test_sub_jaxpr_sees_only_its_own_scope():
    outer = Var(S)
    d, e = Var(S), Var(S)
    branch = ClosedJaxpr(Jaxpr([], [d], [e], [eqn("add", [d, outer], [e])]), [])
    i, r = Var(ShapedArray((), np.int32)), Var(S)
    j = Jaxpr([], [outer, i], [r], [eqn("cond", [i, outer], [r], branches=(branch,))])
    with pytest.raises(JaxprTypeError) as info:
        verify(j)
    msg = str(info.value)
    assert "in param 'branches' of equation 0 ('cond')" in msg
    assert "used before it is bound (or is bound in another scope)" in msg


def test_control_flow_programs_verify():
    cj = trace_to_jaxpr(lambda x: [cf.scan(lambda c, a: (c + a, c * a), 0.0, x)[1]], [X])
    verify(cj)


def test_forced_thunks_are_verified_and_unforced_left_alone():
    probe = PRIMITIVES.get("test_verify_rule") or Primitive("test_verify_rule")
    probe.def_abstract_eval(lambda x, **params: x)
    a, b = Var(X), Var(ShapedArray((3,), np.int32))
    bad_rule = ClosedJaxpr(Jaxpr([], [a], [b], [eqn("sin", [a], [b])]), [])
    calls = []
    thunk = Thunk(lambda: calls.append(1) or bad_rule, name="bad")
    cj = trace_to_jaxpr(lambda x: [probe.bind(x, rule=thunk)], [X])
    verify(cj)                                  # unforced: not forced by verify
    assert not thunk.forced and not calls
    thunk()
    with pytest.raises(JaxprTypeError, match=r"in the rule jaxpr Thunk\(@bad\)"):
        verify(cj)


def test_recursive_forced_thunk_terminates():
    probe = PRIMITIVES.get("test_verify_rule") or Primitive("test_verify_rule")
    probe.def_abstract_eval(lambda x, **params: x)
    box = {}
    box["t"] = Thunk(lambda: trace_to_jaxpr(lambda x: [probe.bind(x, rule=box["t"])], [X]), name="r")
    box["t"]()
    verify(trace_to_jaxpr(lambda x: [probe.bind(x, rule=box["t"])], [X]))
