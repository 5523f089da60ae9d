"""custom_vmap, sequential_vmap and linear_call against JAX: one program, written over the
library, runs under both; values, dtypes, weak types, derivatives and errors must agree."""
import jax
import jax.custom_batching  # noqa: F401
import jax.custom_derivatives  # noqa: F401
import numpy as np
import pytest

import jaxprc

F32 = np.float32
XS = np.linspace(-1.0, 1.5, 3, dtype=F32)
YS = np.linspace(0.5, 2.0, 3, dtype=F32)


def leaves(out):
    """(value, dtype, weak type) of each leaf."""
    return [(np.asarray(x), np.asarray(x).dtype, getattr(x, "weak_type", None))
            for x in jax.tree_util.tree_leaves(out)]


def run(program):
    """``program(lib, calls)`` under both libraries: per library, the output structure, its
    leaves and the rule calls recorded."""
    results = []
    for lib in (jax, jaxprc):
        calls = []
        out = program(lib, calls)
        results.append((jax.tree_util.tree_structure(out), leaves(out), calls))
    return results


def assert_same(program, tol=1e-6, rule_calls=True):
    (their_tree, theirs, their_calls), (our_tree, ours, our_calls) = run(program)
    assert our_tree == their_tree
    for (a, da, wa), (b, db, wb) in zip(theirs, ours):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
        assert (db, wb) == (da, wa)
    if rule_calls:
        assert our_calls == their_calls


def sin_mul(lib, calls):
    @lib.custom_batching.custom_vmap
    def f(x, y):
        return lib.numpy.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        calls.append((axis_size, list(in_batched)))
        return lib.numpy.cos(xs) * ys, in_batched[0] or in_batched[1]
    return f


@pytest.mark.parametrize("name, program", [
    ("call", lambda lib, c: sin_mul(lib, c)(XS[0], YS[0])),
    ("vmap", lambda lib, c: lib.vmap(sin_mul(lib, c))(XS, YS)),
    ("vmap_in_axes", lambda lib, c: lib.vmap(sin_mul(lib, c), in_axes=(None, 0))(XS[0], YS)),
    ("jit_vmap", lambda lib, c: lib.jit(lib.vmap(sin_mul(lib, c)))(XS, YS)),
    ("vmap_jit", lambda lib, c: lib.vmap(lib.jit(sin_mul(lib, c)))(XS, YS)),
    ("nested", lambda lib, c: lib.vmap(lib.vmap(sin_mul(lib, c)))(np.outer(XS, YS), np.outer(YS, XS))),
    ("jvp", lambda lib, c: lib.jvp(sin_mul(lib, c), (XS, YS), (YS, XS))),
    ("vmap_jvp", lambda lib, c: lib.vmap(lambda x, y: lib.jvp(sin_mul(lib, c), (x, y), (y, x)))(XS, YS)),
    ("vmap_jvp_unbatched_tangents", lambda lib, c: lib.vmap(
        lambda x: lib.jvp(sin_mul(lib, c), (x, F32(2.0)), (F32(1.0), F32(0.5))))(XS)),
    ("jvp_vmap", lambda lib, c: lib.jvp(lib.vmap(sin_mul(lib, c)), (XS, YS), (YS, XS))),
    ("grad_vmap", lambda lib, c: lib.grad(lambda x: lib.vmap(sin_mul(lib, c))(x, YS).sum())(XS)),
    ("weak", lambda lib, c: (sin_mul(lib, c)(1.0, 2.0), lib.vmap(sin_mul(lib, c), in_axes=(0, None))(XS, 2.0))),
])
def test_custom_vmap_matches_jax(name, program):
    assert_same(program)


def test_sequential_vmap_and_stacked_custom_vjp_match_jax():
    def program(lib, calls):
        jnp = lib.numpy
        s = lib.custom_batching.sequential_vmap(lambda x, y: jnp.sum(x) * y + 1.0)

        @lib.custom_vjp
        @lib.custom_batching.custom_vmap
        def f(x, y):
            return jnp.sin(x) * y
        f.def_vmap(lambda n, b, xs, ys: (jnp.cos(xs) * ys, True))
        f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(x), y)),
                 lambda res, g: (res[0] * g * res[2], res[1] * g))
        m = np.arange(6, dtype=F32).reshape(3, 2)
        return (lib.vmap(s, (0, None))(m, F32(2.0)), lib.vmap(s, (None, 0))(m[0], YS),
                lib.jit(lib.vmap(lib.vmap(s)))(np.ones((2, 3, 4), F32), np.ones((2, 3), F32)),
                lib.vmap(f)(XS, YS), lib.grad(f)(F32(0.3), F32(2.0)), lib.vmap(lib.grad(f))(XS, YS))
    assert_same(program)


def test_custom_vmap_errors_match_jax():
    def with_rule(lib, rule):
        f = lib.custom_batching.custom_vmap(lambda x: x * 2.0)
        f.def_vmap(rule)
        return f
    cases = [
        (lambda lib: lib.custom_batching.custom_vmap(lambda x: x)(1.0), AttributeError,
         "No batching rule defined for custom_vmap function <lambda> using def_vmap."),
        (lambda lib: lib.vmap(with_rule(lib, lambda n, b, x: ((x, x), True)))(XS), ValueError,
         "structure of output value and output batching specification returned by custom vmap rule "
         "(<lambda>) do not match."),
        (lambda lib: lib.vmap(with_rule(lib, lambda n, b, x: ((x, x), (True, True))))(XS), ValueError,
         "structure of output returned by custom vmap rule (<lambda>) does not match that of original "
         "custom-vmapped function."),
        (lambda lib: lib.grad(with_rule(lib, lambda n, b, x: (x, True)))(1.0), ValueError,
         "Linearization failed to produce known values for all output primals."),
        (lambda lib: lib.grad(lambda x: lib.vmap(lib.custom_batching.sequential_vmap(lib.numpy.sin))(x).sum())(XS),
         ValueError, "Linearization failed to produce known values for all output primals."),
        (lambda lib: with_rule(lib, lambda n, b, x: (x, True))(1.0, 2.0), TypeError,
         "could not be resolved to positional-only arguments"),
    ]
    for call, error, message in cases:
        for lib in (jax, jaxprc):
            with pytest.raises(error) as e:
                call(lib)
            assert message in str(e.value), (lib.__name__, str(e.value))


def div_add(lib, x, denom):
    lc = lib.custom_derivatives.linear_call
    return x + lc(lambda r, x: x / r, lambda r, ct: 2.0 * ct / r, denom, x)


def custom_id(lib, x):
    return lib.custom_derivatives.linear_call(lambda _, x: x, lambda _, t: 7.0 * t, (), x)


def transpose(lib, f, x_example):
    return lambda y: lib.linear_transpose(f, x_example)(y)[0]


@pytest.mark.parametrize("name, program", [
    ("value", lambda lib, c: (div_add(lib, XS, YS), lib.jit(lambda x, d: div_add(lib, x, d))(XS, YS))),
    ("jvp", lambda lib, c: lib.jvp(lambda x: div_add(lib, x, F32(3.0)), (XS,), (YS,))),
    ("grad", lambda lib, c: lib.grad(lambda x: lib.numpy.sum(div_add(lib, x, YS) ** 2))(XS)),
    ("transposes", lambda lib, c: (transpose(lib, lambda x: div_add(lib, x, F32(3.0)), F32(1.0))(F32(18.0)),
                                   transpose(lib, lambda x: custom_id(lib, x), F32(1.0))(F32(1.0)),
                                   transpose(lib, transpose(lib, lambda x: custom_id(lib, x), F32(1.0)),
                                             F32(1.0))(F32(1.0)))),
    ("pytree", lambda lib, c: lib.grad(lambda v: lib.custom_derivatives.linear_call(
        lambda r, l: {"a": l[0] * r, "b": l[1] + l[0]}, lambda r, ct: (ct["a"] * r + ct["b"], ct["b"]),
        F32(3.0), (v, v * 2.0))["a"].sum())(XS)),
    ("vmap_grad_closure", lambda lib, c: lib.grad(lambda w, x: lib.custom_derivatives.linear_call(
        lambda r, x: x * w, lambda r, ct: ct * w * 10.0, (), x), 1)(F32(2.0), F32(1.0))),
])
def test_linear_call_matches_jax(name, program):
    assert_same(program, tol=1e-5)


def test_linear_call_errors_match_jax():
    f, t = (lambda r, x: x / r), (lambda r, ct: (ct, ct))
    for lib in (jax, jaxprc):
        lc = lib.custom_derivatives.linear_call
        with pytest.raises(TypeError, match="transpose output pytree structure must match that of linear inputs"):
            lib.linear_transpose(lambda x: lc(f, t, F32(3.0), x), F32(1.0))(F32(1.0))
        with pytest.raises(ValueError, match=r"Expected cotangent type float32\[\] but got float32\[3\]"):
            lib.grad(lambda x: lc(f, lambda r, ct: lib.numpy.ones(3), F32(3.0), x))(F32(1.0))
    # JAX asserts (AssertionError) on a derivative in the residuals; jaxprc says what is wrong
    with pytest.raises(AssertionError):
        jax.grad(lambda x, d: div_add(jax, x, d), 1)(F32(9.0), F32(3.0))
    with pytest.raises(TypeError, match="with respect to residual_args"):
        jaxprc.grad(lambda x, d: div_add(jaxprc, x, d), 1)(F32(9.0), F32(3.0))
