"""Control flow: the traced jaxprs of cond/switch/while_loop/fori_loop/scan/map, the typing
rules of the control-flow, call and custom-derivative primitives, and the error messages.

Bodies use the primitives' ``bind`` directly, so these tests depend only on the IR layer.
"""
import numpy as np
import pytest

import jaxprc  # noqa: F401  (registers every primitive)
from jaxprc.ir import JaxprTypeError, ShapedArray, Thunk, trace_to_jaxpr
from jaxprc.ir import tree_util as tu
from jaxprc import lax as cfp
from jaxprc.lax import control_flow as cf
from jaxprc.lax import custom_derivatives as custom
from jaxprc.lax import elementwise as ew
from jaxprc.lax import shapes

f32, i32, b_ = np.dtype("float32"), np.dtype("int32"), np.dtype("bool")
F = ShapedArray((), f32)
WF = ShapedArray((), f32, weak_type=True)
I = ShapedArray((), i32)
V3 = ShapedArray((3,), f32)

add, mul, sub, sin = ew.add_p.bind, ew.mul_p.bind, ew.sub_p.bind, ew.sin_p.bind
lt = ew.lt_p.bind


def trace(f, *avals):
    """Trace ``f(*args) -> pytree`` on abstract args of the given types."""
    return trace_to_jaxpr(lambda *a: tu.tree_leaves(f(*a)), list(avals))


def eqn_names(cj):
    return [e.primitive.name for e in cj.eqns]


def only_eqn(cj, name):
    eqns = [e for e in cj.eqns if e.primitive.name == name]
    assert len(eqns) == 1, eqn_names(cj)
    return eqns[0]


def types(xs):
    return [x.aval.str_short() for x in xs]


def avals_str(avals):
    return [a.str_short() for a in avals]


def verified(cj):
    """The verifier checks SSA and every typing rule, sub-jaxprs included."""
    from jaxprc.ir.verify import verify
    verify(cj)


# ----------------------------------------------------------------------- cond

def test_cond_branch_order_index_and_types():
    cj = trace(lambda p, x: cf.cond(p, lambda a: sin(a), lambda a: add(a, a), x),
               ShapedArray((), b_), V3)
    assert eqn_names(cj) == ["convert_element_type", "cond"]
    conv, eqn = cj.eqns
    assert conv.params["new_dtype"] == i32 and types(conv.outvars) == ["i32[]"]
    false_br, true_br = eqn.params["branches"]
    assert eqn_names(false_br) == ["add"] and eqn_names(true_br) == ["sin"]   # [false, true]
    assert types(eqn.invars) == ["i32[]", "f32[3]"] and types(eqn.outvars) == ["f32[3]"]
    assert not false_br.consts and not true_br.consts
    verified(cj)


@pytest.mark.parametrize("pred_aval", [I, F, ShapedArray((), np.uint8)])
def test_cond_numeric_predicate_compares_with_zero(pred_aval):
    cj = trace(lambda p, x: cf.cond(p, lambda a: a, lambda a: sin(a), x), pred_aval, F)
    assert eqn_names(cj) == ["ne", "convert_element_type", "cond"]
    assert types(cj.eqns[0].invars) == [pred_aval.str_short()] * 2


@pytest.mark.parametrize("pred,index", [(True, 1), (False, 0), (3, 1), (0.0, 0), (np.bool_(True), 1)])
def test_cond_concrete_predicate_becomes_literal_index(pred, index):
    cj = trace(lambda x: cf.cond(pred, lambda a: a, lambda a: sin(a), x), F)
    idx = only_eqn(cj, "cond").invars[0]
    assert idx.aval == ShapedArray((), i32) and int(idx.val) == index


def test_cond_pytree_operands_and_outputs():
    def f(p, x, y):
        return cf.cond(p, lambda d, t: {"s": add(d["a"], t[0]), "t": (t[1],)},
                       lambda d, t: {"s": d["a"], "t": (sin(t[1]),)}, {"a": x}, (x, y))
    cj = trace(f, ShapedArray((), b_), F, V3)
    eqn = only_eqn(cj, "cond")
    assert types(eqn.invars) == ["i32[]", "f32[]", "f32[]", "f32[3]"]
    assert types(eqn.outvars) == ["f32[]", "f32[3]"]    # dict keys sorted: "s" then "t"
    out = trace_to_jaxpr(lambda p, x, y: [f(p, x, y)["t"][0]], [ShapedArray((), b_), F, V3])
    assert types(out.jaxpr.outvars) == ["f32[3]"]


def test_cond_closures_hoisted_and_shared_between_branches():
    c = np.arange(3, dtype=np.float32)

    def f(p, x, y):
        # true_fun closes over x and y; false_fun over x and a numpy constant.
        return cf.cond(p, lambda: add(x, y), lambda: add(x, c))
    cj = trace(f, ShapedArray((), b_), V3, V3)
    eqn = only_eqn(cj, "cond")
    false_br, true_br = eqn.params["branches"]
    # One operand per distinct closed-over value: x (shared), c, y.
    assert len(eqn.invars) == 4 and len(false_br.jaxpr.invars) == 3 == len(true_br.jaxpr.invars)
    x, y = cj.jaxpr.invars[1:]
    assert eqn.invars[1] is x and y in eqn.invars
    assert len(cj.consts) == 1 and cj.consts[0] is c     # the numpy constant is an outer const
    # Each branch uses the shared operand position for x.
    assert true_br.eqns[0].invars[0] is true_br.jaxpr.invars[0]
    assert false_br.eqns[0].invars[0] is false_br.jaxpr.invars[0]
    verified(cj)


def test_cond_outputs_tolerate_weak_type_and_take_branch_0_types():
    # false_fun (branch 0) returns a strong f32, true_fun a weak one: accepted, as in JAX.
    cj = trace(lambda p, x: cf.cond(p, lambda: 1.0, lambda: x), ShapedArray((), b_), F)
    assert types(only_eqn(cj, "cond").outvars) == ["f32[]"]
    cj = trace(lambda p, x: cf.cond(p, lambda: x, lambda: 1.0), ShapedArray((), b_), F)
    assert types(only_eqn(cj, "cond").outvars) == ["~f32[]"]


def test_cond_error_branch_types_listed():
    with pytest.raises(TypeError) as e:
        trace(lambda p, x: cf.cond(p, lambda a: (a, a), lambda a: (a, ew.convert_element_type_p.bind(
            a, new_dtype=i32, weak_type=False)), x), ShapedArray((), b_), V3)
    msg = str(e.value)      # JAX's words: true_fun first, the path, why the types differ
    assert msg.startswith("cond branches must have equal output types but they differ.\n\ntrue_fun is <lambda> at ")
    assert "The output of true_fun at path [1] has type float32[3] but the corresponding output of false_fun " \
           "has type int32[3], so the dtypes do not match.\n" in msg


def test_cond_error_branch_structure_listed():
    with pytest.raises(TypeError, match=r"(?s)same pytree structure, but they differ:.*true_fun output is a "
                                        r"pytree leaf but false_fun output is a <class 'tuple'>, so their "
                                        r"Python types differ\."):
        trace(lambda p, x: cf.cond(p, lambda a: a, lambda a: (a, a), x), ShapedArray((), b_), F)


def test_cond_error_non_array_leaves():
    with pytest.raises(TypeError, match=r"cond operands\[1\]\['k'\] is a str"):
        trace(lambda p, x: cf.cond(p, lambda a, d: a, lambda a, d: a, x, {"k": "text"}),
              ShapedArray((), b_), F)
    with pytest.raises(TypeError, match=r"cond false_fun \(<lambda> at .*test_control_flow.py:\d+\) output\[1\] is a str"):
        trace(lambda p, x: cf.cond(p, lambda a: (a, "s"), lambda a: (a, "s"), x),
              ShapedArray((), b_), F)


@pytest.mark.parametrize("pred,msg", [
    (None, "cond predicate is None"),
    (np.array([True, False]), r"(?m)^Pred must be a scalar, got \[ True False\] of shape \(2,\)\.$"),
    (1j, r"(?m)^Pred type must be either boolean or number, got complex64\.$"),
])
def test_cond_error_bad_predicate(pred, msg):
    with pytest.raises(TypeError, match=msg):
        trace(lambda x: cf.cond(pred, lambda a: a, lambda a: a, x), F)


def test_cond_legacy_operand_keyword():
    cj = trace(lambda p, x: cf.cond(p, lambda a: sin(a), lambda a: a, operand=x), ShapedArray((), b_), F)
    assert types(only_eqn(cj, "cond").invars) == ["i32[]", "f32[]"]
    with pytest.raises(TypeError, match="operand"):
        trace(lambda p, x: cf.cond(p, lambda a: a, lambda a: a, x, operand=x), ShapedArray((), b_), F)


# --------------------------------------------------------------------- switch

def test_switch_clamps_traced_index():
    branches = [lambda a: a, lambda a: sin(a), lambda a: add(a, a)]
    cj = trace(lambda i, x: cf.switch(i, branches, x), I, V3)
    assert eqn_names(cj) == ["clamp", "cond"]
    lo, _, hi = cj.eqns[0].invars
    assert (int(lo.val), int(hi.val)) == (0, 2)
    assert len(only_eqn(cj, "cond").params["branches"]) == 3
    # An index of another integer type is converted to i32 first.
    cj = trace(lambda i, x: cf.switch(i, branches, x), ShapedArray((), np.uint8), V3)
    assert eqn_names(cj) == ["convert_element_type", "clamp", "cond"]


@pytest.mark.parametrize("index,clamped", [(7, 2), (-3, 0), (1, 1)])
def test_switch_clamps_concrete_index(index, clamped):
    cj = trace(lambda x: cf.switch(index, [lambda a: a, lambda a: sin(a), lambda a: a], x), F)
    assert int(only_eqn(cj, "cond").invars[0].val) == clamped


def test_switch_single_branch_is_called_directly_and_bad_index_rejected():
    cj = trace(lambda i, x: cf.switch(i, [lambda a: sin(a)], x), I, F)
    assert eqn_names(cj) == ["sin"]
    with pytest.raises(TypeError, match=r"(?m)^Index type must be an integer, got .* as float32$"):
        trace(lambda i, x: cf.switch(i, [lambda a: a, lambda a: a], x), F, F)
    with pytest.raises(ValueError, match="(?m)^Empty branch sequence$"):
        trace(lambda i, x: cf.switch(i, [], x), I, F)


# ----------------------------------------------------------------- while_loop

def test_while_loop_consts_carry_and_types():
    def f(x, limit):
        return cf.while_loop(lambda c: lt(c[0], limit),               # cond closes over limit
                             lambda c: (add(c[0], 1), mul(c[1], x)),  # body closes over x
                             (0, x))
    cj = trace(f, V3, I)
    eqn = only_eqn(cj, "while")
    p = eqn.params
    assert (p["cond_nconsts"], p["body_nconsts"]) == (1, 1)
    x, limit = cj.jaxpr.invars
    assert eqn.invars[0] is limit and eqn.invars[1] is x
    assert types(eqn.invars[2:]) == ["~i32[]", "f32[3]"]
    assert types(eqn.outvars) == ["~i32[]", "f32[3]"]
    assert avals_str(p["cond_jaxpr"].out_avals) == ["bool[]"]
    assert avals_str(p["body_jaxpr"].in_avals) == ["f32[3]", "~i32[]", "f32[3]"]
    verified(cj)


def test_while_loop_weak_carry_promoted_when_body_returns_strong_type():
    # 0.0 is a weak f32; the body returns a strong f32: traced again with a strong carry.
    cj = trace(lambda x: cf.while_loop(lambda c: lt(c, x), lambda c: add(c, x), 0.0), F)
    eqn = only_eqn(cj, "while")
    assert types(eqn.invars[2:]) == ["f32[]"] and types(eqn.outvars) == ["f32[]"]
    assert avals_str(eqn.params["body_jaxpr"].in_avals) == ["f32[]", "f32[]"]
    # A weak int carry that the body turns into f32 is promoted to f32.
    to_f32 = lambda c: ew.convert_element_type_p.bind(c, new_dtype=f32, weak_type=False)
    cj = trace(lambda x: cf.while_loop(lambda c: True, lambda c: add(to_f32(c), x), 0), F)
    assert types(only_eqn(cj, "while").outvars) == ["f32[]"]


def test_while_loop_error_carry_types_listed_with_paths():
    to_f32 = lambda c: ew.convert_element_type_p.bind(c, new_dtype=f32, weak_type=False)

    def body(state):
        return {"n": to_f32(state["n"]), "x": state["x"]}
    with pytest.raises(TypeError) as e:
        trace(lambda n, x: cf.while_loop(lambda s: lt(s["x"], s["x"]), body, {"n": n, "x": x}), I, F)
    msg = str(e.value)
    assert msg.startswith("while_loop body function carry input and carry output must have equal types")
    assert "The input carry component state['n'] has type int32[] but the corresponding output " \
           "carry component has type float32[], so the dtypes do not match.\n" in msg
    assert "['x']" not in msg


def test_while_loop_error_structure_and_predicate():
    with pytest.raises(TypeError, match=r"(?s)same pytree structure.*The input carry c is a <class 'tuple'> but the "
                                        r"corresponding component of the carry output is a pytree leaf"):
        trace(lambda x: cf.while_loop(lambda c: lt(c[0], c[1]), lambda c: c[0], (x, x)), F)
    with pytest.raises(TypeError, match=r"(?m)^cond_fun must return a boolean scalar, but got output type\(s\) "
                                        r"\[ShapedArray\(float32\[\]\)\]\.$"):
        trace(lambda x: cf.while_loop(lambda c: c, lambda c: c, x), F)
    with pytest.raises(TypeError, match=r"while_loop init_val\[1\] is a str"):
        trace(lambda x: cf.while_loop(lambda c: True, lambda c: c, (x, "s")), F)


# ------------------------------------------------------------------ fori_loop

def test_fori_loop_concrete_bounds_is_a_scan():
    cj = trace(lambda x: cf.fori_loop(2, 7, lambda i, c: mul(c, x), x), V3)
    eqn = only_eqn(cj, "scan")
    p = eqn.params
    assert p["length"] == 5 and p["num_carry"] == 2 and p["num_consts"] == 1
    assert types(eqn.invars) == ["f32[3]", "~i32[]", "f32[3]"] and int(eqn.invars[1].val) == 2
    assert types(cj.jaxpr.outvars) == ["f32[3]"]
    # Empty range: length 0.
    cj = trace(lambda x: cf.fori_loop(5, 1, lambda i, c: c, x), V3)
    assert only_eqn(cj, "scan").params["length"] == 0


def test_fori_loop_traced_bound_is_a_while_loop():
    cj = trace(lambda n, x: cf.fori_loop(0, n, lambda i, c: mul(c, x), x), I, F)
    eqn = only_eqn(cj, "while")
    assert types(eqn.outvars) == ["~i32[]", "i32[]", "f32[]"]
    with pytest.raises(ValueError, match="unroll"):
        trace(lambda n, x: cf.fori_loop(0, n, lambda i, c: c, x, unroll=2), I, F)
    with pytest.raises(TypeError, match=r"(?m)must have equal types, got int32 and uint8$"):
        trace(lambda n, m, x: cf.fori_loop(n, m, lambda i, c: c, x), I, ShapedArray((), np.uint8), F)


@pytest.mark.parametrize("bounds", ["concrete", "traced"])
def test_fori_loop_carry_errors_name_the_users_body_and_carry(bounds):
    """fori_loop runs a scan or while_loop over (i, val); errors must still be about body_fun
    and paths inside val, never the internal wrapper or its carry tuple."""
    to_i32 = lambda c: ew.convert_element_type_p.bind(c, new_dtype=i32, weak_type=False)
    upper = (lambda n: 4) if bounds == "concrete" else (lambda n: n)

    def body(i, state):
        return {"s": state["s"], "x": to_i32(state["x"])}
    line = body.__code__.co_firstlineno
    with pytest.raises(TypeError) as e:
        trace(lambda n, x: cf.fori_loop(0, upper(n), body, {"s": x, "x": x}), I, V3)
    msg = str(e.value)
    assert msg.startswith("fori_loop body function carry input and carry output must have equal types"), msg
    assert "The input carry component state['x'] has type float32[3] but the corresponding output " \
           "carry component has type int32[3]" in msg
    assert "['s']" not in msg and "control_flow.py" not in msg.replace(__file__, "")

    def grows(i, val):
        return (val, val)
    with pytest.raises(TypeError) as e:
        trace(lambda n, x: cf.fori_loop(0, upper(n), grows, x), I, V3)
    msg = str(e.value)
    assert msg.startswith("fori_loop body function carry input and carry output must have the same pytree "
                          "structure, but they differ:\n\nThe input carry val is a pytree leaf but the "
                          "corresponding component of the carry output is a <class 'tuple'>"), msg

    with pytest.raises(TypeError, match=r"^fori_loop body_fun \(<lambda> at .*\) output\['a'\] "
                                        r"is a str"):
        trace(lambda n, x: cf.fori_loop(0, upper(n), lambda i, v: {"a": "s"}, {"a": x}), I, V3)


# ----------------------------------------------------------------------- scan

def test_scan_pytrees_reverse_and_types():
    def f(c, xs):
        def body(carry, x):
            s, n = carry["s"], carry["n"]
            return {"s": add(s, x["a"]), "n": add(n, 1)}, (mul(s, x["a"]), x["b"])
        return cf.scan(body, {"s": c, "n": 0}, {"a": xs, "b": xs}, reverse=True)
    cj = trace(f, V3, ShapedArray((4, 3), f32))
    eqn = only_eqn(cj, "scan")
    p = eqn.params
    assert p["length"] == 4 and p["reverse"] is True and p["num_carry"] == 2 and p["num_consts"] == 0
    assert p["linear"] == (False,) * 4 and p["unroll"] == 1
    assert types(eqn.invars) == ["~i32[]", "f32[3]", "f32[4,3]", "f32[4,3]"]   # dict keys sorted
    # the y x["b"] is the body's x: the scan does not produce it, xs["b"] is the result (JAX's forwarding)
    assert types(eqn.outvars) == ["~i32[]", "f32[3]", "f32[4,3]"]
    assert cj.jaxpr.outvars[-1] is cj.jaxpr.invars[1]
    assert avals_str(p["jaxpr"].in_avals) == ["~i32[]", "f32[3]", "f32[3]", "f32[3]"]
    verified(cj)


def test_scan_length_without_xs_and_ys_none():
    cj = trace(lambda c: cf.scan(lambda c, _: (sin(c), None), c, length=6), F)
    eqn = only_eqn(cj, "scan")
    assert eqn.params["length"] == 6 and types(eqn.outvars) == ["f32[]"]
    results = []
    trace(lambda c: results.append(cf.scan(lambda c, _: (c, None), c, length=2)) or c, F)
    assert results[0][1] is None          # ys keep the body's (empty) structure


def test_scan_closure_over_outer_tracers_nested():
    def f(w, xs):
        def outer(c, x):
            def inner(c2, _):
                return add(c2, w), None            # w: a tracer two traces out
            c2, _ = cf.scan(inner, x, None, length=2)
            return add(c, c2), c2
        return cf.scan(outer, w, xs)
    cj = trace(f, F, ShapedArray((5,), f32))
    outer_eqn = only_eqn(cj, "scan")
    assert outer_eqn.params["num_consts"] == 1 and outer_eqn.invars[0] is cj.jaxpr.invars[0]
    inner_eqn = only_eqn(outer_eqn.params["jaxpr"], "scan")
    assert inner_eqn.params["num_consts"] == 1
    assert inner_eqn.invars[0] is outer_eqn.params["jaxpr"].jaxpr.invars[0]   # w, hoisted again
    assert types(outer_eqn.outvars) == ["f32[]", "f32[5]"]
    verified(cj)


def test_scan_weak_init_promoted_and_unroll_bool():
    cj = trace(lambda xs: cf.scan(lambda c, x: (add(c, x), c), 0.0, xs, unroll=True),
               ShapedArray((3,), f32))
    eqn = only_eqn(cj, "scan")
    assert types(eqn.invars) == ["f32[]", "f32[3]"] and eqn.params["unroll"] == 3


@pytest.mark.parametrize("kwargs,error,msg", [
    (dict(xs=None), ValueError, "no values to scan over and `length` not provided"),
    (dict(xs=(np.zeros(3, np.float32), np.zeros(4, np.float32))), ValueError,
     r"(?m)different leading axis sizes: 3, 4\.$"),
    (dict(xs=np.zeros(3, np.float32), length=5), ValueError, "`length` argument of 5 which disagrees"),
    (dict(xs=np.float32(1)), TypeError, r"no leading axis to scan over: xs of type f32\[\]"),
    (dict(xs=np.zeros(3, np.float32), unroll=-1), ValueError, "(?m)^`unroll` must be a `bool` or a non-negative `int`.$"),
])
def test_scan_argument_errors(kwargs, error, msg):
    with pytest.raises(error, match=msg):
        trace(lambda c: cf.scan(lambda c, x: (c, c), c, **kwargs), F)


def test_scan_error_carry_type_and_pair():
    to_i32 = lambda c: ew.convert_element_type_p.bind(c, new_dtype=i32, weak_type=False)
    with pytest.raises(TypeError, match=r"scan body function carry input and carry output must have equal types, "
                                        r"but they differ:\n\nThe input carry component carry\[1\] has type "
                                        r"float32\[3\] but the corresponding output carry component has type "
                                        r"int32\[3\], so the dtypes do not match"):
        trace(lambda c: cf.scan(lambda carry, _: ((carry[0], to_i32(carry[1])), None), (c, c),
                                length=2), V3)
    with pytest.raises(TypeError, match=r"(?m)^scan body output must be a pair, got float32\[\]\.$"):
        trace(lambda c: cf.scan(lambda carry, _: carry, c, length=2), F)


def test_map_stacks_outputs():
    cj = trace(lambda xs: cf.map(lambda x: (sin(x["a"]), add(x["a"], x["a"])), {"a": xs}), ShapedArray((4, 2), f32))
    eqn = only_eqn(cj, "scan")
    assert eqn.params["num_carry"] == 0 and types(eqn.outvars) == ["f32[4,2]", "f32[4,2]"]


# ------------------------------------------------------- typing rules (direct)

def closed(f, *avals):
    cj = trace(f, *avals)
    assert not cj.consts
    return cj


ID_F = closed(lambda a: [a], F)
SIN_F = closed(lambda a: [sin(a)], F)
ID_I = closed(lambda a: [a], I)


def test_cond_rule():
    assert cfp.cond_p.abstract_eval(I, F, branches=(ID_F, SIN_F)) == [F]
    assert cfp.cond_p.abstract_eval(I, WF, branches=(ID_F, SIN_F)) == [F]   # weak operand accepted
    with pytest.raises(JaxprTypeError, match=r"cond: branch 1 inputs \(branch 0's\) expected types "
                                             r"\(f32\[\]\) but got \(i32\[\]\)"):
        cfp.cond_p.abstract_eval(I, F, branches=(ID_F, ID_I))
    with pytest.raises(JaxprTypeError, match=r"cond: operands .* expected types \(f32\[\]\) but got "
                                             r"\(i32\[\]\)"):
        cfp.cond_p.abstract_eval(I, I, branches=(ID_F, SIN_F))
    with pytest.raises(JaxprTypeError, match=r"cond: the branch index must be an i32\[\] scalar, got f32\[\]"):
        cfp.cond_p.abstract_eval(F, F, branches=(ID_F, SIN_F))
    with_consts = trace_to_jaxpr(lambda a: [add(a, np.ones(3, f32))], [V3])
    assert len(with_consts.consts) == 1
    with pytest.raises(JaxprTypeError, match="branches\\[0\\] must be a ClosedJaxpr without consts"):
        cfp.cond_p.abstract_eval(I, V3, branches=(with_consts, with_consts))
    with pytest.raises(JaxprTypeError, match="non-empty tuple"):
        cfp.cond_p.abstract_eval(I, F, branches=[ID_F])


def test_while_rule():
    cond_j = closed(lambda lim, c: [lt(c, lim)], I, I)
    body_j = closed(lambda c: [add(c, c)], I)
    kw = dict(cond_jaxpr=cond_j, body_jaxpr=body_j, cond_nconsts=1, body_nconsts=0)
    assert cfp.while_p.abstract_eval(I, I, **kw) == [I]
    with pytest.raises(JaxprTypeError, match=r"while: body_jaxpr inputs \(body consts, carry\) expected "
                                             r"types \(i32\[\]\) but got \(f32\[\]\)"):
        cfp.while_p.abstract_eval(I, F, **dict(kw, cond_jaxpr=closed(lambda lim, c: [True], I, F)))
    with pytest.raises(JaxprTypeError, match=r"cond_jaxpr must return one boolean scalar.*i32\[\]"):
        cfp.while_p.abstract_eval(I, **dict(kw, cond_jaxpr=ID_I, cond_nconsts=0))
    bad_body = closed(lambda c: [ew.convert_element_type_p.bind(c, new_dtype=f32, weak_type=False)], I)
    with pytest.raises(JaxprTypeError, match=r"body_jaxpr outputs \(the carry it takes\) expected types "
                                             r"\(i32\[\]\) but got \(f32\[\]\)"):
        cfp.while_p.abstract_eval(I, I, **dict(kw, body_jaxpr=bad_body))
    with pytest.raises(JaxprTypeError, match=r"cond_nconsts must be an int in \[0, 2\]"):
        cfp.while_p.abstract_eval(I, I, **dict(kw, cond_nconsts=3))


def test_scan_rule():
    body = closed(lambda k, c, x: [add(c, mul(k, x)), sin(x)], F, F, F)
    kw = dict(jaxpr=body, length=4, reverse=False, unroll=1, num_consts=1, num_carry=1,
              linear=(False,) * 3)
    X = ShapedArray((4,), f32)
    assert cfp.scan_p.abstract_eval(F, F, X, **kw) == [F, ShapedArray((4,), f32)]
    with pytest.raises(JaxprTypeError, match=r"leading axis of the scan length 4, got \(f32\[5\]\)"):
        cfp.scan_p.abstract_eval(F, F, ShapedArray((5,), f32), **kw)
    with pytest.raises(JaxprTypeError, match=r"scan: jaxpr inputs .* expected types \(f32\[\], f32\[\], "
                                             r"f32\[\]\) but got \(f32\[\], i32\[\], f32\[\]\)"):
        cfp.scan_p.abstract_eval(F, I, X, **kw)
    with pytest.raises(JaxprTypeError, match="linear must be a tuple of 3 bools"):
        cfp.scan_p.abstract_eval(F, F, X, **dict(kw, linear=(False,)))
    bad = closed(lambda c: [ew.convert_element_type_p.bind(c, new_dtype=i32, weak_type=False)], F)
    with pytest.raises(JaxprTypeError, match=r"carry outputs \(its carry inputs\) expected types "
                                             r"\(f32\[\]\) but got \(i32\[\]\)"):
        cfp.scan_p.abstract_eval(F, **dict(kw, jaxpr=bad, num_consts=0, linear=(False,)))
    with pytest.raises(JaxprTypeError, match="length must be a non-negative int"):
        cfp.scan_p.abstract_eval(F, F, X, **dict(kw, length=-1))


@pytest.mark.parametrize("prim,params", [
    (cfp.jit_p, dict(name="f")),
    (cfp.checkpoint_p, dict(prevent_cse=True, policy=None)),
])
def test_call_rules(prim, params):
    callee = closed(lambda a, b: [sin(a), mul(b, b)], V3, F)
    assert prim.abstract_eval(V3, WF, jaxpr=callee, **params) == [V3, F]
    with pytest.raises(JaxprTypeError, match=rf"{prim.name}: arguments \(the callee's inputs\) expected "
                                             r"types \(f32\[3\], f32\[\]\) but got \(f32\[3\]\)"):
        prim.abstract_eval(V3, jaxpr=callee, **params)


def test_checkpoint_policy_param_and_name_rule():
    callee = closed(lambda a: [sin(a)], V3)
    policy = cfp.CheckpointPolicy("save_only_these_names", ("h",))
    for ok in (None, policy, lambda prim, *avals, **params: True):
        assert cfp.checkpoint_p.abstract_eval(V3, jaxpr=callee, prevent_cse=False, policy=ok) == [V3]
    for bad, msg in [(cfp.CheckpointPolicy("dots"), "unknown policy kind 'dots'; expected one of "
                                                     "everything_saveable"),
                     (cfp.CheckpointPolicy("save_only_these_names", ("h", 3)), "names must be a "
                                                                               "tuple of strings"),
                     ("dots_saveable", "policy must be None, a CheckpointPolicy or a callable")]:
        with pytest.raises(JaxprTypeError, match=msg):
            cfp.checkpoint_p.abstract_eval(V3, jaxpr=callee, prevent_cse=False, policy=bad)
    # policies decide per primitive, matching values tagged by the name primitive
    assert policy(cfp.name_p, V3, name="h") and not policy(cfp.name_p, V3, name="g")
    assert not policy(ew.sin_p, V3)
    assert cfp.name_p.abstract_eval(WF, name="h") == WF
    with pytest.raises(JaxprTypeError, match="name: param name must be a string, got 3"):
        cfp.name_p.abstract_eval(F, name=3)


def test_checkpoint_policy_and_name_are_ir_and_parse():
    """The parser finds the name primitive and the CheckpointPolicy param type in the IR's own
    registries (the IR layer defines them; passes only add rules)."""
    from jaxprc.ir import PARAM_TYPES, PRIMITIVES, parse
    assert PARAM_TYPES["CheckpointPolicy"] is cfp.CheckpointPolicy and PRIMITIVES["name"] is cfp.name_p
    cj = parse('{ lambda ; a:f32[3]. let b:f32[3] = checkpoint[jaxpr={ lambda ; c:f32[3]. let '
               'd:f32[3] = name[name="h"] c in (d,) } prevent_cse=True '
               'policy=CheckpointPolicy(kind="save_only_these_names", names=("h",))] a in (b,) }')
    eqn = only_eqn(cj, "checkpoint")
    assert eqn.params["policy"] == cfp.CheckpointPolicy("save_only_these_names", ("h",))
    assert only_eqn(eqn.params["jaxpr"], "name").primitive is cfp.name_p


def test_custom_rules():
    fun = closed(lambda k, x: [mul(sin(x), x)], F, V3)
    thunk = Thunk(lambda: fun, name="f_jvp")
    jvp_kw = dict(fun_jaxpr=fun, jvp_jaxpr_thunk=thunk, num_consts=1, symbolic_zeros=False)
    assert custom.custom_jvp_call_jaxpr_p.abstract_eval(F, V3, **jvp_kw) == [V3]
    assert not thunk.forced    # typing never forces rule thunks (rules may recurse)
    with pytest.raises(JaxprTypeError, match=r"custom_jvp_call_jaxpr: operands .* expected types "
                                             r"\(f32\[\], f32\[3\]\) but got \(f32\[\], i32\[\]\)"):
        custom.custom_jvp_call_jaxpr_p.abstract_eval(F, I, **jvp_kw)
    with pytest.raises(JaxprTypeError, match="num_consts must be an int in"):
        custom.custom_jvp_call_jaxpr_p.abstract_eval(F, V3, **dict(jvp_kw, num_consts=3))
    vjp_kw = dict(fun_jaxpr=fun, fwd_jaxpr_thunk=thunk, bwd=lambda *a: a, num_consts=0,
                  out_trees=lambda: None, symbolic_zeros=False)
    assert custom.custom_vjp_call_jaxpr_p.abstract_eval(F, V3, **vjp_kw) == [V3]
    with pytest.raises(JaxprTypeError, match="bwd must be a thunk or callable"):
        custom.custom_vjp_call_jaxpr_p.abstract_eval(F, V3, **dict(vjp_kw, bwd=3))
    lin_kw = dict(num_res=1, bwd=lambda *a: a, out_avals=(V3,), symbolic_zeros=False)
    assert custom.custom_lin_p.abstract_eval(F, V3, **lin_kw) == [V3]
    with pytest.raises(JaxprTypeError, match="out_avals must be a tuple of ShapedArrays"):
        custom.custom_lin_p.abstract_eval(F, V3, **dict(lin_kw, out_avals=[V3]))
    with pytest.raises(JaxprTypeError, match=r"num_res must be an int in \[0, 2\]"):
        custom.custom_lin_p.abstract_eval(F, V3, **dict(lin_kw, num_res=5))


def test_primitives_are_registered_with_multiple_results():
    from jaxprc.ir import PRIMITIVES
    for name in ["cond", "while", "scan", "jit", "checkpoint", "custom_jvp_call_jaxpr",
                 "custom_vjp_call_jaxpr", "custom_lin"]:
        assert PRIMITIVES[name].multiple_results, name


# ------------------------------------------------------------- numbers (XLA)
# Eager (top level: each primitive runs through its XLA impl) and under jit,
# against plain Python/numpy loops.

def _np(x):
    return np.asarray(x)


@pytest.mark.parametrize("pred", [True, False, 0, 2, 0.5])
def test_cond_eager_values(pred):
    x = np.arange(3, dtype=np.float32)
    out = cf.cond(pred, lambda a, d: {"r": sin(a), "k": d}, lambda a, d: {"r": add(a, a), "k": mul(d, d)},
                  x, np.float32(3))
    want_r, want_k = (np.sin(x), 3.0) if pred else (x + x, 9.0)
    np.testing.assert_allclose(_np(out["r"]), want_r, rtol=1e-6)
    assert float(_np(out["k"])) == want_k


def test_switch_jit_clamps_index():
    branches = [lambda a: sin(a), lambda a: ew.cos_p.bind(a), lambda a: ew.neg_p.bind(a)]
    f = jaxprc.jit(lambda i, x: cf.switch(i, branches, x))
    x = np.float32(0.5)
    for i, want in [(-5, np.sin(x)), (0, np.sin(x)), (1, np.cos(x)), (2, -x), (9, -x)]:
        np.testing.assert_allclose(_np(f(np.int32(i), x)), want, rtol=1e-6)
    assert float(_np(cf.switch(9, branches, x))) == -0.5      # eager, concrete index


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_while_loop_eager_and_jit_against_python():
    def steps(n):
        def body(s):
            n, k = s
            even = ew.eq_p.bind(ew.rem_p.bind(n, np.int32(2)), np.int32(0))
            half = ew.div_p.bind(n, np.int32(2))
            odd = add(mul(n, np.int32(3)), np.int32(1))
            return ew.select_n_p.bind(even, odd, half), add(k, np.int32(1))
        return cf.while_loop(lambda s: ew.ne_p.bind(s[0], np.int32(1)), body, (n, np.int32(0)))[1]
    jitted = jaxprc.jit(steps)
    for n in (1, 6, 27):
        assert int(_np(jitted(np.int32(n)))) == _collatz_steps(n)
    assert int(_np(steps(np.int32(7)))) == _collatz_steps(7)


def test_fori_loop_concrete_and_traced_bounds():
    def power(n, x):
        return cf.fori_loop(0, n, lambda i, c: mul(c, x), np.float32(1))
    assert float(_np(power(5, np.float32(2)))) == 32.0                # scan, eager
    assert float(_np(jaxprc.jit(power)(np.int32(5), np.float32(2)))) == 32.0   # while under jit
    # The index counts from lower: sum of i for i in range(3, 8).
    total = cf.fori_loop(3, 8, lambda i, c: add(c, i), 0)
    assert int(_np(total)) == sum(range(3, 8))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_pytree_against_numpy_loop(reverse):
    xs = {"a": np.arange(12, dtype=np.float32).reshape(4, 3), "b": np.linspace(0, 1, 4, dtype=np.float32)}
    w = np.float32(0.5)

    def f(w_, xs_):
        bcast = lambda v: shapes.broadcast_in_dim_p.bind(v, shape=(3,), broadcast_dimensions=())

        def body(carry, x):
            s, n = carry
            s2 = add(mul(s, bcast(w_)), mul(x["a"], bcast(x["b"])))   # closes over the jit arg w_
            return (s2, add(n, 1)), (s2, n)
        return cf.scan(body, (np.zeros(3, np.float32), 0), xs_, reverse=reverse)

    f = jaxprc.jit(f)
    (s, n), (ss, ns) = f(w, xs)
    order = range(3, -1, -1) if reverse else range(4)
    want_s, want_ss, want_ns = np.zeros(3, np.float32), np.zeros((4, 3), np.float32), np.zeros(4, np.int32)
    for k, i in enumerate(order):
        want_ns[i] = k
        want_s = want_s * w + xs["a"][i] * xs["b"][i]
        want_ss[i] = want_s
    np.testing.assert_allclose(_np(s), want_s, rtol=1e-6)
    np.testing.assert_allclose(_np(ss), want_ss, rtol=1e-6)
    assert int(_np(n)) == 4 and list(_np(ns)) == list(want_ns)


def test_scan_closure_over_jit_tracer_and_nested_control_flow():
    def f(w, xs):
        def body(c, x):
            # A cond inside the body; both branches close over w, an outer jit tracer.
            y = cf.cond(lt(x, np.float32(2)), lambda: mul(x, w), lambda: sub(x, w))
            return add(c, y), y
        return cf.scan(body, np.float32(0), xs)
    xs = np.arange(5, dtype=np.float32)
    c, ys = jaxprc.jit(f)(np.float32(10), xs)
    want = np.where(xs < 2, xs * 10, xs - 10)
    np.testing.assert_allclose(_np(ys), want)
    assert float(_np(c)) == want.sum()
    c_eager, ys_eager = f(np.float32(10), xs)
    np.testing.assert_allclose(_np(ys_eager), want)


def test_map_and_zero_length_scan():
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(_np(cf.map(lambda x: sin(x), xs)), np.sin(xs), rtol=1e-6)
    c, ys = cf.scan(lambda c, x: (add(c, x), c), np.float32(1), np.zeros((0,), np.float32))
    assert float(_np(c)) == 1.0 and _np(ys).shape == (0,)


def test_custom_jvp_node_inside_scan_body_keeps_its_rule_and_runs_fun_jaxpr():
    fun = closed(lambda x: [sin(x)], V3)
    rule = Thunk(lambda: closed(lambda x, t: [sin(x), mul(ew.cos_p.bind(x), t)], V3, V3), name="f_jvp")

    def f(c):
        custom_sin = lambda x: custom.custom_jvp_call_jaxpr_p.bind(
            x, fun_jaxpr=fun, jvp_jaxpr_thunk=rule, num_consts=0, symbolic_zeros=False)[0]
        return cf.scan(lambda c, _: (custom_sin(c), c), c, length=2)
    cj = trace(f, V3)
    body = only_eqn(cj, "scan").params["jaxpr"]
    node = only_eqn(body, "custom_jvp_call_jaxpr")
    assert node.params["jvp_jaxpr_thunk"] is rule and not rule.forced
    verified(cj)
    x = np.linspace(0, 1, 3, dtype=np.float32)
    c, ys = f(x)                                   # eager: the node runs fun_jaxpr
    np.testing.assert_allclose(_np(c), np.sin(np.sin(x)), rtol=1e-6)
    np.testing.assert_allclose(_np(ys), np.stack([x, np.sin(x)]), rtol=1e-6)


def test_control_flow_programs_round_trip_through_text():
    from jaxprc.ir.parser import parse

    def f(n, x, xs):
        y = cf.while_loop(lambda c: lt(c[0], n), lambda c: (add(c[0], 1), mul(c[1], x)), (0, x))[1]
        z = cf.switch(n, [lambda a: a, lambda a: sin(a), lambda a: mul(a, a)], y)
        return cf.scan(lambda c, x_: (add(c, x_), cf.cond(lt(c, x_), lambda: c, lambda: x_)), z, xs,
                       reverse=True)
    cj = trace(f, I, F, ShapedArray((4,), f32))
    text = str(cj)
    back = parse(text)
    assert str(back) == text and back == cj


def test_map_with_batch_size_is_map_in_batches_plus_a_remainder():
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    f = lambda v: {"s": jaxprc.numpy.sum(v) * 2, "v": v[::-1] + 1}
    want = cfp.map(f, x)
    for bs in (0, 1, 3, 5, 10, 12):
        got = jaxprc.jit(lambda x: cfp.map(f, x, batch_size=bs))(x)
        np.testing.assert_array_equal(got["s"], want["s"])
        np.testing.assert_array_equal(got["v"], want["v"])
    # 10 = 3 * 3 + 1: one scan over three batches of three, then one vmapped remainder
    jaxpr = jaxprc.make_jaxpr(lambda x: cfp.map(f, x, batch_size=3))(x).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns].count("scan") == 1
    g = jaxprc.grad(lambda x: jaxprc.numpy.sum(cfp.map(lambda v: jaxprc.numpy.sum(v ** 2), x, batch_size=3)))(x)
    np.testing.assert_allclose(g, 2 * x)
    with pytest.raises(ValueError, match="batch_size must be a non-negative int"):
        cfp.map(f, x, batch_size=-1)
