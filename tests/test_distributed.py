"""jaxprc.distributed: two local processes of 4 CPU devices each joined into one 8-device
system (tests/distributed_worker.py), and initialize's errors. Each process is a fresh
interpreter (the backend client is made once per process), run under a timeout so that a
hang fails the test instead of blocking the suite."""
import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp

HERE = pathlib.Path(__file__).parent
TIMEOUT = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int) -> dict:
    return dict(os.environ, JAXPRC_NUM_CPU_DEVICES=str(devices), JAXPRC_PLATFORM="cpu")


def _results(text: str) -> dict:
    return {line.split(" ", 2)[1]: json.loads(line.split(" ", 2)[2])
            for line in text.splitlines() if line.startswith("RESULT ")}


def test_two_processes_of_four_devices_compute_one_spmd_program():
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(HERE / "distributed_worker.py"), str(pid), "2", str(port)],
                              env=_env(4), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for pid in range(2)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=TIMEOUT)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    X = np.arange(48, dtype=np.float32).reshape(16, 3)
    for pid, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and "DONE" in out, f"process {pid} (rc {p.returncode}):\n{out}"
        r = _results(out)
        assert r["topology"] == [pid, 2, 8, 4]
        np.testing.assert_allclose(r["jit_sum"], X.sum(0))
        np.testing.assert_allclose(r["shard_map_psum"], X.sum(0))
        assert r["callback_sum"] == X.sum()
        assert r["single_device_sum"] == (X * X).sum()
        assert r["device_put_max"] == X.max()
        assert r["eager"] == 2 * X.sum()
        assert r["replicated"] == X[::5, 0].tolist()
        assert r["broadcast"] == [1.0, 5.0]
        assert r["broadcast_bool"] == [True, False]
        assert r["allgather"] == [[0, 0], [1, 10]] and r["allgather_tiled"] == [0.0, 1.0]
        np.testing.assert_allclose(r["grad"], X.T @ (1 - np.tanh(X @ np.full((3, 2), 0.01)) ** 2), rtol=1e-5)
        np.testing.assert_allclose(r["local_to_global_sum"], X.sum(0))
    steps = [_results(out).get("preempted_at") for out in outs]
    assert steps[0] is not None and steps[0] == steps[1] > 5, steps


ERRORS = r"""
import jaxprc as jx, jaxprc.numpy as jnp
from jaxprc import distributed as d

def raises(exc, text, fn, *a, **k):
    try:
        fn(*a, **k)
    except exc as e:
        assert text in str(e), (text, str(e))
    else:
        raise AssertionError(f"no {exc.__name__} ({text})")

raises(ValueError, "coordinator_address should be defined", d.initialize, num_processes=1, process_id=0)
raises(ValueError, "Number of processes must be defined", d.initialize, "127.0.0.1:1")
raises(ValueError, "process id of the current process", d.initialize, "127.0.0.1:1", 1)
raises(ValueError, "process_id < num_processes", d.initialize, "127.0.0.1:1", 2, 2)
raises(TypeError, "num_processes must be a positive int", d.initialize, "127.0.0.1:1", 2.0, 0)
raises(ValueError, "not supported", d.initialize, "127.0.0.1:1", 1, 0, cluster_detection_method="slurm")
raises(ValueError, "must be 'host:port'", d.initialize, "localhost", 1, 0)
# nobody serves there (process 0 never started): a clear error, not jaxlib's abort of the process
raises(RuntimeError, "no coordination service answers", d.initialize, "127.0.0.1:DEAD", 2, 1, initialization_timeout=1)
import socket
taken = socket.socket(); taken.bind(("0.0.0.0", 0)); taken.listen()
raises(RuntimeError, "could not start the coordination service", d.initialize,
       f"127.0.0.1:{taken.getsockname()[1]}", 1, 0, initialization_timeout=2)
taken.close()
assert not d.is_initialized()
d.initialize("127.0.0.1:PORT", 1, 0, initialization_timeout=30)
assert d.is_initialized()
raises(RuntimeError, "should only be called once", d.initialize, "127.0.0.1:PORT", 1, 0)
assert jx.process_count() == 1 and jx.device_count() == 2 and float(jnp.sum(jnp.ones(3))) == 3.0
d.shutdown()
d.shutdown()                      # nothing left to stop: no error, as in JAX
assert not d.is_initialized()
raises(RuntimeError, "must be called before", d.initialize, "127.0.0.1:PORT", 1, 0)
print("ERRORS OK")
"""


def test_initialize_errors_twice_and_after_the_backend_started():
    script = ERRORS.replace("PORT", str(_free_port())).replace("DEAD", str(_free_port()))
    proc = subprocess.run([sys.executable, "-c", script], env=_env(2), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0 and "ERRORS OK" in proc.stdout, proc.stdout + proc.stderr


def test_initialize_after_computation_in_this_process_is_an_error():
    jnp.ones(2).block_until_ready()              # the backend exists now
    with pytest.raises(RuntimeError, match="must be called before any jaxprc calls"):
        jx.distributed.initialize("127.0.0.1:1", 2, 0)
    assert not jx.distributed.is_initialized()


def test_single_process_queries_and_process_local_data():
    assert jx.process_index() == 0 and jx.process_count() == 1 and jx.process_indices() == [0]
    assert jx.local_devices() == jx.devices() == jx.local_devices(process_index=0)
    with pytest.raises(ValueError, match="process_index 1"):
        jx.local_devices(process_index=1)
    s = jx.sharding.SingleDeviceSharding(jx.devices()[0])
    x = jx.make_array_from_process_local_data(s, np.arange(6.0).reshape(2, 3))
    assert x.dtype == np.float32 and np.array_equal(x, np.arange(6.0).reshape(2, 3))
    tree = jx.make_array_from_process_local_data(s, {"a": np.ones(2), "b": np.zeros((1, 2), np.int32)},
                                                 {"a": (2,), "b": None})
    assert tree["a"].shape == (2,) and tree["b"].dtype == np.int32
    with pytest.raises(ValueError, match="global_shape should be None or equal"):
        jx.make_array_from_process_local_data(s, np.ones(4), (8,))
    assert x.is_fully_addressable and x.sharding.is_fully_addressable
    calls = []
    y = jx.make_array_from_callback((2,), s, lambda index: calls.append(index) or np.ones(2))
    assert calls == [(slice(None),)] and y.tolist() == [1.0, 1.0]      # replicated: one call (JAX)


def test_multihost_utils_in_one_process():
    from jaxprc.experimental import multihost_utils as mh
    out = mh.broadcast_one_to_all({"a": jnp.arange(3), "b": 2.0})
    assert isinstance(out["a"], np.ndarray) and out["a"].tolist() == [0, 1, 2] and out["b"] == 2.0
    assert mh.process_allgather(np.arange(3)).shape == (1, 3)
    assert mh.process_allgather(np.arange(3), tiled=True).shape == (3,)
    assert mh.process_allgather(np.float32(1), tiled=True).shape == ()
    mh.assert_equal({"x": np.ones(2)})
    mh.sync_global_devices("one process")
    assert mh.reached_preemption_sync_point(0) is False      # not joined: never


def _twice_plus_one(x):
    return 2 * x + 1


def test_jit_with_shardings_compiles_once_per_function_and_shardings(caplog):
    """multihost_utils and device_put make a jit with out_shardings per call: they compile once."""
    s = jx.sharding.NamedSharding(jx.make_mesh((1,), ("x",)), jx.P())
    with jx.log_compiles():
        for _ in range(3):
            assert jx.jit(_twice_plus_one, out_shardings=s)(np.ones(2)).tolist() == [3.0, 3.0]
        jx.jit(_twice_plus_one, in_shardings=[s])(np.ones(2))        # unhashable: its own cache
        under_mesh = jx.jit(_twice_plus_one, out_shardings=jx.P())   # a spec means the mesh set when called
        for name in ("y", "z", "y"):
            with jx.set_mesh(jx.make_mesh((1,), (name,))):
                assert under_mesh(np.ones(2)).sharding.mesh.axis_names == (name,)
    assert sum("Compiling jit(_twice_plus_one)" in r.message for r in caplog.records) == 4


def test_host_local_global_conversions_in_one_process():
    """One process: the local array is the global one, laid out over the mesh; a global array
    comes back as itself; jit, grad (each the other's transpose) and vmap (the batch dimension
    unsplit) go through."""
    from jaxprc.experimental import multihost_utils as mh
    mesh, x = jx.make_mesh((1,), ("x",)), np.arange(6.0, dtype=np.float32).reshape(3, 2)
    g = mh.host_local_array_to_global_array(x, mesh, jx.P("x"))
    assert g.sharding == jx.sharding.NamedSharding(mesh, jx.P("x")) and np.array_equal(g, x)
    assert mh.global_array_to_host_local_array(g, mesh, jx.P("x")) is g
    to_global = lambda a: mh.host_local_array_to_global_array(a, mesh, jx.P("x"))   # noqa: E731
    to_local = lambda a: mh.global_array_to_host_local_array(a, mesh, jx.P("x"))    # noqa: E731
    np.testing.assert_array_equal(jx.jit(lambda a: to_local(to_global(a) * 2))(x), 2 * x)
    np.testing.assert_array_equal(jx.grad(lambda a: jnp.sum(to_global(a) ** 2))(x), 2 * x)
    cj = jx.make_jaxpr(jx.linear_transpose(to_global, x))(x)
    assert [e.primitive.name for e in cj.jaxpr.eqns] == ["global_array_to_host_local_array"]
    cj = jx.make_jaxpr(jx.vmap(to_local, in_axes=1))(x)
    assert cj.jaxpr.eqns[0].params["pspec"] == (("x",), ())
    with pytest.raises(ValueError, match="not a valid input to the pspecs"):
        mh.host_local_array_to_global_array({"a": x}, mesh, {"a": None})
