"""The vmap pass and ``jaxprc.vmap``: batched results equal stacking per-example results.

Oracle: ``vmap(f)(xs)`` against a Python loop calling ``f`` on each example
(eagerly) and stacking the results along the out axis. Every batched jaxpr
also goes through the verifier.
"""
import numpy as np
import pytest

import jaxprc
from jaxprc import lax
from jaxprc.ir import ShapedArray, trace_to_jaxpr
from jaxprc.lax import slicing
from jaxprc.ir.tree_util import tree_flatten, tree_map, tree_unflatten
from jaxprc.ir.verify import verify
from jaxprc.passes.registry import run_pipeline
from jaxprc.passes.vmap import vmap_jaxpr

B = 3
rng = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def take(x, axis, i):
    return x if axis is None else np.take(np.asarray(x), i, axis=axis)


def loop_oracle(f, args, in_axes, out_axes, size=B):
    """Stack f's per-example results along out_axes (a Python loop over the batch)."""
    in_axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    def example(i):
        return [tree_map(lambda a, sub: tree_map(lambda x: take(x, a, i), sub), axes, arg,
                         is_leaf=lambda a: a is None) for arg, axes in zip(args, in_axes)]
    outs = [f(*example(i)) for i in range(size)]
    leaves = [tree_flatten(o)[0] for o in outs]
    treedef = tree_flatten(outs[0])[1]
    axes = out_axes if isinstance(out_axes, (tuple, list)) else [out_axes] * len(leaves[0])
    stacked = [np.asarray(col[0]) if a is None else np.stack([np.asarray(c) for c in col], axis=a)
               for col, a in zip(zip(*leaves), axes)]
    return tree_unflatten(treedef, stacked)


def check(f, *args, in_axes=0, out_axes=0, rtol=1e-5, atol=1e-6):
    got = jaxprc.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args)
    want = loop_oracle(f, args, in_axes, out_axes)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    # The pass output type-checks.
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    if all(isinstance(a, (int, type(None))) for a in axes) and \
            all(isinstance(a, (np.ndarray, np.generic, bool)) for a in args):
        verify(batched_jaxpr(f, [np.asarray(a) for a in args], axes))
    return got


def batched_jaxpr(f, args, in_axes, size=B, out_axes=0):
    """The vmap pass applied to f traced at per-example types."""
    avals = [ShapedArray(np.shape(take(a, d, 0)), np.asarray(a).dtype) for a, d in zip(args, in_axes)]
    per_example = trace_to_jaxpr(lambda *xs: tree_flatten(f(*xs))[0], avals)
    return vmap_jaxpr(per_example, in_axes, size, out_axes)


def prims_of(cj):
    return [e.primitive.name for e in cj.jaxpr.eqns]


# ------------------------------------------------------------- elementwise

@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 1), (1, 0), (-1, -2)])
def test_binary_elementwise_axes(in_axes):
    x = randn(B, 4) if in_axes[0] in (0, -2) else randn(4, B) if in_axes[0] in (1, -1) else randn(4)
    y = randn(B, 4) if in_axes[1] in (0, -2) else randn(4, B) if in_axes[1] in (1, -1) else randn(4)
    check(lambda a, b: lax.atan2(lax.mul(a, b), lax.add(a, 1.0)), x, y, in_axes=in_axes)


def test_unary_and_conversions():
    x = randn(B, 2, 3)
    check(lambda a: lax.convert_element_type(lax.exp(lax.sin(a)), np.int32), x)
    check(lambda a: lax.bitcast_convert_type(a, np.int32), x, in_axes=2)
    check(lambda a: lax.bitcast_convert_type(a, np.uint16), x, in_axes=2)


def test_clamp_with_batched_scalar_bounds():
    lo, hi, x = randn(B), randn(B) + 2.0, randn(4)
    check(lambda l, a, h: lax.clamp(l, a, h), lo, x, hi, in_axes=(0, None, 0))
    check(lambda a: lax.clamp(np.float32(-0.5), a, np.float32(0.5)), randn(B, 4))


def test_select_n_with_scalar_and_full_selectors():
    which, a, b = rng.random(B) > 0.5, randn(4), randn(B, 4)
    check(lambda w, x, y: lax.select_n(w, x, y), which, a, b, in_axes=(0, None, 0))
    which = rng.integers(0, 3, (B, 4)).astype(np.int32)
    check(lambda w, x, y: lax.select_n(w, x, y, x), which, a, b, in_axes=(0, None, 0))


# -------------------------------------------------------------- structural

def test_shape_ops():
    x = randn(2, B, 3)
    check(lambda a: lax.broadcast_in_dim(a, (4, 2, 3), (1, 2)), x, in_axes=1)
    check(lambda a: lax.reshape(a, (3, 2)), x, in_axes=1)
    check(lambda a: lax.transpose(a, (1, 0)), x, in_axes=1)
    check(lambda a: lax.squeeze(a, (0, 2)), randn(1, 3, B, 1), in_axes=2)
    check(lambda a: lax.rev(a, (0, 1)), x, in_axes=1)
    check(lambda a: lax.slice(a, (0, 1), (2, 3), (1, 2)), x, in_axes=1)


def test_pad_with_batched_value():
    x, v = randn(B, 3), randn(B)
    check(lambda a, p: lax.pad(a, p, ((1, 2, 1),)), x, v)
    check(lambda a, p: lax.pad(a, p, ((1, -1, 0),)), x[0], v, in_axes=(None, 0))
    check(lambda a: lax.pad(a, np.float32(7), ((0, 1, 0), (2, 0, 1))), randn(2, 3, B), in_axes=2)


def test_concatenate_materializes_unbatched():
    check(lambda a, b: lax.concatenate([a, b, a], 0), randn(2, B), randn(3), in_axes=(1, None))


def test_dynamic_slice_and_update():
    x, i = randn(B, 5, 4), np.array([0, 2, 9], np.int32)   # 9 is clamped into bounds
    check(lambda a, k: lax.dynamic_slice(a, (k, 1), (2, 3)), x, i)                 # gather
    check(lambda a, k: lax.dynamic_slice(a, (k, 1), (2, 3)), x[0], i, in_axes=(None, 0))
    check(lambda a: lax.dynamic_slice(a, (np.int32(1), np.int32(0)), (2, 3)), x)  # indices unbatched
    u = randn(B, 2, 3)
    check(lambda a, b, k: lax.dynamic_update_slice(a, b, (k, 1)), x, u, i)        # scatter
    check(lambda a, b, k: lax.dynamic_update_slice(a, b, (k, 1)), x[0], u, i, in_axes=(None, 0, 0))
    check(lambda a, b: lax.dynamic_update_slice(a, b, (np.int32(2), np.int32(1))), x, u[0],
          in_axes=(0, None))


GATHER_DN = slicing.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
SCATTER_DN = slicing.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (1, 0)])
def test_gather(in_axes):
    x = randn(B, 5, 3) if in_axes[0] == 0 else randn(5, B, 3) if in_axes[0] == 1 else randn(5, 3)
    idx = rng.integers(0, 5, (B, 4, 1) if in_axes[1] == 0 else (4, 1)).astype(np.int32)
    check(lambda a, i: lax.gather(a, i, GATHER_DN, (1, 3), mode="clip"), x, idx, in_axes=in_axes)


@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_max"])
@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0)])
def test_scatter(op, in_axes):
    x = randn(B, 5, 3) if in_axes[0] == 0 else randn(5, 3)
    idx = np.array([[[0], [3]], [[1], [1]], [[4], [2]]], np.int32)
    idx = idx if in_axes[1] == 0 else idx[2]
    upd = randn(B, 2, 3) if in_axes[2] == 0 else randn(2, 3)
    fn = getattr(lax, op)
    check(lambda a, i, u: fn(a, i, u, SCATTER_DN, mode="clip"), x, idx, upd, in_axes=in_axes)


def test_iota_sort_argmax_cumulative_reductions():
    x = randn(4, B)
    check(lambda a: lax.add(a, lax.convert_element_type(lax.iota(np.int32, 4), np.float32)), x, in_axes=1)
    check(lambda a, b: lax.sort((a, b), dimension=0, num_keys=1), x, randn(4), in_axes=(1, None))
    check(lambda a: lax.argmax(a, 0, np.int32), randn(4, B, 2), in_axes=1)
    check(lambda a: lax.argmin(a, 1, np.int32), randn(4, B, 2), in_axes=1)
    check(lambda a: lax.cumsum(a, 0, reverse=True), x, in_axes=1)
    check(lambda a: lax.cummax(a, 1), randn(B, 2, 3), in_axes=0)
    check(lambda a: lax.reduce_sum(a, (0, 2)), randn(2, B, 3, 4), in_axes=1)
    check(lambda a: lax.reduce_max(a, (1,)), randn(2, B, 3), in_axes=1)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (None, 1), (2, 0)])
def test_dot_general(in_axes):
    shapes = {0: (B, 2, 3, 4), 1: (2, B, 3, 4), 2: (2, 3, B, 4), None: (2, 3, 4)}
    lhs = randn(*shapes[in_axes[0]])
    rhs = randn(*(s for s in shapes[in_axes[1]] if s != 4), 5)   # (.., 2, 3, 5)
    dn = (((1,), (1,)), ((0,), (0,)))    # contract 3, batch 2
    check(lambda a, b: lax.dot_general(a, b, dn), lhs, rhs, in_axes=in_axes, rtol=1e-4)


# ------------------------------------------------------------ control flow

def test_cond_unbatched_predicate_stays_cond():
    def f(p, x):
        return lax.cond(p, lambda x: lax.sin(x), lambda x: lax.cos(x), x)
    check(f, True, randn(B, 2), in_axes=(None, 0))
    cj = batched_jaxpr(f, [np.bool_(True), randn(B, 2)], (None, 0))
    assert "cond" in prims_of(cj)


def test_cond_batched_predicate_becomes_select():
    def f(x):
        return lax.cond(lax.gt(lax.reduce_sum(x, (0,)), 0.0), lambda x: lax.log(x), lambda x: lax.neg(x), x)
    x = np.abs(randn(B, 2)) * np.array([[1], [-1], [1]], np.float32)
    check(f, x)
    cj = batched_jaxpr(f, [x], (0,))
    assert "cond" not in prims_of(cj) and "select_n" in prims_of(cj)


def test_switch_batched_index_is_clamped():
    def f(i, x):
        return lax.switch(i, [lambda x: lax.sin(x), lambda x: lax.cos(x), lambda x: lax.neg(x)], x)
    check(f, np.array([0, 2, 7], np.int32), randn(B, 2))


def test_while_unbatched_condition():
    def f(x):
        return lax.while_loop(lambda c: lax.lt(c[0], 3), lambda c: (lax.add(c[0], 1), lax.mul(c[1], 2.0)),
                              (np.int32(0), x))
    check(f, randn(B, 2))
    assert "while" in prims_of(batched_jaxpr(f, [randn(B, 2)], (0,)))


def test_while_batched_condition():
    def f(n, x):   # each example loops a different number of times
        def body(c):
            i, y = c
            return lax.add(i, 1), lax.add(lax.mul(y, 2.0), 1.0)
        return lax.while_loop(lambda c: lax.lt(c[0], n), body, (np.int32(0), x))
    n = np.array([0, 3, 1], np.int32)
    check(f, n, randn(2), in_axes=(0, None))
    check(f, n, randn(B, 2), in_axes=(0, 0))


def test_scan_batched_xs_carry_and_consts():
    def f(w, c0, xs):
        def step(c, x):
            c = lax.add(lax.mul(c, w), x)
            return c, lax.sin(c)
        return lax.scan(step, c0, xs)
    w, c0, xs = randn(2), randn(2), randn(4, 2)
    check(f, np.stack([w] * B), c0, xs, in_axes=(0, None, None))
    check(f, w, c0, randn(4, B, 2), in_axes=(None, None, 1))
    check(f, w, randn(B, 2), xs, in_axes=(None, 0, None), out_axes=(1, 2))


def test_nested_jit_is_batched():
    inner = jaxprc.jit(lambda a, b: lax.mul(lax.sin(a), b))
    check(lambda a, b: inner(a, b), randn(B, 2), randn(2), in_axes=(0, None))
    cj = batched_jaxpr(lambda a, b: inner(a, b), [randn(B, 2), randn(2)], (0, None))
    assert prims_of(cj) == ["jit"]
    assert cj.jaxpr.eqns[0].params["jaxpr"].in_avals[1].shape == (2,)   # unbatched argument


# ---------------------------------------------------------------- the API

def test_unbatched_values_stay_unbatched():
    def f(x, y):
        return lax.add(x, lax.reduce_sum(lax.exp(y), (0,)))
    cj = batched_jaxpr(f, [randn(B), randn(4)], (0, None))
    exp_eqn = next(e for e in cj.jaxpr.eqns if e.primitive.name == "exp")
    assert exp_eqn.outvars[0].aval.shape == (4,)
    assert "broadcast_in_dim" in prims_of(cj)    # the sum meets x only at the end
    check(f, randn(B), randn(4), in_axes=(0, None))


def test_nested_vmap():
    f = lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())))
    x, y = randn(B, 4, 2), randn(5, 2)
    got = jaxprc.vmap(jaxprc.vmap(f, (None, 0)), (0, None))(x, y)
    want = np.einsum("bkd,nd->bnk", x, y)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


def test_pytree_in_axes_prefix_and_kwargs():
    def f(params, x, scale=1.0):
        return {"y": lax.mul(lax.add(lax.mul(params["w"], x), params["b"]), scale)}
    params = {"w": randn(B, 2), "b": randn(2)}
    got = jaxprc.vmap(f, in_axes=({"w": 0, "b": None}, 0))(params, randn(B, 2), scale=randn(B, 2))
    assert set(got) == {"y"} and np.asarray(got["y"]).shape == (B, 2)
    check(f, params, randn(2, B), in_axes=({"w": 0, "b": None}, 1))
    check(lambda t: lax.add(t[0], t[1]), (randn(B, 2), randn(2, B)), in_axes=((0, 1),))


def test_out_axes_variants():
    f = lambda x, y: (lax.sin(x), y)
    x, y = randn(B, 2, 3), randn(4)
    check(f, x, y, in_axes=(0, None), out_axes=(2, None))
    check(f, x, y, in_axes=(0, None), out_axes=-1)      # y is broadcast along the new last axis
    got = jaxprc.vmap(f, (0, None), out_axes=(-2, 0))(x, y)
    assert np.asarray(got[0]).shape == (2, B, 3) and np.asarray(got[1]).shape == (B, 4)


def test_axis_size_without_mapped_inputs():
    got = jaxprc.vmap(lambda x: lax.mul(x, 2.0), in_axes=None, axis_size=4)(randn(2))
    assert np.asarray(got).shape == (4, 2)


def test_errors_match_jax():
    with pytest.raises(ValueError, match="vmap got inconsistent sizes for array axes to be mapped:\n"
                                         r"  \* one axis had size 3: axis 0 of argument x of type float32\[3\];\n"
                                         r"  \* one axis had size 4: axis 0 of argument y of type float32\[4\]"):
        jaxprc.vmap(lambda x, y: lax.add(x, y))(randn(3), randn(4))
    with pytest.raises(ValueError, match="must have at least one non-None value in in_axes"):
        jaxprc.vmap(lambda x: x, in_axes=None)(randn(3))
    with pytest.raises(ValueError, match="which implies that its rank should be at least 3"):
        jaxprc.vmap(lambda x: x, in_axes=2)(randn(3))
    with pytest.raises(ValueError, match=r"at vmap out_axes\[1\], got axis spec None but output was "
                                         "batched on axis 0"):
        jaxprc.vmap(lambda x: (x, x), out_axes=(0, None))(randn(3))
    with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix"):
        jaxprc.vmap(lambda x: x, in_axes=((0, 0),))(randn(3))
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or"):
        jaxprc.vmap(lambda x: x, in_axes=0.5)


def test_value_dependent_python_control_flow_raises():
    def f(x):
        return x if lax.gt(lax.reduce_sum(x, (0,)), 0.0) else lax.neg(x)
    with pytest.raises(jaxprc.ConcretizationTypeError):
        jaxprc.vmap(f)(randn(B, 2))


def test_composes_under_jit_and_inside_vmap():
    f = jaxprc.jit(jaxprc.vmap(lambda x: lax.mul(lax.sin(x), x)))
    x = randn(B, 2)
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) * x, rtol=1e-6)
    cj = jaxprc.make_jaxpr(jaxprc.vmap(lambda x: lax.sin(x)))(x)
    assert cj.in_avals[0].shape == (B, 2) and prims_of(cj) == ["sin"]


def test_pipeline_option_form():
    cj = trace_to_jaxpr(lambda x: [lax.cos(x)], [ShapedArray((2,), np.float32)])
    out = run_pipeline(cj, "vmap:axis_size=4:in_axes=(1,)")
    assert out.in_avals[0].shape == (2, 4) and out.out_avals[0].shape == (4, 2)
    verify(out)


def test_composes_with_grad():
    x = randn(B)
    sin_grad = jaxprc.vmap(jaxprc.grad(lambda a: lax.sin(a)))
    np.testing.assert_allclose(np.asarray(sin_grad(x)), np.cos(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jaxprc.jit(sin_grad)(x)), np.cos(x), rtol=1e-6)
    g = jaxprc.grad(lambda a: lax.reduce_sum(jaxprc.vmap(lambda y: lax.mul(y, lax.sin(y)))(a), (0,)))
    np.testing.assert_allclose(np.asarray(g(x)), np.sin(x) + x * np.cos(x), rtol=1e-5)


def test_grad_through_batched_cond_ignores_untaken_branch():
    def f(a):   # log is the untaken branch where a <= 0; its derivative there is inf/nan
        return lax.cond(lax.gt(a, 0.0), lambda a: lax.log(a), lambda a: lax.mul(a, 3.0), a)
    x = np.array([2.0, 0.0, -1.0], np.float32)
    g = jaxprc.grad(lambda a: lax.reduce_sum(jaxprc.vmap(f)(a), (0,)))(x)
    np.testing.assert_allclose(np.asarray(g), [0.5, 3.0, 3.0], rtol=1e-6)


def test_top_level_results_are_device_arrays():
    x = randn(B)
    consts, same = jaxprc.vmap(lambda a: (1.0, a))(x)
    assert isinstance(consts, jaxprc.Array) and isinstance(same, jaxprc.Array)
    np.testing.assert_array_equal(np.asarray(consts), np.ones(B, np.float32))



@pytest.fixture
def compiles(monkeypatch):
    """Counts XLA compilations (every executable, program or single primitive, goes through runtime.compile)."""
    count = [0]
    compile_ = jaxprc.runtime.compile

    def counting(*args, **kwargs):
        count[0] += 1
        return compile_(*args, **kwargs)
    monkeypatch.setattr(jaxprc.runtime, "compile", counting)
    return count


def test_top_level_program_compiled_once_per_structure(compiles):
    x = randn(B, 11)   # a shape no other test uses, so nothing is cached yet
    for c in (randn(11), randn(11)):   # consts differ in value only: one program
        f = lambda a: lax.mul(lax.cos(lax.sin(a)), c)
        for _ in range(2):             # each call re-traces into a new, equal program
            np.testing.assert_allclose(np.asarray(jaxprc.vmap(f)(x)), np.cos(np.sin(x)) * c, rtol=1e-6)
    assert compiles[0] == 1            # op by op would have compiled sin, cos, broadcast and mul
    jaxprc.vmap(f)(randn(B + 1, 11))   # new input types: a new program
    assert compiles[0] == 2


def test_custom_derivative_rules_do_not_defeat_the_program_cache(compiles):
    """The rules are new objects on each trace; at top level only the primal function runs."""
    sin_jvp = jaxprc.custom_jvp(lambda a: lax.sin(a))
    sin_jvp.defjvp(lambda p, t: (lax.sin(p[0]), lax.mul(lax.cos(p[0]), t[0])))
    sin_vjp = jaxprc.custom_vjp(lambda a: lax.sin(a))
    sin_vjp.defvjp(lambda a: (lax.sin(a), a), lambda a, g: (lax.mul(lax.cos(a), g),))
    x = randn(B, 13)
    for f in (sin_jvp, sin_vjp):
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(jaxprc.vmap(f)(x)), np.sin(x), rtol=1e-6)
    assert compiles[0] == 1


# Random programs: chains of ops on two (3, 4) inputs, each input mapped along a random axis.
UNARY = [lax.sin, lax.exp, lambda a: lax.transpose(lax.transpose(a, (1, 0)), (1, 0)),
         lambda a: lax.rev(a, (1,)), lambda a: lax.cumsum(a, 1),
         lambda a: lax.broadcast_in_dim(lax.reduce_sum(a, (0,)), (3, 4), (1,)),
         lambda a: lax.reshape(lax.reshape(a, (12,)), (3, 4))]
BINARY = [lax.add, lax.mul, lax.max,
          lambda a, b: lax.dot_general(lax.dot_general(a, b, (((1,), (1,)), ((), ()))), a,
                                       (((1,), (0,)), ((), ()))),
          lambda a, b: lax.select_n(lax.gt(a, b), a, b)]


def test_random_programs_match_loop():
    hypothesis = pytest.importorskip("hypothesis")
    st_ = hypothesis.strategies

    @hypothesis.settings(max_examples=12, deadline=None, derandomize=True)
    @hypothesis.given(ops=st_.lists(st_.tuples(st_.integers(0, len(UNARY) - 1),
                                               st_.integers(0, len(BINARY) - 1)), min_size=1, max_size=4),
                      axes=st_.tuples(st_.sampled_from([0, 1, 2, None]), st_.sampled_from([0, 1, 2, None])))
    def run(ops, axes):
        if axes == (None, None):
            axes = (0, None)

        def program(a, b):
            for u, bi in ops:
                a, b = BINARY[bi](UNARY[u](a), b), a
                a = lax.div(a, lax.add(lax.abs(a), 1.0))     # keep values bounded
            return a, b

        def arg(axis):
            shape = [3, 4]
            if axis is not None:
                shape.insert(axis, B)
            return randn(*shape)
        check(program, arg(axes[0]), arg(axes[1]), in_axes=axes, rtol=1e-4, atol=1e-5)

    run()


def test_out_axes_none_returns_python_scalar_and_unmapped_argument_unchanged():
    import jaxprc as jx
    a, n = np.arange(3.0, dtype=np.float32), np.ones(2, np.float32)
    r = jx.vmap(lambda x: 1.5, out_axes=None)(a)
    assert type(r) is float and r == 1.5
    s, y = jx.vmap(lambda x, y: (2, y), in_axes=(0, None), out_axes=None)(a, n)
    assert type(s) is int and y is n
