"""Checks of pshuffle, pswapaxes, nested pmap and ragged_all_to_all over 8 CPU devices; run by
test_collectives2.py in a process of its own (JAXPRC_NUM_CPU_DEVICES=8 must be set before the client
exists)."""
import sys

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.sharding import PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402

X = np.arange(8 * 8 * 2, dtype=np.float32).reshape(8, 8, 2) / 7 - 3
mesh = jx.make_mesh((4, 2), ("x", "y"))
def swap(x, groups=None):
    """numpy pswapaxes of axis 0 with axis 1 of x (device axis 0), within each group of devices."""
    out = np.empty_like(x)
    for g in groups or [list(range(x.shape[0]))]:
        for a, i in enumerate(g):
            for b, j in enumerate(g):
                out[i, b] = x[j, a]
    return out


@check
def pswapaxes_and_pshuffle_under_pmap():
    f = jx.pmap(lambda v: (lax.pswapaxes(v, "i", 0), lax.pshuffle(v, "i", [3, 0, 7, 1, 2, 6, 4, 5])), "i")
    s, p = f(X)
    np.testing.assert_array_equal(np.asarray(s), swap(X))
    np.testing.assert_array_equal(np.asarray(p), X[[3, 0, 7, 1, 2, 6, 4, 5]])
    groups = [[0, 5, 2, 7], [1, 4, 3, 6]]
    g = jx.pmap(lambda v: lax.pswapaxes(v[:4], "i", 0, axis_index_groups=groups), "i")(X)
    np.testing.assert_array_equal(np.asarray(g), swap(X[:, :4], groups))
    # a later axis: pswapaxes(v, axis=1) on per-device (2, 8)
    h = jx.pmap(lambda v: lax.pswapaxes(v, "i", 1), "i")(X.transpose(0, 2, 1))
    np.testing.assert_array_equal(np.asarray(h), swap(X).transpose(0, 2, 1))


@check
def pswapaxes_and_pshuffle_under_shard_map():
    """On a 4x2 mesh, along x only and along both axes."""
    y = X[:, :4]

    def body(v):
        v = v[0, 0]        # (4, 2) per device
        return (lax.pswapaxes(v, "x", 0)[None, None], lax.pshuffle(v, "x", [1, 2, 3, 0])[None, None])
    f = jx.jit(jx.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y")))
    s, p = f(y.reshape(4, 2, 4, 2))
    blocks = y.reshape(4, 2, 4, 2)
    for j in range(2):
        np.testing.assert_array_equal(np.asarray(s)[:, j], swap(blocks[:, j]))
        np.testing.assert_array_equal(np.asarray(p)[:, j], blocks[[1, 2, 3, 0], j])
    both = jx.jit(jx.shard_map(lambda v: lax.pswapaxes(v[0], ("x", "y"), 0)[None], mesh=mesh,
                               in_specs=P(("x", "y")), out_specs=P(("x", "y"))))(X)
    np.testing.assert_array_equal(np.asarray(both), swap(X))


@check
def pswapaxes_and_pshuffle_transpose_and_vmap():
    """<vjp ct, t> = <ct, jvp t>; vmap over an unmapped axis matches a loop."""
    rng = np.random.default_rng(0)
    for fn in (lambda v: lax.pswapaxes(v, "i", 0) * 2.0,
               lambda v: lax.pswapaxes(v[:4], "i", 0, axis_index_groups=[[0, 1, 2, 3], [4, 5, 6, 7]]),
               lambda v: jnp.sin(lax.pshuffle(v, "i", [7, 6, 5, 4, 3, 2, 1, 0]))):
        f = jx.pmap(fn, "i")
        t = rng.standard_normal(X.shape).astype(np.float32)
        out, tan = jx.jvp(f, (X,), (t,))
        ct = rng.standard_normal(np.shape(out)).astype(np.float32)
        (back,) = jx.vjp(f, X)[1](ct)
        np.testing.assert_allclose(np.vdot(np.asarray(back), t), np.vdot(ct, np.asarray(tan)), rtol=2e-5)
    batched = jx.pmap(jx.vmap(lambda v: lax.pswapaxes(v, "i", 0), in_axes=1), "i")(np.stack([X, -X], 2))
    np.testing.assert_array_equal(np.asarray(batched), np.stack([swap(X), swap(-X)], 1))


@check
def collective_errors():
    f = lambda perm: jx.pmap(lambda v: lax.pshuffle(v, "i", perm), "i")(X)      # noqa: E731
    raises(ValueError, lambda: f([0, 0, 1, 2, 3, 4, 5, 6]), "does not represent a permutation")
    g = lambda groups: jx.pmap(lambda v: lax.pswapaxes(v, "i", 0, axis_index_groups=groups), "i")(X)  # noqa: E731
    raises(ValueError, lambda: g([[0, 1, 2, 3], [4, 5, 6, 6]]), "cover all indices exactly once")
    raises(ValueError, lambda: g([[0, 1, 2], [3, 4, 5, 6, 7]]), "same size")
    raises(ValueError, lambda: g([[0, 1, 2, 3], [4, 5, 6, 7]]), "must equal x.shape[split_axis] (8)")


# ---------------------------------------------------------------- nested pmap

N = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) / 4 - 1


def body(v):
    return (v * 10 + lax.psum(v, "i"), lax.psum(v, "j"), lax.psum(v, ("i", "j")), lax.pmax(v, ("j", "i")),
            lax.axis_index("i"), lax.axis_index("j"), lax.all_gather(v, "j"), lax.ppermute(v, "i", [(0, 3), (3, 0)]))


def body_reference(x):
    """What ``body`` gives for each (j, i) example, stacked."""
    zeros = np.zeros_like(x)
    zeros[:, 3], zeros[:, 0] = x[:, 0], x[:, 3]
    return (x * 10 + x.sum(1, keepdims=True), np.broadcast_to(x.sum(0, keepdims=True), x.shape),
            np.broadcast_to(x.sum((0, 1)), x.shape), np.broadcast_to(x.max((0, 1)), x.shape),
            np.broadcast_to(np.arange(4, dtype=np.int32), (2, 4)),
            np.broadcast_to(np.arange(2, dtype=np.int32)[:, None], (2, 4)),
            np.broadcast_to(x.transpose(1, 0, 2)[None], (2, 4, 2, 3)), zeros)


@check
def nested_pmap_values_shapes_and_collectives():
    outs = jx.pmap(jx.pmap(body, axis_name="i"), axis_name="j")(N)
    for o, want in zip(outs, body_reference(N)):
        assert o.shape == want.shape and o.dtype == want.dtype, (o.shape, want.shape, o.dtype, want.dtype)
        np.testing.assert_allclose(np.asarray(o), want, rtol=1e-6)
    assert outs[0].sharding.mesh.axis_names == ("j", "i") and outs[0].sharding.mesh.devices.shape == (2, 4)
    # under jit, through lower, with in_axes/out_axes, and the default axis names three deep
    jitted = jx.jit(jx.pmap(jx.pmap(lambda v: lax.psum(v, ("i", "j")), "i"), "j"))(N)
    np.testing.assert_allclose(np.asarray(jitted), np.broadcast_to(N.sum((0, 1)), N.shape), rtol=1e-6)
    assert "sdy.manual_computation" in jx.pmap(jx.pmap(body, "i"), "j").lower(N).as_text()
    moved = jx.pmap(jx.pmap(lambda v: v - lax.pmean(v, "j"), "i", in_axes=1, out_axes=1), "j")(N.transpose(0, 2, 1))
    np.testing.assert_allclose(np.asarray(moved), (N - N.mean(0)).transpose(0, 2, 1), rtol=1e-6, atol=1e-6)
    deep = jx.pmap(jx.pmap(jx.pmap(lambda v: v * 2 + 1)))(N[:, :2, :2])
    np.testing.assert_allclose(np.asarray(deep), N[:, :2, :2] * 2 + 1, rtol=1e-6)
    inner_none = jx.pmap(jx.pmap(lambda v, s: lax.psum(v, "i") + s, "i", in_axes=(0, None), out_axes=None),
                         "j", in_axes=(0, None))(N, np.float32(2))
    np.testing.assert_allclose(np.asarray(inner_none), N.sum(1) + 2, rtol=1e-6)


@check
def nested_pmap_derivatives():
    f = jx.pmap(jx.pmap(lambda v: jnp.sin(v) * lax.psum(v, ("i", "j")), "i"), "j")
    g = jx.grad(lambda x: jnp.sum(f(x)))(N)
    want = np.cos(N) * N.sum((0, 1)) + np.sin(N).sum((0, 1))
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)


@check
def nested_pmap_errors():
    raises(ValueError, lambda: jx.pmap(jx.pmap(lambda v: v, "i"), "j")(np.zeros((4, 4))), "requires 16 logical devices")
    raises(ValueError, lambda: jx.pmap(jx.pmap(lambda v: v, "i", devices=jx.devices()[:2]), "j")(N[:, :2]),
           "Nested pmaps with devices")
    raises(ValueError, lambda: jx.pmap(jx.pmap(lambda v: v, "i"), "i")(N), "already bound")
    raises(NameError, lambda: jx.pmap(lambda v: lax.psum(v, "i") + jx.pmap(lambda w: w, "i")(v), "j")(N),
           "unbound axis name: 'i'")


# ---------------------------------------------------------------- ragged_all_to_all

@check
def collectives_over_mesh_axes_and_a_vmap_axis_together():
    # mesh (x: 4, y: 2); each device holds X's rows [2*d, 2*d+2) and vmaps over its 2 rows (axis i)
    def on(fn, spec):
        return jx.jit(jx.shard_map(fn, mesh=mesh, in_specs=spec, out_specs=spec))
    ones = np.zeros((8, 2), np.float32)
    for names, index in ((("x", "y"), lambda x, y: 2 * x + y), (("y", "x"), lambda x, y: 4 * y + x)):
        got = on(lambda v: v * 0 + lax.axis_index(names), P(("x", "y")))(ones)
        want = [index(d // 2, d % 2) for d in range(8)]
        np.testing.assert_array_equal(np.asarray(got)[:, 0], want)
    rows = on(lambda v: jx.vmap(lambda u: u[0] * 0 + lax.axis_index(("x", "i")), axis_name="i")(v), P("x"))(ones)
    np.testing.assert_array_equal(np.asarray(rows), np.arange(8))            # device x, then row i
    total = on(lambda v: jx.vmap(lambda u: lax.psum(u, ("x", "i")), axis_name="i")(v), P("x"))(X[:, 0])
    np.testing.assert_allclose(np.asarray(total), np.broadcast_to(X[:, 0].sum(0), (8, 2)), rtol=1e-5)
    gathered = on(lambda v: jx.vmap(lambda u: lax.all_gather(u, ("x", "i")), axis_name="i")(v), P("x"))(X[:, 0])
    np.testing.assert_array_equal(np.asarray(gathered).reshape(8, 8, 2), np.broadcast_to(X[:, 0], (8, 8, 2)))


def ragged(operand, output, io, ss, oo, rs):
    return lax.ragged_all_to_all(operand, output, io, ss, oo, rs, axis_name="x")


@check
def ragged_all_to_all_lowers_and_xla_cpu_refuses_it():
    """Each of 4 devices sends one row to every device (as the docstring's example, 4 ways); its
    derivative and a vmap of it lower too. XLA:CPU cannot compile the instruction: its error."""
    m = jx.make_mesh((4,), ("x",), devices=jx.devices()[:4])
    sm = lambda fn: jx.jit(jx.shard_map(fn, mesh=m, in_specs=(P("x"),) * 6, out_specs=P("x")))   # noqa: E731
    ones = np.ones(16, np.int32)
    args = (np.arange(16, dtype=np.float32), np.zeros(16, np.float32), np.tile(np.arange(4, dtype=np.int32), 4),
            ones, np.repeat(np.arange(4, dtype=np.int32), 4), ones)
    text = sm(ragged).lower(*args).as_text()
    assert ("stablehlo.custom_call @ragged_all_to_all(" in text and "api_version = 4" in text
            and "backend_config = {channel_id = 1 : i64, replica_groups = dense<[[0, 1, 2, 3]]>" in text), text
    grad = sm(lambda a, b, *r: jx.grad(lambda a, b: jnp.sum(ragged(a, b, *r) ** 2), argnums=(0, 1))(a, b))
    assert grad.lower(*args).as_text().count("@ragged_all_to_all(") == 2
    vm = sm(lambda a, b, *r: jx.vmap(ragged, in_axes=(0, 0) + (None,) * 4)(
        a.reshape(2, 2), b.reshape(2, 2), *r).reshape(4))
    assert vm.lower(*args).as_text().count("@ragged_all_to_all(") == 1
    raises(Exception, lambda: sm(ragged)(*args), "UNIMPLEMENTED: HLO opcode `ragged-all-to-all` is not supported")


if __name__ == "__main__":
    run()
