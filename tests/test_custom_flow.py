"""Custom rules, control flow and batching together (issue 32): custom_vjp under vmap inside
scan, ordered effects threaded through control flow (eager and jit), JAX's forwarding of
values a branch or loop body returns unchanged, and optimize_remat's primal value.

Oracles: vmap against a Python loop, eager against jit, finite differences (check_grads), and
the order the unbatched program would run its callbacks in.
"""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.experimental import io_callback
from jaxprc.test_util import check_grads


# ------------------------------------------------ custom_vjp batched inside scan

@jx.custom_vjp
def scale(x, coeff):
    return x * coeff


scale.defvjp(lambda x, coeff: (scale(x, coeff), (x, coeff)),
             lambda res, g: (g * res[1], (res[0] * g).sum()))


def scan_scale(x, coeff):
    return lax.scan(lambda c, _: (scale(c, coeff), None), x, None, length=3)[0]


def test_vjp_of_vmapped_scan_over_custom_vjp_sums_the_unbatched_cotangent():
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2) / 4
    coeff = np.float32(1.5)
    ct = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    batched = jx.vmap(scan_scale, in_axes=(0, None))
    out, pullback = jx.vjp(batched, xs, coeff)
    g_x, g_coeff = pullback(ct)
    # the loop: each example's pullback; the shared coefficient's cotangent is their sum
    per_example = [jx.vjp(scan_scale, x, coeff)[1](c) for x, c in zip(xs, ct)]
    np.testing.assert_allclose(out, np.stack([scan_scale(x, coeff) for x in xs]), rtol=1e-6)
    np.testing.assert_allclose(g_x, np.stack([g for g, _ in per_example]), rtol=1e-6)
    np.testing.assert_allclose(g_coeff, sum(c for _, c in per_example), rtol=1e-5)
    assert np.shape(g_coeff) == ()
    check_grads(batched, (xs, coeff), order=1, modes=["rev"])


# --------------------------------------------------- ordered effects in control flow

def recorder():
    seen = []

    def log(tag):
        return lambda *xs: seen.append((tag, *[np.asarray(x).item() for x in xs]))
    return seen, log


def ordered(log, tag, *xs):
    jx.debug.callback(log(tag), *xs, ordered=True)


def run_eager_and_jit(program, *args):
    """The callbacks ``program`` makes eagerly and under jit (both must be the same)."""
    runs = []
    for wrap in (lambda f: f, jx.jit):
        seen, log = recorder()
        out = wrap(lambda *a: program(log, *a))(*args)
        jx.effects_barrier()
        runs.append((seen, out))
    (eager, out_e), (jitted, out_j) = runs
    assert eager == jitted
    np.testing.assert_allclose(np.asarray(out_e), np.asarray(out_j))
    return eager


def test_ordered_callbacks_in_scan_fori_and_cond_run_in_program_order():
    def program(log, x):
        ordered(log, "before", x)

        def body(c, t):
            ordered(log, "scan", t)
            return c + t, t
        c, _ = lax.scan(body, x, jnp.arange(3.0))
        c = lax.fori_loop(0, 2, lambda i, c: (ordered(log, "fori", i), c * 2)[1], c)
        c = lax.cond(c > 0, lambda c: (ordered(log, "true", c), c)[1],
                     lambda c: (ordered(log, "false", c), -c)[1], c)
        ordered(log, "after", c)
        return c
    assert run_eager_and_jit(program, 1.0) == [
        ("before", 1.0), ("scan", 0.0), ("scan", 1.0), ("scan", 2.0), ("fori", 0), ("fori", 1),
        ("true", 16.0), ("after", 16.0)]


def test_ordered_callbacks_in_while_cond_fun_and_body_interleave():
    def program(log, n):
        def cond_fun(c):
            ordered(log, "cond", c)
            return c < n

        def body_fun(c):
            ordered(log, "body", c)
            return c + 1
        return lax.while_loop(cond_fun, body_fun, 0)
    assert run_eager_and_jit(program, 2) == [("cond", 0), ("body", 0), ("cond", 1), ("body", 1), ("cond", 2)]


def test_ordered_callbacks_in_switch_run_only_in_the_taken_branch():
    def program(log, i):
        branches = [lambda x, k=k: (ordered(log, k, x), x + k)[1] for k in range(3)]
        return lax.switch(i, branches, 10)
    assert run_eager_and_jit(program, 2) == [(2, 10)]
    assert run_eager_and_jit(program, 0) == [(0, 10)]


def test_jitted_ordered_io_callback_inside_scan():
    seen = []

    def body(c, x):
        io_callback(lambda v: seen.append(float(v)), None, x, ordered=True)
        return c + x, None
    out, _ = jx.jit(lambda xs: lax.scan(body, 0.0, xs))(jnp.arange(4.0))
    jx.effects_barrier()
    assert seen == [0.0, 1.0, 2.0, 3.0] and float(out) == 6.0


def test_ordered_prints_in_custom_linear_solve_solve_and_matvec():
    seen, log = recorder()
    a = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)

    def matvec(x):
        ordered(log, "matvec")
        return a @ x

    def solve(mv, b):
        ordered(log, "solve")
        return jnp.linalg.solve(a, b)

    def f(b):
        return lax.custom_linear_solve(matvec, b, solve, symmetric=True).sum()
    b = jnp.array([1.0, 2.0])
    value, grad = jx.jit(jx.value_and_grad(f))(b)
    jx.effects_barrier()
    expected = np.linalg.solve(a, np.ones(2, np.float32))      # a is symmetric
    np.testing.assert_allclose(grad, expected, rtol=1e-5)
    np.testing.assert_allclose(value, np.linalg.solve(a, np.asarray(b)).sum(), rtol=1e-5)
    assert seen and set(seen) <= {("solve",), ("matvec",)} and seen[0] == ("solve",)


# ------------------------------------------------------ vmap and debug callbacks

def test_vmapped_debug_callbacks_run_as_the_unbatched_loops_would():
    for wrap in (lambda f: f, jx.jit):
        seen = []
        wrap(jx.vmap(lambda x: jx.debug.callback(lambda v: seen.append(float(v)), x)))(jnp.arange(5.0))
        jx.effects_barrier()
        assert sorted(seen) == [0.0, 1.0, 2.0, 3.0, 4.0]
    seen = []
    jx.vmap(lambda x: jx.debug.callback(lambda v: seen.append(float(v)), x))(jnp.arange(5.0))
    jx.effects_barrier()
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]         # eagerly: in batch order
    seen = []
    inner = jx.vmap(lambda x: jx.debug.callback(lambda v: seen.append(float(v)), x))
    jx.vmap(inner)(jnp.arange(4.0).reshape(2, 2))
    jx.effects_barrier()
    # the inner vmap's loop over its elements, each batched by the outer one (JAX's order)
    assert seen == [0.0, 2.0, 1.0, 3.0]


# ------------------------------------------------------------------ forwarding

def test_cond_with_batched_predicate_keeps_forwarded_operands_unbatched():
    def f(p, x, y):
        return lax.cond(p, lambda x, y: (x, y + 1), lambda x, y: (x, y - 1), x, y)
    preds, ys = jnp.array([True, False, True]), jnp.arange(3.0)
    x_out, y_out = jx.vmap(f, (0, None, 0), (None, 0))(preds, 5.0, ys)
    assert float(x_out) == 5.0
    np.testing.assert_allclose(y_out, [f(p, 5.0, y)[1] for p, y in zip(preds, ys)])


def test_switch_with_batched_index_keeps_forwarded_operands_unbatched():
    def f(i, x, y):
        return lax.switch(i, [lambda x, y: (x, y), lambda x, y: (x, 2 * y), lambda x, y: (x, -y)], x, y)
    idx, ys = jnp.array([2, 0, 1]), jnp.arange(3.0)
    x_out, y_out = jx.jit(jx.vmap(f, (0, None, 0), (None, 0)))(idx, jnp.float32(7), ys)
    assert float(x_out) == 7.0
    np.testing.assert_allclose(y_out, [f(i, 7.0, y)[1] for i, y in zip(idx, ys)])


def test_while_with_batched_predicate_keeps_read_only_carries_unbatched():
    def f(step, y):
        return lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0], c[1] + c[0]), (step, y))
    ys = jnp.array([0.0, 1.0, 2.5])
    step_out, y_out = jx.vmap(f, (None, 0), (None, 0))(jnp.float32(1), ys)
    assert float(step_out) == 1.0
    np.testing.assert_allclose(y_out, [f(jnp.float32(1), y)[1] for y in ys])
    check_grads(lambda s, ys: jx.vmap(f, (None, 0))(s, ys)[1], (jnp.float32(1.1), ys), order=1,
                modes=["fwd"])


def test_scan_forwards_read_only_carries_and_xs_passed_through():
    def f(a, xs):
        return lax.scan(lambda c, x: ((c[0], c[1] + c[0] * x), x), (a, 0.0), xs)
    xs = jnp.arange(4.0)
    (a, total), ys = f(jnp.float32(2), xs)
    assert float(a) == 2.0 and float(total) == 12.0
    assert ys is xs                          # the ys are the xs themselves
    jaxpr = jx.make_jaxpr(f)(jnp.float32(2), xs)
    (scan,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["num_carry"] == 1 and len(scan.outvars) == 1
    check_grads(lambda a, xs: f(a, xs)[0][1], (jnp.float32(2), xs), order=2)


# -------------------------------------------------------------- optimize_remat

def test_optimize_remat_takes_the_staged_primal_value_from_the_function():
    @jx.custom_vjp
    def f(x):
        return jnp.tan(x)
    # fwd disagrees with f on purpose: which one gives the primal value is what is tested
    f.defvjp(lambda x: (jnp.sin(x), (x,)), lambda res, g: (jnp.cos(res[0]) * g,), optimize_remat=True)
    x = 3.2
    for value_and_grad in (jx.value_and_grad(lambda x: jx.remat(f)(x) ** 2),
                           jx.jit(jx.value_and_grad(lambda x: f(x) ** 2))):
        value, grad = value_and_grad(x)
        np.testing.assert_allclose(value, np.tan(np.float32(x)) ** 2, rtol=1e-5)
        np.testing.assert_allclose(grad, 2 * np.tan(np.float32(x)) * np.cos(np.float32(x)), rtol=1e-5)




# ------------------------------------------------------------- complex odeint

def test_odeint_of_a_complex_state_and_its_gradient():
    from jaxprc.experimental.ode import odeint
    ts = jnp.array([0.0, 0.5, 1.0])
    a = np.complex64(0.1 - 1j)
    y0 = jnp.array([1.0 + 0j, 0.5j], jnp.complex64)
    ys = jx.jit(lambda y0, a: odeint(lambda y, t, a: a * y, y0, ts, a))(y0, a)
    assert ys.dtype == np.complex64
    np.testing.assert_allclose(ys, np.exp(a * np.asarray(ts))[:, None] * np.asarray(y0), rtol=2e-5, atol=2e-6)

    @jx.jit
    def loss(a):
        return jnp.real(odeint(lambda y, t, a: a * y, jnp.ones(1, jnp.complex64), ts, a)[-1, 0])
    g = jx.jit(jx.grad(loss))(a)
    # a real function of a complex input: grad is d/dRe - i d/dIm (JAX's convention)
    eps = 1e-3
    d_re = (loss(a + eps) - loss(a - eps)) / (2 * eps)
    d_im = (loss(a + 1j * eps) - loss(a - 1j * eps)) / (2 * eps)
    np.testing.assert_allclose(g, d_re - 1j * d_im, rtol=1e-3)


# ----------------------------------------------------- collectives over vmap axes

def per_example(f, xs):
    """``f(x, index)`` for each example: the loop a vmap with an axis name stands for."""
    return np.stack([np.asarray(f(x, i)) for i, x in enumerate(xs)])


def test_axis_index_over_a_vmap_axis_plain_in_loops_and_cond():
    cases = [(lambda x: lax.axis_index("i") + x, [0, 1, 2]),
             (lambda x: lax.while_loop(lambda c: c < lax.axis_index("i"), lambda c: c + 1, x), [0, 1, 2]),
             (lambda x: lax.fori_loop(0, 2, lambda k, c: c + lax.axis_index("i"), x), [0, 2, 4]),
             (lambda x: lax.cond(x == 0, lambda: lax.axis_index("i"), lambda: -1), [0, 1, 2])]
    for f, expected in cases:
        for wrap in (lambda g: g, jx.jit):
            np.testing.assert_array_equal(wrap(jx.vmap(f, axis_name="i"))(jnp.zeros(3, jnp.int32)), expected)
    nested = jx.vmap(jx.vmap(lambda x: lax.axis_index("i") * 10 + lax.axis_index("j"), axis_name="j"),
                     axis_name="i")
    np.testing.assert_array_equal(nested(jnp.zeros((2, 3))), [[0, 1, 2], [10, 11, 12]])
    # over several axes: the row-major position in their product, the first named varying slowest
    for names, expected in ((("i", "j"), [[0, 1, 2], [3, 4, 5]]), (("j", "i"), [[0, 2, 4], [1, 3, 5]])):
        both = jx.vmap(jx.vmap(lambda x: lax.axis_index(names) + x, axis_name="j"), axis_name="i")
        np.testing.assert_array_equal(jx.jit(both)(jnp.zeros((2, 3), jnp.int32)), expected)


def test_psum_scatter_over_a_vmap_axis_and_its_transpose_all_gather():
    xs = jnp.arange(18.0).reshape(3, 2, 3)
    total = np.asarray(xs).sum(0)
    out = jx.vmap(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1), axis_name="i")(xs)
    np.testing.assert_allclose(out, per_example(lambda x, i: total[:, i], xs))
    tiled = jx.vmap(lambda v: lax.psum_scatter(v, "i", tiled=True), axis_name="i")(xs.reshape(3, 6))
    np.testing.assert_allclose(tiled, total.reshape(6).reshape(3, 2))
    unbatched = jx.vmap(lambda v: lax.psum_scatter(jnp.arange(3.0), "i"), axis_name="i")(jnp.zeros(3))
    np.testing.assert_allclose(unbatched, [0.0, 3.0, 6.0])       # three examples' equal values summed

    def loss(xs):
        return jx.vmap(lambda v: (lax.psum_scatter(v, "i") ** 2).sum(), axis_name="i")(xs).sum()
    check_grads(loss, (jnp.arange(9.0).reshape(3, 3) / 9,), order=1, modes=["rev"])
    gather_loss = lambda xs: jx.vmap(lambda v: (lax.all_gather(v, "i") * jnp.arange(3.0)).sum(),  # noqa: E731
                                     axis_name="i")(xs).sum()
    check_grads(gather_loss, (jnp.arange(3.0),), order=1, modes=["rev"])


def test_all_gather_and_psum_scatter_over_two_vmap_axes_in_either_order():
    xs = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    for axes, flat in ((("i", "j"), xs.reshape(6, 4)), (("j", "i"), xs.transpose(1, 0, 2).reshape(6, 4))):
        for tiled in (False, True):
            f = jx.vmap(jx.vmap(lambda v: lax.all_gather(v, axes, tiled=tiled), axis_name="j"), axis_name="i")
            expected = flat.reshape(24) if tiled else flat
            np.testing.assert_array_equal(f(xs), np.broadcast_to(expected, (2, 3) + expected.shape))
    ys = np.arange(2 * 3 * 6 * 2, dtype=np.float32).reshape(2, 3, 6, 2)
    total = ys.sum((0, 1))
    for axes in (("i", "j"), ("j", "i")):
        f = jx.vmap(jx.vmap(lambda v: lax.psum_scatter(v, axes), axis_name="j"), axis_name="i")
        index = (lambda i, j: i * 3 + j) if axes == ("i", "j") else (lambda i, j: j * 2 + i)
        expected = np.array([[total[index(i, j)] for j in range(3)] for i in range(2)])
        np.testing.assert_array_equal(f(ys), expected)


# --------------------------------------------------------- nn under debug_infs

def test_attention_in_float64_with_masks_under_debug_infs():
    jx.config.update("jax_enable_x64", True)
    try:
        rng = np.random.RandomState(0)
        q, k = rng.randn(1, 3, 2, 4), rng.randn(1, 5, 2, 4)
        mask = rng.rand(1, 2, 3, 5) > 0.3
        with jx.debug_infs(True):
            out = jx.nn.dot_product_attention(q, k, k, mask=mask)
            causal = jx.nn.dot_product_attention(q, k[:, :3], k[:, :3], is_causal=True)
        assert out.dtype == np.float64 and np.isfinite(np.asarray(out)).all()
        logits = np.einsum("btnh,bsnh->bnts", q, k) / 2.0
        logits = np.where(mask, logits, -np.inf)
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        np.testing.assert_allclose(out, np.einsum("bnts,bsnh->btnh", probs, k), rtol=1e-5, atol=1e-6)  # float32 softmax
        assert np.isfinite(np.asarray(causal)).all()
    finally:
        jx.config.update("jax_enable_x64", False)


# ------------------------------------------------------------ API parity

def test_bwd_may_return_none_for_a_whole_argument_subtree():
    @jx.custom_vjp
    def f(x):
        return x["a"] * x["b"][0] * x["b"][1]
    f.defvjp(lambda x: (f(x), x), lambda r, g: ({"a": g * r["b"][0] * r["b"][1], "b": None},))
    g = jx.grad(f)({"a": 2.0, "b": (3.0, 4.0)})
    assert float(g["a"]) == 12.0 and [float(v) for v in g["b"]] == [0.0, 0.0]
    f.defvjp(lambda x: (f(x), x), lambda r, g: ({"a": g, "b": g},))     # a leaf for a subtree: an error
    with pytest.raises(TypeError, match="same container"):
        jx.grad(f)({"a": 2.0, "b": (3.0, 4.0)})


def test_closure_convert_structure_mismatch_names_both_structures():
    _, pullback = jx.vjp(lambda x, z: z * x, 2.0, 3.0)
    pure, consts = jx.closure_convert(pullback, 2.0)
    assert [float(v) for v in pure(1.0, *consts)] == [3.0, 2.0]
    with pytest.raises(TypeError, match="The inputs to the closure produced by closure_convert must have the "
                                        r"same Pytree structure .* Expected PyTreeDef\(\(\*,\)\)"):
        pure(1.0, consts)


def test_lax_binary_ops_refuse_mixed_dtypes_with_the_promoting_function_named():
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes, got int32, "
                                        r"float32. \(Tip: jnp.add is a similar function"):
        lax.add(jnp.int32(1), jnp.float32(2))
    with pytest.raises(TypeError, match=r"lax.max requires .* got int32, int16. \(Tip: jnp.maximum"):
        jx.jit(lax.max)(jnp.int32(1), jnp.int16(2))
    assert float(jnp.add(jnp.int32(1), jnp.float32(2))) == 3.0
    # Python scalars have their default dtypes (JAX's words): a bool is no number to add
    with pytest.raises(TypeError, match=r"add does not accept dtype bool at position 1. Accepted dtypes at "
                                        r"position 1 are subtypes of integer, floating, complexfloating."):
        lax.add(jnp.arange(3), True)
    with pytest.raises(TypeError, match=r"lax.mul requires arguments to have the same dtypes, got int32, float32"):
        lax.mul(2, 1.5)
    with pytest.raises(TypeError, match=r"lax.max requires arguments to have the same dtypes, got float32, int32"):
        lax.max(jnp.ones(3), 0)
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes, got float16, float32"):
        jx.jit(lambda x: lax.add(x, 1.0))(jnp.ones(3, jnp.float16))
    assert lax.bitwise_and(jnp.array([True, False]), True).tolist() == [True, False]
    assert lax.pow(jnp.ones(2, jnp.float16), 2).dtype == jnp.float16     # pow alone takes an int exponent
    # jaxprc's own rules still write Python scalars for every float dtype (atanh's JVP: 1.0 - x)
    assert jx.grad(lambda x: lax.atanh(x))(jnp.float16(0.5)).dtype == jnp.float16


def test_vmap_never_hands_placeholders_to_a_pytree_unflatten():
    seen = []

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    def unflatten(aux, children):
        seen.append(children)
        return Pair(*children)
    jx.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), unflatten)
    out = jx.vmap(lambda p: Pair(p.a * 2, p.b), in_axes=(Pair(0, None),))(Pair(jnp.arange(3.0), 5.0))
    np.testing.assert_allclose(out.a, [0.0, 2.0, 4.0])
    np.testing.assert_allclose(out.b, [5.0, 5.0, 5.0])
    assert all(not any(type(c) is object for c in children) for children in seen)
    with pytest.raises(ValueError, match="tree prefix"):
        jx.vmap(lambda p: p.a, in_axes=((0, 0),))(Pair(jnp.arange(3.0), jnp.arange(3.0)))


def test_a_tracer_in_a_custom_vjp_nondiff_position_is_an_unexpected_tracer_error():
    from functools import partial

    @partial(jx.custom_vjp, nondiff_argnums=(0,))
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (f(x, y), None), lambda x, r, g: (g,))
    with pytest.raises(jx.errors.UnexpectedTracerError, match="nondiff_argnums"):
        jx.grad(lambda x: f(x, 2.0))(1.0)


def test_reverse_mode_through_switch_with_merged_residuals():
    branches = [lambda x: jnp.sin(x) * jnp.cos(x), lambda x: jnp.exp(x) * x, lambda x: x ** 3]

    def f(i, x):
        return lax.switch(i, branches, x)
    for i in range(3):
        check_grads(lambda x: f(i, x), (0.7,), order=1, modes=["rev"])
    idx, xs = jnp.array([2, 0, 1]), jnp.array([0.5, 1.0, 1.5])
    np.testing.assert_allclose(jx.jit(jx.vmap(jx.grad(f, 1)))(idx, xs),
                               [jx.grad(f, 1)(int(i), x) for i, x in zip(idx, xs)], rtol=1e-6)


def test_all_to_all_over_two_vmap_axes():
    xs = np.arange(2 * 3 * 6, dtype=np.float32).reshape(2, 3, 6)
    f = jx.vmap(jx.vmap(lambda v: lax.all_to_all(v, ("i", "j"), 0, 0), axis_name="j"), axis_name="i")
    # example (i, j), the combined index i*3 + j, gets element [i*3 + j] of every example, in order
    np.testing.assert_array_equal(f(xs), xs.reshape(6, 6).T.reshape(2, 3, 6))
    g = jx.vmap(jx.vmap(lambda v: lax.all_to_all(v, ("j", "i"), 0, 0), axis_name="j"), axis_name="i")
    by_j = xs.transpose(1, 0, 2).reshape(6, 6)       # the combined index j*2 + i
    np.testing.assert_array_equal(g(xs), by_j.T.reshape(3, 2, 6).transpose(1, 0, 2))


def test_symbolic_zeros_rules_see_symbolic_zeros_when_vmap_comes_first():
    from jaxprc.custom_derivatives import SymbolicZero
    seen = []

    @jx.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append(("jvp", type(ty) is SymbolicZero and ty.shape == () and ty.dtype == jnp.float32))
        return f(x, y), tx * y

    f.defjvp(f_jvp, symbolic_zeros=True)

    @jx.custom_vjp
    def g(x, y):
        return x * y

    def g_fwd(x, y):
        seen.append(("fwd", x.perturbed, y.perturbed))
        return g(x.value, y.value), y.value
    g.defvjp(g_fwd, lambda y, ct: (ct * y, None), symbolic_zeros=True)
    xs = jnp.arange(3.0)
    out, tangent = jx.jvp(jx.vmap(lambda x: f(x, 2.0)), (xs,), (xs + 1,))
    assert tangent.tolist() == [2.0, 4.0, 6.0] and ("jvp", True) in seen
    seen.clear()
    grads = jx.jit(jx.grad(lambda xs: jx.vmap(lambda x: g(x, 3.0))(xs).sum()))(xs)
    assert grads.tolist() == [3.0, 3.0, 3.0]
    # fwd runs for the pattern differentiated, and at most once more when g is bound (every input
    # perturbed); its own call to g inside fwd adds no further run
    assert seen.count(("fwd", True, False)) == 1 and len(seen) <= 2, seen


def test_a_symbolic_zero_returned_by_a_rule_stays_a_zero_downstream():
    from jaxprc.custom_derivatives import SymbolicZero

    @jx.custom_jvp
    def second(x, y):
        return y

    def second_jvp(primals, tangents):
        assert type(tangents[1]) is SymbolicZero      # also the tangent of second(x, 1.0) below
        return primals[1], tangents[1]
    second.defjvp(second_jvp, symbolic_zeros=True)
    g = lambda x: second(x, second(x, 1.0))  # noqa: E731
    for run in (lambda: jx.jvp(g, (2.0,), (1.0,)), lambda: jx.jvp(jx.vmap(g), (jnp.ones(3),), (jnp.ones(3),)),
                lambda: jx.jit(lambda x: jx.jvp(g, (x,), (1.0,)))(2.0)):
        out, tangent = run()
        assert np.all(np.asarray(out) == 1.0) and np.all(np.asarray(tangent) == 0.0)


def test_symbolic_zeros_bwd_under_vmap_sees_symbolic_zero_cotangents():
    from jaxprc.custom_derivatives import SymbolicZero

    @jx.custom_vjp
    def pair(x, y):
        return x, y

    def bwd(_, g):
        assert type(g[1]) is SymbolicZero and g[1].shape == ()      # the per-example type
        return g
    pair.defvjp(lambda x, y: (pair(x.value, y.value), None), bwd, symbolic_zeros=True)
    xs = jnp.arange(3.0)
    for grad in (jx.grad, lambda f: jx.jit(jx.grad(f))):
        assert grad(lambda x, y: jx.vmap(pair)(x, y)[0].sum())(xs, xs).tolist() == [1.0, 1.0, 1.0]
