"""Host callbacks in programs over 8 CPU devices (sharded jit, shard_map, pmap); run by
test_spmd_callbacks.py in a process of its own (the device count is fixed when the client starts)."""
import contextlib
import io
import sys

import numpy as np

import jaxprc as jx
from jaxprc.sharding import NamedSharding, PartitionSpec as P

from multidevice import check, raises, run

mesh = jx.make_mesh((8,), ("x",))
mesh2 = jx.make_mesh((4, 2), ("x", "y"))
X = np.arange(8, dtype=np.float32)
def printed(fn, *args):
    """The value of fn(*args) and the lines its callbacks printed (sorted: devices run in any order)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = fn(*args)
        jx.block_until_ready(out)
        jx.effects_barrier()
    return out, sorted(buf.getvalue().splitlines())


@check
def sharded_jit_prints_once_with_whole_value():
    f = jx.jit(lambda x: (jx.debug.print("x = {}", x), x * 2)[1], in_shardings=NamedSharding(mesh, P("x")))
    for _ in range(2):           # every call prints, the compiled program is reused
        out, lines = printed(f, X)
        assert lines == [f"x = {X}"], lines
        assert np.array_equal(np.asarray(out), X * 2) and out.sharding.spec == P("x")


@check
def sharded_jit_pure_and_io_callbacks():
    seen = []

    def f(x):
        y = jx.pure_callback(lambda v: np.sin(v), jx.ShapeDtypeStruct(x.shape, x.dtype), x)
        s = jx.experimental.io_callback(lambda v: (seen.append(v.copy()), np.float32(v.sum()))[1],
                                        jx.ShapeDtypeStruct((), np.float32), y)
        return y * 2, s
    y, s = jx.jit(f, in_shardings=NamedSharding(mesh2, P(("x", "y"))))(X)
    assert np.allclose(np.asarray(y), 2 * np.sin(X)) and np.isclose(float(s), np.sin(X).sum())
    assert len(seen) == 1 and np.allclose(seen[0], np.sin(X))      # once, on the whole value


@check
def partitioned_debug_callback_runs_per_shard():
    got = []
    f = jx.jit(lambda x: (jx.debug.callback(lambda v: got.append(v.tolist()), x, partitioned=True), x)[1],
               in_shardings=NamedSharding(mesh, P("x")))
    jx.block_until_ready(f(X))
    jx.effects_barrier()
    assert sorted(got) == [[float(v)] for v in X], got


@check
def shard_map_prints_per_device():
    def body(b):
        jx.debug.print("block {b}", b=b)
        return jx.pure_callback(lambda v: v * 10, jx.ShapeDtypeStruct(b.shape, b.dtype), b) + 1
    f = jx.jit(jx.shard_map(body, mesh=mesh2, in_specs=P("x"), out_specs=P("x")))
    out, lines = printed(f, X)
    assert lines == sorted(f"block {X[2 * i:2 * i + 2]}" for i in range(4) for _ in range(2)), lines
    assert np.array_equal(np.asarray(out), X * 10 + 1)


@check
def pmap_prints_per_device():
    out, lines = printed(jx.pmap(lambda v: (jx.debug.print("v={v}", v=v), v + 1)[1]), X)
    assert lines == sorted(f"v={v}" for v in X), lines
    assert np.array_equal(np.asarray(out), X + 1)


@check
def one_function_inside_and_outside_shard_map():
    # the same inner jit lowers to a private function per context: printing once outside,
    # once per device inside (whichever comes first in the program)
    inner = jx.jit(lambda b: (jx.debug.print("inner {}", b), b + 1)[1])
    sm = jx.shard_map(inner, mesh=mesh, in_specs=P(), out_specs=P())
    for fn in (lambda x: inner(x) + sm(x), lambda x: sm(x) + inner(x)):
        out, lines = printed(jx.jit(fn, in_shardings=NamedSharding(mesh, P("x"))), X)
        assert lines == [f"inner {X}"] * 9, lines
        assert np.array_equal(np.asarray(out), 2 * X + 2)


@check
def callbacks_in_control_flow():
    got = []
    body = lambda i, c: (jx.debug.callback(lambda i, c: got.append((int(i), c.tolist())), i, c), c + 1)[1]  # noqa: E731
    f = jx.jit(jx.shard_map(lambda b: jx.lax.fori_loop(0, 2, body, b), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    assert np.array_equal(np.asarray(f(X)), X + 2)
    jx.effects_barrier()
    assert sorted(got) == sorted((i, [v + i]) for v in X.tolist() for i in range(2)), got
    g = jx.jit(lambda x: jx.lax.cond(x.sum() > 0, lambda v: (jx.debug.print("pos {}", v), v)[1], lambda v: -v, x),
               in_shardings=NamedSharding(mesh, P("x")))
    out, lines = printed(g, X)
    assert lines == [f"pos {X}"] and np.array_equal(np.asarray(out), X)


@check
def sharding_names_the_device():
    d5 = jx.devices()[5]
    seen = []

    def f(x):
        y = jx.pure_callback(np.cos, jx.ShapeDtypeStruct(x.shape, x.dtype), x,
                             sharding=jx.sharding.SingleDeviceSharding(d5))
        jx.experimental.io_callback(lambda v: seen.append(v.tolist()), None, y,
                                    sharding=NamedSharding(jx.make_mesh((1,), ("d",), devices=[d5]), P()))
        return y
    jf = jx.jit(f, in_shardings=NamedSharding(mesh, P("x")))
    assert "device_ids=[5]" in jf.lower(X).as_text()
    assert np.allclose(np.asarray(jf(X)), np.cos(X)) and np.allclose(seen, [np.cos(X)])
    assert np.allclose(np.asarray(f(X)), np.cos(X))            # eager: runs on the host
    raises(NotImplementedError, lambda: jx.pure_callback(np.cos, jx.ShapeDtypeStruct((8,), np.float32), X,
                                                         sharding=NamedSharding(mesh, P("x"))),
           "SingleDeviceSharding")
    sub = jx.make_mesh((2,), ("x",), devices=jx.devices()[:2])
    outside = jx.jit(f, in_shardings=NamedSharding(sub, P("x")))
    raises(ValueError, lambda: outside(X), "device 5")
    in_body = jx.jit(jx.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    raises(NotImplementedError, lambda: in_body(X), "shard_map")


@check
def callback_error_is_raised_at_the_call():
    def bad(v):
        raise KeyError("boom")
    f = jx.jit(lambda x: jx.pure_callback(bad, jx.ShapeDtypeStruct(x.shape, x.dtype), x),
               in_shardings=NamedSharding(mesh, P("x")))
    try:
        jx.block_until_ready(f(X))
    except Exception as e:    # noqa: BLE001
        assert "boom" in str(e) and isinstance(e.__cause__, KeyError), repr(e)
    else:
        raise AssertionError("the callback's error was lost")


@check
def clear_errors():
    ordered = jx.jit(lambda x: (jx.debug.print("{}", x, ordered=True), x)[1],
                     in_shardings=NamedSharding(mesh, P("x")))
    raises(ValueError, lambda: ordered(X), "ordered effects")
    partial = jx.jit(jx.shard_map(lambda b: jx.pure_callback(np.sin, jx.ShapeDtypeStruct(b.shape, b.dtype), b),
                                  mesh=mesh2, in_specs=P("x"), out_specs=P("x"), axis_names={"x"}))
    raises(NotImplementedError, lambda: partial(X), "all mesh axes are manual")
    ordered_partial = jx.jit(jx.shard_map(lambda b: (jx.debug.print("{}", b, ordered=True), b)[1], mesh=mesh2,
                                          in_specs=P("x"), out_specs=P("x"), axis_names={"x"}))
    raises(ValueError, lambda: ordered_partial(X), "ordered effects")


@check
def partially_manual_shard_map_prints_once_per_block():
    for axis, size in (("x", 2), ("y", 4)):
        f = jx.jit(jx.shard_map(lambda b: (jx.debug.print("blk {}", b), b * 2)[1], mesh=mesh2, in_specs=P(axis),
                                out_specs=P(axis), axis_names={axis}))
        out, lines = printed(f, X)
        assert lines == sorted(f"blk {X[i:i + size]}" for i in range(0, 8, size)), lines
        assert np.array_equal(np.asarray(out), X * 2)


@check
def one_device_unchanged():
    out, lines = printed(jx.jit(lambda x: (jx.debug.print("{}", x, partitioned=True), x + 1)[1]), X)
    assert lines == [str(X)] and np.array_equal(np.asarray(out), X + 1)
    d3 = jx.sharding.SingleDeviceSharding(jx.devices()[3])     # one other device: a sharded plan
    f = jx.jit(lambda x: (jx.debug.print("{}", x), jx.pure_callback(np.sin, jx.ShapeDtypeStruct((8,), np.float32), x))[1],
               in_shardings=d3)
    out, lines = printed(f, X)
    assert lines == [str(X)] and np.allclose(np.asarray(out), np.sin(X)) and out.devices() == {jx.devices()[3]}


run()
