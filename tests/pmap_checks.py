"""Checks of pmap, pbroadcast, eager ops on sharded arrays and resharding over 8 CPU devices; run by
test_pmap.py in a process of its own (JAXPRC_NUM_CPU_DEVICES=8 must be set before the client exists)."""
import contextlib
import sys

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.runtime import sharded as rs
from jaxprc.sharding import NamedSharding, PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402
from roundtrip import assert_round_trip  # noqa: E402

X = np.arange(8, dtype=np.float32) + 1
M = np.arange(48, dtype=np.float32).reshape(8, 3, 2) / 5
mesh = jx.make_mesh((4, 2), ("x", "y"))
@contextlib.contextmanager
def no_host_copies():
    """Fail if a sharded array is copied to the host inside the block."""
    saved = rs.ShardedArray.host_value

    def refuse(self):
        raise AssertionError("a sharded array went through the host")
    rs.ShardedArray.host_value = refuse
    try:
        yield
    finally:
        rs.ShardedArray.host_value = saved


@check
def pmap_values_and_layout():
    out = jx.pmap(lambda v: v / lax.psum(v, "i"), axis_name="i")(X)
    assert np.allclose(np.asarray(out), X / X.sum())
    assert out.sharding == NamedSharding(jx.sharding.Mesh(np.array(jx.devices()), ("i",)), P("i"))
    assert [s.device.id for s in out.addressable_shards] == list(range(8))
    assert all(s.data.shape == (1,) for s in out.addressable_shards)
    # fewer examples than devices: the first ones
    small = jx.pmap(lambda v: lax.pmax(v, "i") - v, "i")(M[:3])
    assert np.allclose(np.asarray(small), M[:3].max(0) - M[:3]) and len(small.addressable_shards) == 3
    # axis names of every collective
    both = jx.pmap(lambda v: (lax.pmean(v, "i"), lax.all_gather(v, "i"), lax.axis_index("i"),
                              lax.ppermute(v, "i", [(k, (k + 1) % 8) for k in range(8)])), "i")(M)
    assert np.allclose(np.asarray(both[0]), np.broadcast_to(M.mean(0), M.shape), atol=1e-6)
    assert np.array_equal(np.asarray(both[1]), np.broadcast_to(M, (8,) + M.shape))
    assert np.array_equal(np.asarray(both[2]), np.arange(8))
    assert np.array_equal(np.asarray(both[3]), np.roll(M, 1, 0))


@check
def pmap_axes_and_arguments():
    a, b = jx.pmap(lambda x, y: (x + y, y * 2.0), in_axes=(0, None))(np.arange(2.0), 4.0)
    assert np.array_equal(np.asarray(a), [4.0, 5.0]) and np.array_equal(np.asarray(b), [8.0, 8.0])
    assert jx.pmap(lambda v: v.sum(), in_axes=1)(M.transpose(1, 0, 2)[:, :3]).shape == (3,)
    r = jx.pmap(lambda v: v * 2, out_axes=1)(M)
    assert r.shape == (3, 8, 2) and np.array_equal(np.asarray(r), (M * 2).transpose(1, 0, 2))
    same = jx.pmap(lambda v: lax.psum(v, "i"), "i", out_axes=None)(M)
    assert np.allclose(np.asarray(same), M.sum(0), atol=1e-5)
    n = jx.pmap(lambda v, k: v * k, static_broadcasted_argnums=1)(X, 3)
    assert np.array_equal(np.asarray(n), X * 3)
    kw = jx.pmap(lambda v, w=None: v - w)(X, w=X * 2)
    assert np.array_equal(np.asarray(kw), -X)
    tree = jx.pmap(lambda d: {"s": d["a"] + d["b"][0]}, in_axes=({"a": 0, "b": (None,)},))(
        {"a": X, "b": (np.float32(1),)})
    assert np.array_equal(np.asarray(tree["s"]), X + 1)
    two = jx.pmap(lambda v: lax.psum(v, "i"), "i", devices=jx.devices()[-2:])(np.array([2.0, 3.0]))
    assert np.array_equal(np.asarray(two), [5.0, 5.0]) and {d.id for d in two.devices()} == {6, 7}
    donated = jx.device_put(np.ones((8, 2), np.float32))
    assert np.array_equal(np.asarray(jx.pmap(lambda v: v + 1, donate_argnums=0)(donated)), np.full((8, 2), 2.0))
    raises(ValueError, lambda: jx.pmap(lambda v: v)(np.zeros(9)), "9")
    raises(ValueError, lambda: jx.pmap(lambda v: v, axis_size=4)(X), "axis_size")
    raises(ValueError, lambda: jx.pmap(lambda v: v)(np.zeros((0, 3))), "size 0")
    assert jx.pmap(lambda v: v.sum())(np.zeros((8, 0))).shape == (8,)
    raises(ValueError, lambda: jx.pmap(lambda v: v, in_axes=None)(X), "mapped axis")
    raises(ValueError, lambda: jx.pmap(lambda v, k: v, static_broadcasted_argnums=1)(X), "static")
    raises(ValueError, lambda: jx.pmap(lambda v: v, in_axes=2)(X), "axis 2")
    raises(ValueError, lambda: jx.pmap(lambda v, w: v + w)(X, X[:4]), "inconsistent")
    raises(TypeError, lambda: jx.pmap(lambda v: v, in_axes=0.5)(X), "in_axes")
    raises(ValueError, lambda: jx.pmap(lambda v: v, backend="tpu"), "backend")
    assert np.array_equal(np.asarray(jx.pmap(lambda v: v, backend="cpu")(X)), X)
    raises(NameError, lambda: jx.pmap(lambda v: lax.psum(v, "j"), "i")(X), "'j'")


@check
def pmap_composes():
    f = lambda v: jnp.sin(v) * lax.psum(v, "i")       # noqa: E731
    g = jx.grad(lambda v: jx.pmap(f, "i")(v).sum())(X)
    assert np.allclose(np.asarray(g), np.cos(X) * X.sum() + np.sin(X).sum(), rtol=1e-5)
    # grad inside the mapped function, psum of the gradients (the SPMD training step)
    step = jx.pmap(lambda w, v: w - 0.1 * lax.psum(jx.grad(lambda w: ((w * v) ** 2).sum())(w), "i"),
                   "i", in_axes=(None, 0))
    w = np.float32(0.5)
    assert np.allclose(np.asarray(step(w, M)), w - 0.1 * (2 * w * M ** 2).sum(), rtol=1e-5)
    v = jx.vmap(jx.pmap(lambda a: a * lax.psum(a, "i"), "i"))(np.ones((3, 4), np.float32))
    assert np.array_equal(np.asarray(v), np.full((3, 4), 4.0))
    pv = jx.pmap(lambda a: jx.vmap(lambda b: b * lax.psum(b, "j"), axis_name="j")(a), "i")(np.ones((4, 3)))
    assert np.array_equal(np.asarray(pv), np.full((4, 3), 3.0))
    j = jx.jit(jx.pmap(lambda a: lax.pmax(a, "i"), "i"))(X)
    assert np.array_equal(np.asarray(j), np.full(8, 8.0))
    cj = jx.make_jaxpr(jx.pmap(f, "i"))(X)
    assert "shard_map" in str(cj)
    assert_round_trip(cj)
    assert_round_trip(jx.make_jaxpr(jx.grad(lambda v: jx.pmap(f, "i")(v).sum()))(X))
    text = jx.pmap(f, "i").lower(X).as_text()
    assert "sdy.manual_computation" in text and "mhlo.num_partitions = 8" in text
    raises(NotImplementedError, lambda: jx.shard_map(lambda a: jx.pmap(lambda b: b)(a), mesh=mesh, in_specs=P("x"),
                                                     out_specs=P("x"))(np.ones((8, 2))), "pmap inside shard_map")


@check
def pbroadcast_values_and_rules():
    f = jx.shard_map(lambda a: lax.pbroadcast(a, "x", 2), mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    assert np.array_equal(np.asarray(f(A)), np.tile(A[4:6], (4, 1)))
    C = np.arange(32, dtype=np.float32).reshape(8, 4) - 7
    g = jx.grad(lambda a: (f(a) * C).sum())(A)
    want = np.zeros_like(A)
    want[4:6] = C.reshape(4, 2, 4).sum(0)        # the source block gets every copy's cotangent
    assert np.allclose(np.asarray(g), want)
    assert_round_trip(jx.make_jaxpr(jx.grad(lambda a: (f(a) * C).sum()))(A))
    # <ct, pbroadcast t> == <pbroadcast^T ct, t>
    _, vjp = jx.vjp(f, A)
    assert np.isclose(float((np.asarray(f(A)) * C).sum()), float((np.asarray(vjp(C)[0]) * A).sum()))
    two = jx.shard_map(lambda a: lax.pbroadcast(a, ("x", "y"), 5), mesh=mesh, in_specs=P(("x", "y")),
                       out_specs=P(("x", "y")))(X)
    assert np.array_equal(np.asarray(two), np.full(8, X[5]))
    assert np.array_equal(np.asarray(jx.pmap(lambda a: lax.pbroadcast(a, "i", 3), "i")(X)), np.full(8, X[3]))
    v = jx.vmap(lambda a: lax.pbroadcast(a, "v", 1), axis_name="v")(M)
    assert np.array_equal(np.asarray(v), np.broadcast_to(M[1], M.shape))
    raises(ValueError, lambda: jx.pmap(lambda a: lax.pbroadcast(a, "i", 8), "i")(X), "source")


@check
def eager_ops_stay_on_devices():
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    s = NamedSharding(mesh, P("x", "y"))
    a = jx.device_put(A, s)
    with no_host_copies():
        b = jnp.sin(a) * a + 1
        total = a.sum()
        row = a[2]
    assert b.sharding == s and np.allclose(np.asarray(b), np.sin(A) * A + 1)
    assert float(total) == A.sum() and np.array_equal(np.asarray(row), A[2])
    out = jx.pmap(lambda v: v * 2)(M)
    with no_host_copies():
        first = out[0]
        shifted = out - 1
    assert np.array_equal(np.asarray(first), M[0] * 2) and shifted.sharding.spec[0] == out.sharding.spec[0]
    on3 = jx.device_put(A, jx.devices()[3])
    r = on3 * 2
    assert r.devices() == {jx.devices()[3]} and np.array_equal(np.asarray(r), A * 2)


@check
def resharding_on_devices():
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    a = jx.device_put(A, NamedSharding(mesh, P("x", "y")))
    for spec in [P("y", "x"), P(None, "x"), P(), P(("x", "y")), P(("y", "x"), None)]:
        target = NamedSharding(mesh, spec)
        with no_host_copies():
            b = jx.device_put(a, target)
        assert b.sharding == target
        for shard in b.addressable_shards:
            assert np.array_equal(np.asarray(shard.data), A[shard.index]), spec
    # the same tiling on other devices: copied device to device
    d = jx.devices()
    m1, m2 = jx.sharding.Mesh(np.array(d[:4]), ("x",)), jx.sharding.Mesh(np.array(d[4:]), ("x",))
    s1 = jx.device_put(A, NamedSharding(m1, P("x")))
    with no_host_copies():
        s2 = jx.device_put(s1, NamedSharding(m2, P("x")))
        on3 = jx.device_put(jx.device_put(A, d[2]), d[3])
    assert sorted(x.id for x in s2.devices()) == [4, 5, 6, 7] and on3.devices() == {d[3]}
    assert np.array_equal(np.asarray(s2), A) and np.array_equal(np.asarray(on3), A)
    assert np.array_equal(np.asarray(jx.device_put(on3, d[0])), A)
    with no_host_copies():
        c = jx.lax.with_sharding_constraint(a, NamedSharding(jx.make_mesh((4, 2), ("x", "y"),
                                                                          axis_types=(jx.sharding.AxisType.Auto,) * 2),
                                                             P("y")))
    assert np.array_equal(np.asarray(c), A)


@check
def reshard():
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    a = jx.device_put(A, NamedSharding(mesh, P("x")))
    with no_host_copies():
        b = jx.reshard(a, NamedSharding(mesh, P(None, "y")))
    assert b.sharding.spec == P(None, "y") and np.array_equal(np.asarray(b), A)
    c = jx.jit(lambda v: jx.reshard(v * 2, NamedSharding(mesh, P("y", "x"))))(a)
    assert c.sharding.spec == P("y", "x") and np.array_equal(np.asarray(c), A * 2)
    with jx.set_mesh(mesh):
        d = jx.sharding.reshard({"k": a}, P("y"))["k"]
    assert d.sharding.spec == P("y", None)
    g = jx.grad(lambda v: (jx.reshard(v, NamedSharding(mesh, P("y"))) ** 2).sum())(A)
    assert np.array_equal(np.asarray(g), 2 * A)
    raises(ValueError, lambda: jx.reshard(a, None), "non-None")
    raises(ValueError, lambda: jx.reshard(np.zeros(6), NamedSharding(mesh, P("x"))), "reshard")


@check
def partial_manual_shard_map():
    auto = jx.make_mesh((4, 2), ("x", "y"), axis_types=(jx.sharding.AxisType.Auto,) * 2)
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    f = jx.shard_map(lambda a: (lax.psum(a, "x"), a * lax.axis_index("x"), jnp.sin(a) @ jnp.ones((4, 3))),
                     mesh=auto, in_specs=P("x"), out_specs=(P(), P("x"), P("x")), axis_names={"x"})
    s, t, u = jx.jit(f)(A)
    assert np.allclose(np.asarray(s), A.reshape(4, 2, 4).sum(0))
    assert np.array_equal(np.asarray(t), A * np.repeat(np.arange(4), 2)[:, None])
    assert np.allclose(np.asarray(u), np.sin(A) @ np.ones((4, 3)), atol=1e-5)
    text = jx.jit(f).lower(A).as_text()
    assert 'manual_axes={"x"}' in text and 'manual_axes={"y"}' in text     # axis_index: all manual
    g = jx.grad(lambda a: (f(a)[0] ** 2).sum() + f(a)[2].sum())(A)
    assert np.allclose(np.asarray(g), np.tile(2 * A.reshape(4, 2, 4).sum(0), (4, 1)) + np.cos(A) * 3, rtol=1e-5)
    assert_round_trip(jx.make_jaxpr(jx.grad(lambda a: (f(a)[0] ** 2).sum()))(A))
    v = jx.vmap(f)(np.stack([A, A + 1]))
    assert np.allclose(np.asarray(v[0][1]), (A + 1).reshape(4, 2, 4).sum(0))
    raises(ValueError, lambda: jx.shard_map(lambda a: a, mesh=auto, in_specs=P("y"), out_specs=P("y"),
                                            axis_names={"x"})(A), "manual axes")
    raises(ValueError, lambda: jx.shard_map(lambda a: a, mesh=auto, in_specs=P("x"), out_specs=P("x"),
                                            axis_names={"z"})(A), "not in the mesh")
    raises(NameError, lambda: jx.shard_map(lambda a: lax.psum(a, "y"), mesh=auto, in_specs=P("x"),
                                           out_specs=P("x"), axis_names={"x"})(A), "'y'")


@check
def many_collective_runs_queued():
    """Many independent runs of a program with an all-reduce: XLA's CPU collectives deadlock (and
    abort the process) when their parts fill the thread pool; jaxprc runs them one at a time."""
    f = jx.pmap(lambda v: v * lax.psum(v, "i"), "i")
    a = jx.device_put(X, NamedSharding(jx.sharding.Mesh(np.array(jx.devices()), ("i",)), P("i")))
    outs = [f(a) for _ in range(300)] + [jnp.sum(a) for _ in range(20)]
    assert np.allclose(np.asarray(outs[0]), X * X.sum()) and float(outs[-1]) == X.sum()


@check
def check_vma():
    """out_specs may leave out only axes the result does not vary over (JAX's check_vma)."""
    auto = jx.make_mesh((4, 2), ("x", "y"), axis_types=(jx.sharding.AxisType.Auto,) * 2)
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    sm = lambda f, i, o, **kw: jx.jit(jx.shard_map(f, mesh=auto, in_specs=i, out_specs=o, **kw))(A)  # noqa: E731
    raises(ValueError, lambda: sm(lambda a: a * 2, P("x"), P()),
           "out_specs is P() which implies that the corresponding output value is only varying across mesh axes {} "
           "and not {x}, but it was inferred to be possibly varying over {x}")
    raises(ValueError, lambda: sm(lambda a: lax.psum(a, "x"), P("x", "y"), P()), "and not {y}")
    raises(ValueError, lambda: sm(lambda a: a + lax.axis_index("x"), P(), P(None, "y")),
           "out_specs is P(None, 'y') which implies that the corresponding output value is replicated across mesh "
           "axis 'x', but could not infer replication over any axes")
    raises(ValueError, lambda: sm(lambda a: (a, jx.jit(jnp.sin)(a)), P("x"), (P("x"), P())), "out_specs[1] is P()")
    # through loops and conditionals: zeros_like varies as its model does; branches must agree
    raises(ValueError, lambda: sm(lambda a: lax.fori_loop(0, 3, lambda i, c: c + a, jnp.zeros_like(a)), P("x"), P()),
           "possibly varying over {x}")
    raises(TypeError, lambda: sm(lambda a: lax.cond(True, lambda v: v, lambda v: lax.psum(v, "x"), a), P("x"), P()),
           "The output of true_fun has type float32[2,4]{V:x} but the corresponding output of false_fun has type "
           "float32[2,4], so the manual axis types do not match.")
    sm(lambda a: lax.scan(lambda c, r: (c + lax.psum(r, "x"), r), jnp.zeros(4), a)[0][None], P("x"), P())
    sm(lambda a: lax.cond(True, lambda v: lax.pmax(v, "x"), lambda v: lax.psum(v, "x"), a), P("x"), P())
    assert np.array_equal(np.asarray(sm(lambda a: a * 2, P("x"), P(), check_vma=False)), A[:2] * 2)
    assert np.array_equal(np.asarray(sm(lambda a: lax.psum(a, ("x", "y")), P("x", "y"), P())),
                          A.reshape(4, 2, 2, 2).sum((0, 2)))
    assert np.array_equal(np.asarray(sm(lambda a: jnp.sin(a) * 0 + a, P(), P())), A)
    cast = lambda a: lax.pcast(a, "x", to="varying")      # noqa: E731
    raises(ValueError, lambda: sm(cast, P(), P()), "varying over {x}")
    assert np.array_equal(np.asarray(sm(lambda a: cast(a) * lax.axis_index("x"), P(), P("x"))),
                          np.concatenate([A * i for i in range(4)]))
    g = jx.grad(lambda a: (jx.shard_map(lambda b: cast(b) * lax.axis_index("x"), mesh=auto, in_specs=P(),
                                        out_specs=P("x"))(a) ** 2).sum())(A)
    assert np.allclose(np.asarray(g), 2 * A * sum(i * i for i in range(4)))
    raises(NotImplementedError, lambda: sm(lambda a: lax.pcast(a, "x", to="reduced"), P(), P()), "reduced")
    one = jx.make_mesh((1,), ("i",), axis_types=(jx.sharding.AxisType.Auto,))     # axes of size 1 are typed too
    raises(ValueError, lambda: jx.shard_map(lambda a: a, mesh=one, in_specs=P("i"), out_specs=P())(A),
           "out_specs is P() which implies that the corresponding output value is replicated across mesh axis 'i'")


@check
def visualize_array_sharding():
    import io
    from contextlib import redirect_stdout
    A = np.arange(32, dtype=np.float32).reshape(8, 4)
    cases = [(P("x", "y"), ["CPU 0", "CPU 7"]), (P(), ["CPU 0,1,2,3,4,5,6,7"]), (P(None, "x"), ["CPU 0,1"])]
    for spec, words in cases:
        buf = io.StringIO()
        with redirect_stdout(buf):
            jx.debug.visualize_array_sharding(jx.device_put(A, NamedSharding(mesh, spec)))
        text = buf.getvalue()
        assert all(w in text for w in words), (spec, text)
    buf = io.StringIO()
    with redirect_stdout(buf):
        jx.debug.visualize_array_sharding(jx.device_put(X, NamedSharding(mesh, P("x"))))
    assert buf.getvalue().count("CPU") == 4
    raises(ValueError, lambda: jx.debug.visualize_array_sharding(jnp.zeros((2, 2, 2))), "1 and 2 dimensions")


run()
