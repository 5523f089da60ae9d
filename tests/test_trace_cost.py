"""The Python cost of tracing, transforming and lowering, per equation (issue 23).

Timings depend on the machine's load; the number of Python function calls does not. Each
budget is the count measured when the per-equation overhead was last cut, plus about a fifth:
a change that makes every equation pay for more Python fails here, and says where.
"""
import sys

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.ir import core as ir_core
from jaxprc.ir.tracing import trace_state

STEPS = 50                      # tanh, cos, mul, add per step: 4 equations each
EQNS = 4 * STEPS
X = np.linspace(-1, 1, 8, dtype=np.float32)
XS = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)


def chain(x):
    for _ in range(STEPS):
        x = jnp.tanh(x) * jnp.cos(x) + x
    return x


def python_calls_per_eqn(fn) -> float:
    """Python function calls per equation of the chain made by ``fn()`` (a warm second run),
    with the passes unverified, as by default outside the tests."""
    jx.config.update("jaxprc_verify_passes", False)      # the autouse fixture turns it on again
    fn()
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1
    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls / EQNS


# name -> (what is measured, calls per equation allowed; measured: 21, 223, 50, 35)
CASES = {
    "make_jaxpr": (lambda: jx.make_jaxpr(chain)(X), 26),
    "make_jaxpr(grad)": (lambda: jx.make_jaxpr(jx.grad(lambda x: jnp.sum(chain(x))))(X), 270),
    "make_jaxpr(vmap)": (lambda: jx.make_jaxpr(jx.vmap(chain))(XS), 60),
    "jit.lower.as_text": (lambda: jx.jit(chain).lower(X).as_text(), 42),
}


@pytest.mark.parametrize("name", list(CASES))
def test_python_calls_per_equation(name):
    fn, budget = CASES[name]
    per_eqn = python_calls_per_eqn(fn)
    assert per_eqn <= budget, (f"{name}: {per_eqn:.1f} Python calls per equation, budget {budget}; "
                               "profile it (python -m cProfile -s tottime) to see what grew")


def test_loop_body_equations_share_locations_and_keep_their_lines():
    """Lowering caches a location per (primitive, file, line, column, scope): each op of a loop
    body is located at its line and column (that of ``jnp``, 16), and ops written on different
    lines keep their own."""
    def f(x):
        for _ in range(3):
            x = jnp.sin(x)
            x = jnp.cos(x)
        return x
    text = jx.jit(f).lower(X).as_text(debug_info=True)
    line_sin = f.__code__.co_firstlineno + 2
    assert text.count("stablehlo.sine") == 3 and text.count("stablehlo.cosine") == 3
    # the printer names each distinct location once (#locN = loc(...)) and ops refer to it
    assert text.count(f'loc("{__file__}":{line_sin}:16)') == 1
    assert text.count(f'loc("{__file__}":{line_sin + 1}:16)') == 1
    assert text.count('loc("sin"(') == 1 and text.count('loc("cos"(') == 1


def test_directly_built_ops_have_the_equation_types():
    """Elementwise ops are created with the equation's output type (no inference): results whose
    type differs from the operands' (bool, the real part of a complex) come out right."""
    z = np.array([1 + 2j, -3j], np.complex64)

    def f(z, x):
        return jnp.isfinite(x), jnp.real(z), jnp.imag(z), lax_ops(x)

    def lax_ops(x):
        return jx.lax.population_count(x.astype(np.uint16))
    text = jx.jit(f).lower(z, X).as_text()
    assert "stablehlo.is_finite %arg1 : (tensor<8xf32>) -> tensor<8xi1>" in text
    assert "stablehlo.real %arg0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>" in text
    assert "stablehlo.popcnt" in text
    finite, re, im, pop = jx.jit(f)(z, X)
    np.testing.assert_array_equal(finite, np.ones(8, bool))
    np.testing.assert_array_equal(re, z.real)
    np.testing.assert_array_equal(im, z.imag)
    assert np.asarray(pop).dtype == np.uint16


def test_a_failing_rule_inside_a_pass_restores_the_location():
    """The passes set each replayed equation's location on the thread's record; a rule that
    raises leaves the record as it was (equations traced afterwards get the user's line)."""
    prim = ir_core.Primitive("trace_cost_no_jvp")        # no jvp rule: the jvp pass raises in its loop
    prim.def_abstract_eval(lambda x: x)
    try:
        with pytest.raises(NotImplementedError, match="trace_cost_no_jvp"):
            jx.make_jaxpr(jx.grad(lambda x: jnp.sum(prim.bind(jnp.sin(x)))))(X)
    finally:
        ir_core.PRIMITIVES.pop(prim.name)
    assert trace_state.location.source is None
    jaxpr = jx.make_jaxpr(lambda x: jnp.sum(jnp.sin(x)))(X)
    assert all(e.source_info is not None and e.source_info.file == __file__ for e in jaxpr.jaxpr.eqns)
