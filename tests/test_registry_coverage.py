"""Every primitive of the registry has a rule in every pass where its operation is
defined (typing, lowering, jvp, vmap, and transpose where it is linear), else applying the
pass raises a NotImplementedError naming the primitive and the pass.

The built-in primitives are those a fresh ``import jaxprc`` registers (conftest.py's ``builtins``).
The few intentional gaps are listed in EXCEPTIONS, each with its reason and a test that the pass
fails as it should.
"""
import numpy as np
import pytest

import jaxprc as jx
from jaxprc.ir.core import Primitive, ShapedArray
from jaxprc.engine.lowering import _rule_for
from jaxprc.passes import jvp_rules, transpose_rules
from jaxprc.passes.vmap import batch_rules

# Primitives linear in some operand (the others held fixed): reverse mode transposes them.
LINEAR = {
    "add", "sub", "neg", "mul", "div", "dot_general", "convert_element_type", "copy", "real", "imag", "complex",
    "conj", "reduce_sum", "cumsum", "broadcast_in_dim", "reshape", "transpose", "squeeze", "rev",
    "slice", "pad", "concatenate", "dynamic_slice", "dynamic_update_slice", "gather", "scatter",
    "scatter-add", "scatter-mul", "select_n",
    "jit", "cond", "scan", "while", "checkpoint", "name",   # calls and control flow: their bodies
    "custom_lin",   # a linearized custom_vjp call: transposing it calls bwd
    "custom_jvp_call_jaxpr",   # a rule applied its own function to tangents: linear through it
    "debug_callback",   # printing tangents: the transpose drops the print, as in JAX
    "pure_callback", "io_callback",   # their transpose rules raise JAX's error
    "fft",
    "custom_linear_solve",   # linear in b: transposing solves the transposed system
    "reduce_precision", "optimization_barrier",
    "triangular_solve", "tridiagonal_solve",   # linear in the right-hand side b
    "conv_general_dilated", "reduce_window_sum", "select_and_gather_add", "select_and_scatter_add",
    "sharding_constraint",   # a layout request: its tangent and cotangent get the same one
    "shard_map", "psum", "ppermute",   # the body's transpose; psum <-> psum, ppermute back
    "all_gather", "psum_scatter",   # each the other's transpose
    "all_to_all",   # its transpose swaps split and concat axes
    "ragged_all_to_all",   # linear in (operand, output): the slices go back where they came from
    "pbroadcast",   # its transpose sums the cotangents onto the source device
    "pvary",   # a type cast: the cotangent passes (shard_map's transpose sums replicated arguments')
    "host_local_array_to_global_array", "global_array_to_host_local_array",   # each the other's transpose
    "linear_call",   # linear in its linear arguments: transposing it calls the user's transpose
}

# (pass, primitive) -> why the pass has no rule for it.
EXCEPTIONS = {
    ("jvp", "custom_lin"): "it only lives in linear programs, to be transposed (forward mode through "
                           "a custom_vjp function is an error, as in JAX)",
    ("vmap", "iota"): "it has no operands, so it is never batched: the pass re-emits it as it is",
    ("vmap", "call_exported"): "as in JAX: a serialized module is not batched",
    ("vmap", "dim_as_value"): "it has no operands, so it is never batched: the pass re-emits it as it is",
    ("jvp", "composite"): "as in JAX: wrap the composite in custom_jvp to differentiate it",
    ("vmap", "composite"): "as in JAX: a composite has no batching rule",
    ("jvp", "pmax"): "no derivative, as in JAX",
    ("jvp", "pmin"): "no derivative, as in JAX",
}


def _lowers(prim) -> bool:
    try:
        _rule_for(prim, "cpu")
    except NotImplementedError:
        return False
    return True


HAS_RULE = {
    "typing": lambda p: p.abstract_eval_rule is not None,
    "lowering": _lowers,
    "jvp": lambda p: p in jvp_rules,
    "vmap": lambda p: p in batch_rules,
}


@pytest.mark.parametrize("pass_name", sorted(HAS_RULE))
def test_every_builtin_primitive_has_a_rule(builtins, pass_name):
    missing = {p.name for p in builtins if not HAS_RULE[pass_name](p)}
    expected = {name for (pass_, name) in EXCEPTIONS if pass_ == pass_name}
    assert missing == expected, f"{pass_name}: no rule for {sorted(missing - expected)}; " \
                                f"listed as exceptions but has a rule: {sorted(expected - missing)}"


def test_linear_primitives_have_transpose_rules(builtins):
    names = {p.name for p in builtins}
    assert LINEAR <= names, f"unknown names in LINEAR: {sorted(LINEAR - names)}"
    with_rule = {p.name for p in builtins if p in transpose_rules}
    assert with_rule == LINEAR, (f"linear without a transpose rule: {sorted(LINEAR - with_rule)}; "
                                 f"a transpose rule but not listed as linear: {sorted(with_rule - LINEAR)}")


def test_jvp_of_custom_lin_names_primitive_and_pass():
    from jaxprc.passes import linearize_jaxpr
    from jaxprc.passes.jvp import jvp

    @jx.custom_vjp
    def f(x):
        return jx.numpy.sin(x)
    f.defvjp(lambda x: (f(x), x), lambda x, ct: (ct,))
    _, lin, _, _ = linearize_jaxpr(jx.make_jaxpr(f)(1.), [True])
    assert any(e.primitive.name == "custom_lin" for e in lin.eqns)
    with pytest.raises(NotImplementedError, match=r"'custom_lin'.*jvp pass"):
        jvp(lin)


def test_vmap_reemits_iota_unbatched():
    from jaxprc import lax
    from jaxprc.passes.vmap import vmap_jaxpr
    cj = jx.make_jaxpr(lambda x: lax.add(x, lax.iota(np.float32, 3)))(np.zeros(3, np.float32))
    batched = vmap_jaxpr(cj, in_axes=0, axis_size=2)
    iota = [e for e in batched.eqns if e.primitive.name == "iota"]
    assert iota and iota[0].outvars[0].aval.shape == (3,)
    np.testing.assert_allclose(jx.jaxpr_as_fun(batched)(np.ones((2, 3), np.float32))[0], [[1, 2, 3]] * 2)


@pytest.fixture(scope="module")
def ruleless():
    """A primitive with a typing rule and an impl, and no rule in any pass."""
    p = Primitive("coverage_ruleless")
    p.def_abstract_eval(lambda a: ShapedArray(a.shape, a.dtype))
    p.def_impl(lambda x: x)
    return p


@pytest.mark.parametrize("pass_name, apply", [
    ("jvp", lambda p: jx.jvp(p.bind, (np.float32(1),), (np.float32(1),))),
    ("vmap", lambda p: jx.vmap(p.bind)(np.ones(2, np.float32))),
    ("transpose", lambda p: jx.linear_transpose(p.bind, np.float32(1))(np.float32(1))),
    ("lowering", lambda p: jx.jit(p.bind).lower(np.float32(1)).as_text()),
])
def test_a_pass_without_a_rule_names_primitive_and_pass(ruleless, pass_name, apply):
    with pytest.raises(NotImplementedError) as info:
        apply(ruleless)
    message = str(info.value)
    assert "'coverage_ruleless'" in message and pass_name in message.lower()
