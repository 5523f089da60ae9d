"""What debug.print prints in programs over 8 CPU devices, jax vs jaxprc (run by
test_spmd_callback_oracle.py in a process of its own, so both clients start with 8 devices).
Devices run in any order, so the printed lines are compared sorted."""
import contextlib
import io
import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402

X = np.arange(16, dtype=np.float32).reshape(8, 2) / 4
I = np.arange(8, dtype=np.int32)


def cases(lib):
    """Each case: a function of the library (jax or jaxprc) whose result and printed lines compare."""
    P, NS = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
    auto = lib.sharding.AxisType.Auto        # (jax's make_mesh makes Explicit axes by default)
    mesh = lib.make_mesh((8,), ("x",), axis_types=(auto,))
    mesh2 = lib.make_mesh((4, 2), ("x", "y"), axis_types=(auto, auto))
    dbg = lib.debug

    def pure(x):
        y = lib.pure_callback(lambda v: np.cos(v), lib.ShapeDtypeStruct(x.shape, x.dtype), x)
        dbg.print("sum {s:.3f} first {f}", s=y.sum(), f=y[0])
        return y + 1
    return {
        "jit_once": lambda: lib.jit(lambda x: (dbg.print("x = {}", x), x * 2)[1],
                                    in_shardings=NS(mesh, P("x")))(X),
        "jit_2d_mesh": lambda: lib.jit(lambda x, i: (dbg.print("x={x} i={i}", x=x, i=i), x.sum() + i)[1],
                                       in_shardings=(NS(mesh2, P("x", "y")), NS(mesh2, P(("x", "y")))))(X, I),
        "jit_pure": lambda: lib.jit(pure, in_shardings=NS(mesh, P("x")))(X),
        "shard_map": lambda: lib.jit(lib.shard_map(lambda b: (dbg.print("block {}", b), b * 3)[1], mesh=mesh2,
                                                   in_specs=P("x"), out_specs=P("x")))(X),
        "shard_map_partial_x": lambda: lib.jit(lib.shard_map(
            lambda b: (dbg.print("part {}", b), b * 3)[1], mesh=mesh2, in_specs=P("x"), out_specs=P("x"),
            axis_names={"x"}))(X),
        "shard_map_partial_y": lambda: lib.jit(lib.shard_map(
            lambda b: (dbg.print("part {}", b), b * 3)[1], mesh=mesh2, in_specs=P(None, "y"), out_specs=P(None, "y"),
            axis_names={"y"}))(X),
        "shard_map_pure": lambda: lib.jit(lib.shard_map(
            lambda b: lib.pure_callback(lambda v: v - 1, lib.ShapeDtypeStruct(b.shape, b.dtype), b),
            mesh=mesh, in_specs=P("x"), out_specs=P("x")))(X),
        "pmap": lambda: lib.pmap(lambda v, i: (dbg.print("v={} i={}", v, i), v * i)[1])(X, I),
        "pure_on_device_5": lambda: lib.jit(lambda x: lib.pure_callback(
            np.cos, lib.ShapeDtypeStruct(x.shape, x.dtype), x,
            sharding=lib.sharding.SingleDeviceSharding(lib.devices()[5])) * 2, in_shardings=NS(mesh, P("x")))(X),
        "partitioned": lambda: lib.jit(lambda x: (dbg.print("part {}", x, partitioned=True), x)[1],
                                       in_shardings=NS(mesh, P("x")))(I),
    }


def run(lib, fn):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = fn()
        lib.block_until_ready(out)
        lib.effects_barrier()
    return out, sorted(buf.getvalue().splitlines())


failed = 0
jax_cases, jx_cases = cases(jax), cases(jx)
for name in jax_cases:
    try:
        (want, want_lines), (got, got_lines) = run(jax, jax_cases[name]), run(jx, jx_cases[name])
        assert got_lines == want_lines and (want_lines or "pure" in name and "jit" not in name), (got_lines, want_lines)
        assert want.shape == got.shape and want.dtype == got.dtype, (want, got)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        print("ok", name)
    except Exception as e:   # noqa: BLE001
        failed += 1
        print("FAIL", name, repr(e))
sys.exit(1 if failed else 0)
