"""One process of a 2-process x 4-CPU-device system; started by test_distributed.py.

argv: process_id num_processes port. Every process runs the same SPMD programs over the
8-device global mesh and prints its results as 'RESULT name value' lines (the test compares
both processes' lines with numpy's numbers).
"""
import json
import os
import signal
import sys
import time

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.experimental import multihost_utils as mh
from jaxprc.sharding import NamedSharding, PartitionSpec as P

pid, nproc, port = (int(a) for a in sys.argv[1:4])
jx.distributed.initialize(f"127.0.0.1:{port}", nproc, pid, initialization_timeout=60,
                          heartbeat_timeout_seconds=20, shutdown_timeout_seconds=20)


def result(name, value):
    print(f"RESULT {name} {json.dumps(np.asarray(value).tolist())}", flush=True)


assert jx.distributed.is_initialized()
result("topology", [jx.process_index(), jx.process_count(), jx.device_count(), jx.local_device_count()])
assert [d.process_index for d in jx.local_devices()] == [pid] * 4
assert jx.local_devices(process_index=1 - pid) == [d for d in jx.devices() if d.process_index != pid]

mesh = jx.make_mesh((8,), ("x",))
rows = NamedSharding(mesh, P("x"))
X = np.arange(48, dtype=np.float32).reshape(16, 3)          # the global value; rows 8*pid.. are ours

# this process's 8 rows -> one global (16, 3) array, 2 rows per device
x = jx.make_array_from_process_local_data(rows, X[8 * pid:8 * pid + 8])
assert x.shape == (16, 3) and not x.is_fully_addressable and not rows.is_fully_addressable
assert len(x.addressable_shards) == 4 and len(x.global_shards) == 8
assert all(np.array_equal(np.asarray(s.data), X[s.index]) for s in x.addressable_shards)
assert np.array_equal(np.asarray(x.addressable_data(1)), X[8 * pid + 2:8 * pid + 4])
assert sum(s.data is None for s in x.global_shards) == 4
try:
    np.asarray(x)
    raise AssertionError("reading a global array spanning other processes' devices must fail")
except RuntimeError as e:
    assert "non-addressable" in str(e)
assert repr(x) == str(x) == "Array(shape=(16, 3), dtype=float32)"

# 2-d: processes split the rows (mesh axis x spans them), each holds both column blocks (y)
mesh2 = jx.make_mesh((4, 2), ("x", "y"))
assert mesh2.is_multi_process and mesh2.local_devices == jx.local_devices()
G = np.arange(64, dtype=np.int32).reshape(16, 4)
for local, shape in ((G[8 * pid:8 * pid + 8], None), (G, G.shape)):   # inferred; a whole dim read by index
    g = jx.make_array_from_process_local_data(NamedSharding(mesh2, P("x", "y")), local, shape)
    assert g.shape == (16, 4) and g.dtype == np.int32
    assert all(s.data.shape == (4, 2) and np.array_equal(np.asarray(s.data), G[s.index]) for s in g.addressable_shards)

# split only along y (inside each process): every process holds the whole value and can read it
cols = jx.device_put(G, NamedSharding(mesh2, P(None, "y")))
assert np.array_equal(np.asarray(cols), G) and repr(cols) == "Array(shape=(16, 4), dtype=int32)"
remote = jx.device_put(np.ones(3), [d for d in jx.devices() if d.process_index != pid][0])
assert repr(remote) == "Array(shape=(3,), dtype=float32)" and remote.addressable_shards == []

# jnp.sum of the globally sharded array under jit: a cross-process all-reduce
total = jx.jit(lambda a: jnp.sum(a, axis=0))(x)
result("jit_sum", total)

# psum inside shard_map over the 8-device mesh
psum = jx.jit(jx.shard_map(lambda b: jx.lax.psum(jnp.sum(b, axis=0), "x"), mesh=mesh,
                           in_specs=P("x"), out_specs=P()))
result("shard_map_psum", psum(x))

# the same global array built the other two ways
y = jx.make_array_from_callback(X.shape, rows, lambda index: X[index])
result("callback_sum", jx.jit(jnp.sum)(y))
pieces = [jx.device_put(X[i], d) for d, i in rows.addressable_devices_indices_map(X.shape).items()]
z = jx.make_array_from_single_device_arrays(X.shape, rows, pieces)
result("single_device_sum", jx.jit(lambda a: jnp.sum(a * a))(z))

# device_put of a host value onto the global mesh: each process uploads its own shards
w = jx.device_put(X, rows)
result("device_put_max", jx.jit(jnp.max)(w))

# eager ops on a global array run as SPMD programs too (nothing to gather here)
result("eager", jnp.sum(x * 2.0))
# resharding to replicated (an SPMD program moves the shards); then every process can read it
full = jx.device_put(x, NamedSharding(mesh, P()))
result("replicated", np.asarray(full)[::5, 0])
# grad of a loss over the global batch: the gradient is all-reduced across processes
W = np.full((3, 2), 0.01, np.float32)
result("grad", jx.jit(jx.grad(lambda w, a: jnp.sum(jnp.tanh(a @ w))))(W, x))
try:
    jx.jit(lambda a: a, in_shardings=NamedSharding(mesh, P(None, None)))(x)
    raise AssertionError("jit must refuse an argument spanning processes laid out otherwise")
except ValueError as e:
    assert "spanning several processes" in str(e)

# multihost_utils: host values exchanged between the processes
mh.sync_global_devices("before exchange")
assert not any(mh.reached_preemption_sync_point(step) for step in range(3))   # no preemption notice
result("broadcast", mh.broadcast_one_to_all({"a": np.array([pid + 1.0, 5.0])})["a"])
result("broadcast_bool", mh.broadcast_one_to_all(np.array([pid == 0, pid == 1])))
result("allgather", mh.process_allgather(np.array([pid, 10 * pid])))
result("allgather_tiled", mh.process_allgather(np.float32(pid), tiled=True))
assert np.array_equal(mh.process_allgather(x, tiled=True), X)
mh.assert_equal(np.arange(3))
try:
    mh.assert_equal(np.array([pid]), "differs")
    failed = None
except AssertionError as e:
    failed = str(e)
assert failed is not None and failed.startswith("differs"), failed

# host-local <-> global arrays: this process's rows become its devices' part of the global array
rows_here = X[8 * pid:8 * pid + 8]
g = mh.host_local_array_to_global_array(rows_here, mesh, P("x"))
assert g.shape == (16, 3) and g.sharding == rows and not g.is_fully_addressable
assert all(np.array_equal(np.asarray(s.data), X[s.index]) for s in g.addressable_shards)
result("local_to_global_sum", jx.jit(lambda a: jnp.sum(a, axis=0))(g))
assert mh.host_local_array_to_global_array(g, mesh, P("x")) is g           # already global
back = mh.global_array_to_host_local_array({"g": g, "r": full}, mesh, P("x"))
assert back["g"].is_fully_addressable and np.array_equal(np.asarray(back["g"]), rows_here)
assert np.array_equal(np.asarray(back["r"]), X[8 * pid:8 * pid + 8])     # re-laid out first
g2 = mh.host_local_array_to_global_array(G[8 * pid:8 * pid + 8], mesh2, P("x", "y"))   # 2-d, a (8, 4) block
assert g2.shape == (16, 4) and all(np.array_equal(np.asarray(s.data), G[s.index]) for s in g2.addressable_shards)
assert np.array_equal(np.asarray(mh.global_array_to_host_local_array(g2, mesh2, P("x", "y"))), G[8 * pid:8 * pid + 8])
same = mh.host_local_array_to_global_array(G, mesh2, P(None, "y"))      # split inside processes only
assert same.shape == (16, 4) and np.array_equal(np.asarray(same), G)
assert np.array_equal(jx.jit(lambda a: mh.host_local_array_to_global_array(a, mesh2, P(None, "y")))(G), G)
interleaved = jx.sharding.Mesh(np.array([jx.devices()[i] for i in (0, 4, 1, 5, 2, 6, 3, 7)], dtype=object), ("x",))
try:
    mh.host_local_array_to_global_array(rows_here, interleaved, P("x"))
    raise AssertionError("a process's devices not forming a block of the mesh must be an error")
except ValueError as e:
    assert "contiguous subcube" in str(e)
try:
    jx.jit(lambda a: mh.host_local_array_to_global_array(a, mesh, P("x")))(rows_here)
    raise AssertionError("jit must refuse a conversion that changes the shape")
except ValueError as e:
    assert "convert outside it" in str(e)

# a preemption notice (SIGTERM) to process 1: both processes agree on the step to save at
for step in range(3, 500):
    if pid == 1 and step == 5:
        os.kill(os.getpid(), signal.SIGTERM)
    mh.sync_global_devices(f"step {step}")
    if mh.reached_preemption_sync_point(step):
        result("preempted_at", step)
        break
    time.sleep(0.01)

jx.distributed.shutdown()
assert not jx.distributed.is_initialized()
assert "jax" not in sys.modules
print("DONE", flush=True)
