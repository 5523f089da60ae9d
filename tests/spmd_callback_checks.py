"""Host callbacks in programs over 8 CPU devices (sharded jit, shard_map, pmap); run by
test_spmd_callbacks.py in a process of its own (the device count is fixed when the client starts)."""
import contextlib
import io
import sys
import traceback

import numpy as np

import jaxprc as jx
from jaxprc.sharding import NamedSharding, PartitionSpec as P

mesh = jx.make_mesh((8,), ("x",))
mesh2 = jx.make_mesh((4, 2), ("x", "y"))
X = np.arange(8, dtype=np.float32)
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


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
    try:
        ordered(X)
    except ValueError as e:
        assert "ordered effects" in str(e), e
    else:
        raise AssertionError("ordered effects over 8 devices accepted")
    partial = jx.jit(jx.shard_map(lambda b: (jx.debug.print("{}", b), b)[1], mesh=mesh2, in_specs=P("x"),
                                  out_specs=P("x"), axis_names={"x"}))
    try:
        partial(X)
    except NotImplementedError as e:
        assert "all mesh axes are manual" in str(e), e
    else:
        raise AssertionError("a callback in a partially manual shard_map accepted")


@check
def one_device_unchanged():
    out, lines = printed(jx.jit(lambda x: (jx.debug.print("{}", x, partitioned=True), x + 1)[1]), X)
    assert lines == [str(X)] and np.array_equal(np.asarray(out), X + 1)



failed = 0
for c in CHECKS:
    try:
        c()
        print("ok", c.__name__)
    except Exception:   # noqa: BLE001
        failed += 1
        print("FAIL", c.__name__)
        traceback.print_exc()
sys.exit(1 if failed else 0)
