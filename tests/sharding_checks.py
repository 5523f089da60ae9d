"""Checks of jaxprc.sharding / jit with shardings over 8 CPU devices; run by test_sharding.py in a
process of its own (JAXPRC_NUM_CPU_DEVICES=8 must be set before the client exists)."""
import sys

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.sharding import AxisType, NamedSharding, PartitionSpec as P, SingleDeviceSharding

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402
from roundtrip import assert_round_trip  # noqa: E402

mesh = jx.make_mesh((4, 2), ("x", "y"))
auto = jx.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)   # constraints need Auto axes
X = np.arange(32, dtype=np.float32).reshape(8, 4)
@check
def devices():
    assert jx.device_count() == jx.local_device_count() == len(jx.devices()) == 8
    assert [d.id for d in mesh.devices.flat] == list(range(8)) and mesh.shape == {"x": 4, "y": 2}


@check
def device_put_layouts():
    for spec in [P("x", "y"), P("y", "x"), P(None, "x"), P(("x", "y")), P(), P(("y", "x"), None)]:
        s = NamedSharding(mesh, spec)
        a = jx.device_put(X, s)
        assert a.sharding == s and np.array_equal(np.asarray(a), X), spec
        for shard in a.addressable_shards:
            assert np.array_equal(np.asarray(shard.data), X[shard.index]), (spec, shard)
            assert shard.data.devices() == {shard.device}
        assert a.is_fully_replicated == (spec == P())
        assert s.shard_shape(X.shape) == a.addressable_shards[0].data.shape


@check
def single_device():
    d3 = jx.devices()[3]
    a = jx.device_put(X, d3)
    assert a.devices() == {d3} and a.sharding == SingleDeviceSharding(d3)
    assert np.array_equal(np.asarray(a + 1), X + 1)
    b = jx.device_put(X)
    assert b.sharding == SingleDeviceSharding(jx.devices()[0]) and b.is_fully_replicated


@check
def unsatisfiable():
    for shape, spec in [((6,), P("x")), ((8, 3), P(None, "y")), ((8,), P("x", "y"))]:
        try:
            jx.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, spec))
        except ValueError as e:
            assert "device_put" in str(e), e
        else:
            raise AssertionError(f"{shape} {spec} accepted")
    raises(jx.sharding.DuplicateSpecError, lambda: NamedSharding(mesh, P("x", "x")), "duplicate entries for `x`")
    for bad in [lambda: NamedSharding(mesh, P("z")),
                lambda: jx.make_mesh((16,), ("x",)), lambda: jx.device_put(X, P("x"))]:
        try:
            bad()
        except ValueError:
            pass
        else:
            raise AssertionError("accepted")


@check
def jit_shardings():
    s, t = NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P(None, "x"))
    f = jx.jit(lambda a, b: (jnp.sin(a) * b, (a * b).sum()), in_shardings=(s, None), out_shardings=(t, None))
    o, tot = f(X, X)
    assert o.sharding == t and np.allclose(np.asarray(o), np.sin(X) * X, atol=1e-5)
    assert np.isclose(float(tot), (X * X).sum()) and tot.sharding.is_fully_replicated
    text = f.lower(X, X).as_text()
    assert 'sdy.mesh @mesh = <["x"=4, "y"=2]>' in text and "mhlo.num_partitions = 8" in text
    assert '#sdy.sharding<@mesh, [{"x"}, {"y"}]>' in text and '#sdy.sharding<@mesh, [{}, {"x"}]>' in text
    assert "all-reduce" in f.lower(X, X).compile().as_text()
    # arguments already laid out otherwise, or on one device, are moved; a sharded one is reused
    for arg in [jx.device_put(X, t), jx.device_put(X), jx.device_put(X, s)]:
        o2, _ = f(arg, X)
        assert np.allclose(np.asarray(o2), np.sin(X) * X, atol=1e-5)
    # device_put under jit is a layout constraint
    r = jx.jit(lambda a: jx.device_put(a, t) * 2)(X)
    assert r.sharding == NamedSharding(mesh, P(None, "x")) and np.array_equal(np.asarray(r), X * 2)
    # a sharded argument without in_shardings keeps its layout
    g = jx.jit(lambda a: a * 2)
    r = g(jx.device_put(X, s))
    assert r.sharding == s and np.array_equal(np.asarray(r), X * 2)
    try:
        f(np.zeros((6, 4), np.float32), np.zeros((6, 4), np.float32))
    except ValueError as e:
        assert "in_shardings" in str(e)
    else:
        raise AssertionError("6 rows over 4 devices accepted")


@check
def constraint():
    s = NamedSharding(auto, P("y"))
    fn = lambda a: jx.lax.with_sharding_constraint(jnp.cos(a) * 2, s).sum(0)   # noqa: E731
    f = jx.jit(fn)
    r = f(X)
    assert np.allclose(np.asarray(r), (np.cos(X) * 2).sum(0), atol=1e-4)
    assert "sdy.sharding_constraint" in f.lower(X).as_text()
    cj = jx.make_jaxpr(fn)(X)
    assert_round_trip(cj)
    # derivatives, batching, eager
    gr = jx.jit(jx.grad(lambda a: fn(a).sum()))(X)
    assert np.allclose(np.asarray(gr), -2 * np.sin(X), atol=1e-5)
    assert_round_trip(jx.make_jaxpr(jx.grad(lambda a: fn(a).sum()))(X))
    v = jx.jit(jx.vmap(lambda a: jx.lax.with_sharding_constraint(a * 3, NamedSharding(auto, P("x")))))(X.T)
    assert np.array_equal(np.asarray(v), X.T * 3)
    e = jx.lax.with_sharding_constraint(X, s)
    assert e.sharding == s and np.array_equal(np.asarray(e), X)
    try:
        jx.lax.with_sharding_constraint(X, NamedSharding(mesh, P("x")))
    except ValueError as err:
        assert "Auto" in str(err)
    else:
        raise AssertionError("Explicit axes accepted")
    with jx.set_mesh(auto):
        e2 = jx.lax.with_sharding_constraint(X, P("x"))
    assert e2.sharding == NamedSharding(auto, P("x"))


@check
def nested_jit_shardings():
    s = NamedSharding(mesh, P("x"))
    inner = jx.jit(lambda a: a * 2, in_shardings=s, out_shardings=NamedSharding(mesh, P(None, "y")))
    outer = jx.jit(lambda a: inner(a) + 1)
    cj = jx.make_jaxpr(outer)(X)
    assert str(cj).count("sharding_constraint") == 2, cj
    assert_round_trip(cj)
    r = outer(X)
    assert np.array_equal(np.asarray(r), X * 2 + 1) and len(r.devices()) == 8


@check
def make_arrays():
    s = NamedSharding(mesh, P("x"))
    a = jx.make_array_from_callback(X.shape, s, lambda idx: X[idx])
    assert a.sharding == s and np.array_equal(np.asarray(a), X)
    b = jx.make_array_from_single_device_arrays(X.shape, s, [sh.data for sh in a.addressable_shards])
    assert np.array_equal(np.asarray(b), X) and np.array_equal(np.asarray(jx.jit(lambda x: x + 1)(b)), X + 1)
    try:
        jx.make_array_from_single_device_arrays(X.shape, s, [sh.data for sh in a.addressable_shards][:4])
    except ValueError:
        pass
    else:
        raise AssertionError("missing shards accepted")


@check
def shard_map_collectives():
    X16 = np.arange(64, dtype=np.float32).reshape(16, 4)
    ring = [(i, (i + 1) % 4) for i in range(4)]

    def body(s):
        return (jx.lax.psum(s, "x"), jx.lax.all_gather(s, "x", tiled=True), jx.lax.ppermute(s, "x", ring),
                (jx.lax.axis_index("x") + 10 * jx.lax.axis_index("y"))[None], jx.lax.pmean(s, "y"),
                jx.lax.pmax(s, ("x", "y")), jx.lax.pmin(s, "x"), jx.lax.all_gather(s, "y", axis=1))
    f = jx.shard_map(body, mesh=mesh, in_specs=P("x", "y"),
                     out_specs=(P(None, "y"), P(None, "y"), P("x", "y"), P(("x", "y")), P("x", "y"), P("x", "y"),
                                P(None, "y"), P("x")), check_vma=False)     # all_gather's result varies (JAX)
    outs = [np.asarray(o) for o in jx.jit(f)(X16)]
    blocks = X16.reshape(4, 4, 2, 2).transpose(0, 2, 1, 3)      # [x, y] -> 4x2 block
    assert np.array_equal(outs[0], X16.reshape(4, 4, 4).sum(0))
    assert np.array_equal(outs[1], X16) and np.array_equal(outs[2], np.roll(X16, 4, axis=0))
    assert outs[3].tolist() == [x + 10 * y for x in range(4) for y in range(2)]
    want_mean = np.concatenate([np.concatenate([blocks[i].mean(0)] * 2, axis=1) for i in range(4)])
    assert np.allclose(outs[4], want_mean)
    assert np.array_equal(outs[5], np.tile(blocks.max((0, 1)), (4, 2)))
    assert np.array_equal(outs[6], np.concatenate([blocks[:, j].min(0) for j in range(2)], axis=1))
    assert outs[7].shape == (16, 2, 2)
    assert np.array_equal(outs[7][:4], np.stack([blocks[0, 0], blocks[0, 1]], 1))
    cj = jx.make_jaxpr(f)(X16)
    assert_round_trip(cj)
    assert "sdy.manual_computation" in jx.jit(f).lower(X16).as_text()
    # eagerly, a closed-over value, forward-mode derivatives
    w = np.float32(3)
    g = jx.shard_map(lambda s: jnp.sin(s) * w + jx.lax.psum(s, "x"), mesh=mesh, in_specs=P("x", "y"),
                     out_specs=P("x", "y"))
    want = np.sin(X16) * 3 + np.tile(X16.reshape(4, 4, 4).sum(0), (4, 1))
    assert np.allclose(np.asarray(g(X16)), want, atol=1e-4)
    t = np.ones_like(X16)
    _, tan = jx.jvp(g, (X16,), (t,))
    assert np.allclose(np.asarray(tan), np.cos(X16) * 3 + 4, atol=1e-4)
    # batching: vmap of a shard_map (the batch axis is not split), vmap inside the body
    xs = np.stack([X16, 2 * X16])
    vb = jx.vmap(g)(xs)
    assert np.allclose(np.asarray(vb), np.stack([want, np.asarray(g(2 * X16))]), atol=1e-4)
    h = jx.shard_map(lambda s: jx.vmap(lambda r: jx.lax.psum(r, "x"))(s), mesh=mesh, in_specs=P("x"),
                     out_specs=P())
    assert np.allclose(np.asarray(jx.jit(h)(X16)), X16.reshape(4, 4, 4).sum(0))
    ag = jx.shard_map(lambda s: jx.vmap(lambda r: jx.lax.all_gather(r, "x"), in_axes=1, out_axes=0)(s), mesh=mesh,
                      in_specs=P("x"), out_specs=P(), check_vma=False)
    assert np.array_equal(np.asarray(jx.jit(ag)(X16)), X16.reshape(4, 4, 4).transpose(2, 0, 1))
    # reverse mode: a result replicated over x (psum), split results, ppermute, a replicated argument
    W = np.arange(4, dtype=np.float32) + 1
    cases = [(jx.shard_map(lambda s: jx.lax.psum(jnp.sin(s) * s, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()),
              lambda x: (np.sin(x) * x).reshape(4, 4, 4).sum(0)),
             (jx.shard_map(lambda s: jx.lax.psum(jnp.sin(s), "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")),
              lambda x: np.tile(np.sin(x).reshape(4, 4, 4).sum(0), (4, 1))),
             (jx.shard_map(lambda s: jx.lax.ppermute(s * s, "x", ring), mesh=mesh, in_specs=P("x", "y"),
                           out_specs=P("x", "y")), lambda x: np.roll(x * x, 4, axis=0)),
             (jx.shard_map(lambda s: s * W, mesh=mesh, in_specs=P("x"), out_specs=P("x")), lambda x: x * W)]
    Xs = X16 / 10
    for f, ref in cases:
        assert np.allclose(np.asarray(f(Xs)), ref(Xs), atol=1e-5)
        grad = np.asarray(jx.grad(lambda x: jnp.sum(jnp.sin(f(x))))(Xs))
        for idx in [(0, 0), (5, 2), (15, 3)]:
            e = np.zeros_like(Xs)
            e[idx] = 1e-3
            fd = (np.sin(ref(Xs.astype(np.float64) + e)).sum() - np.sin(ref(Xs.astype(np.float64) - e)).sum()) / 2e-3
            assert abs(grad[idx] - fd) < 1e-3, (idx, grad[idx], fd)
    # psum_scatter, and all_gather / psum_scatter under reverse mode (each the other's transpose)
    ps = jx.shard_map(lambda s: (jx.lax.psum_scatter(s, "x", tiled=True),
                                 jx.lax.psum_scatter(s.reshape(4, 1, 4), "x", scatter_dimension=0)),
                      mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P("x")))
    tot = X16.reshape(4, 4, 4).sum(0)
    a, b = ps(X16)
    assert np.array_equal(np.asarray(a), tot) and np.array_equal(np.asarray(b), tot)
    for f in [jx.shard_map(lambda s: jx.lax.all_gather(s, "x", tiled=True) * 2, mesh=mesh, in_specs=P("x"),
                           out_specs=P(), check_vma=False),
              jx.shard_map(lambda s: jx.lax.psum_scatter(s * s, "x", tiled=True), mesh=mesh, in_specs=P("x"),
                           out_specs=P("x"))]:
        g = np.asarray(jx.grad(lambda x: jnp.sum(jnp.sin(f(x))))(Xs))
        _, t = jx.jvp(lambda x: jnp.sum(jnp.sin(f(x))), (Xs,), (np.cos(Xs),))
        assert np.isclose(float(t), float((g * np.cos(Xs)).sum()), rtol=1e-4), (float(t), (g * np.cos(Xs)).sum())
    # all_to_all: blocks exchanged along x (tiled, and with the axis added/removed); vjp = jvp^T
    t2 = jx.shard_map(lambda s: jx.lax.all_to_all(s, "x", 0, 1, tiled=True), mesh=mesh, in_specs=P("x"),
                      out_specs=P("x"))
    blocks_x = X16.reshape(4, 4, 4)               # device i holds rows 4i..4i+3
    want_t2 = np.concatenate([np.concatenate([blocks_x[j][i:i + 1] for j in range(4)], axis=1)
                              for i in range(4)])
    assert np.array_equal(np.asarray(t2(X16)), want_t2)
    u2 = jx.shard_map(lambda s: jx.lax.all_to_all(s, "x", 0, 0), mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    assert np.array_equal(np.asarray(u2(X16)), blocks_x.transpose(1, 0, 2).reshape(16, 4))
    for f in (t2, u2):
        g = np.asarray(jx.grad(lambda x: jnp.sum(jnp.sin(f(x))))(Xs))
        _, t = jx.jvp(lambda x: jnp.sum(jnp.sin(f(x))), (Xs,), (np.cos(Xs),))
        assert np.isclose(float(t), float((g * np.cos(Xs)).sum()), rtol=1e-4)
    gw = jx.grad(lambda w: jnp.sum(jnp.sin(jx.shard_map(lambda v, s: s * v, mesh=mesh, in_specs=(P(), P("x")),
                                                        out_specs=P("x"))(w, Xs))))(W)
    assert np.allclose(np.asarray(gw), (np.cos(Xs * W) * Xs).sum(0), rtol=1e-4)
    for bad in [lambda: jx.lax.psum(X16, "x"),
                lambda: jx.shard_map(lambda s: s, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(X16[:6])]:
        try:
            bad()
        except (NameError, ValueError, TypeError) as e:
            assert "axis" in str(e) or "split" in str(e), e
        else:
            raise AssertionError("accepted")


@check
def vmap_axis_name():
    A = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.allclose(np.asarray(jx.vmap(lambda r: r / jx.lax.psum(r, "b"), axis_name="b")(A)), A / A.sum(0))
    mm = jx.vmap(lambda r: jx.lax.pmax(r, "b") - jx.lax.pmin(r, "b") + jx.lax.pmean(r, "b"), axis_name="b")(A)
    assert np.allclose(np.asarray(mm), np.broadcast_to(A.max(0) - A.min(0) + A.mean(0), A.shape))
    assert np.array_equal(np.asarray(jx.vmap(lambda r: jx.lax.all_gather(r, "b"), axis_name="b")(A)),
                          np.broadcast_to(A, (3, 3, 4)))
    assert np.array_equal(np.asarray(jx.vmap(lambda r: jx.lax.psum(1.0, "b") * r, axis_name="b")(A)), 3 * A)
    nested = jx.vmap(jx.vmap(lambda v: jx.lax.psum(v, "i"), axis_name="j"), axis_name="i")(A)
    assert np.array_equal(np.asarray(nested), np.broadcast_to(A.sum(0), A.shape))
    # axis_index over a vmap axis is each member's position, as in JAX
    assert np.array_equal(np.asarray(jx.vmap(lambda r: jx.lax.axis_index("b"), axis_name="b")(A)), np.arange(3))



@check
def shard_map_vjp_of_replicated_inputs_without_vma_checks():
    # JAX's test_check_rep_false_grads: k and v are replicated (P(None)) and the body does not
    # declare how they vary; their cotangents are summed over the shards of q. (JAX's check_grads
    # there differs from float32 central differences by 3.4%, in JAX 0.10.2 as here: a sum near
    # 1e4 with a step of 1e-4; the exact gradient and the transposition identity are checked.)
    heads = jx.make_mesh((4,), ("heads",))
    q, k, v = np.arange(32., dtype=np.float32).reshape(4, 8), np.arange(8., dtype=np.float32), np.ones(8, np.float32)

    def f(q, k, v):
        body = lambda q, k, v: q * k[None, :] + v[None, :]
        return jx.shard_map(body, mesh=heads, check_vma=False, in_specs=(P("heads", None), P(None), P(None)),
                            out_specs=P("heads", None))(q, k, v).sum()
    for fn in (f, jx.jit(f)):
        dq, dk, dv = jx.grad(fn, argnums=(0, 1, 2))(q, k, v)
        assert np.array_equal(dq, np.broadcast_to(k, (4, 8))) and np.array_equal(dk, q.sum(0)), (dq, dk)
        assert np.array_equal(dv, np.full(8, 4., np.float32)), dv
        rng = np.random.default_rng(0)
        tangents = [rng.normal(size=a.shape).astype(np.float32) for a in (q, k, v)]
        _, jvp = jx.jvp(fn, (q, k, v), tuple(tangents))
        _, vjp = jx.vjp(fn, q, k, v)
        projection = sum(float(np.vdot(c, t)) for c, t in zip(vjp(np.float32(1.)), tangents))
        assert np.isclose(projection, float(jvp), rtol=1e-5), (projection, jvp)


run()
