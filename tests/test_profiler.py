"""jaxprc.profiler: traces written by jaxlib's profiler hold the user's annotations, the jit
dispatch events and the XLA executable's events; the device memory profile is a gzip'd
pprof protocol buffer."""
import gzip
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import profiler


@jaxprc.jit
def scaled_sine(x):
    return jnp.sin(x) * 2


@profiler.annotate_function
def annotated_helper(x):
    return scaled_sine(x).block_until_ready()


def _events(log_dir):
    """(plane, line, event name, stats) of the one xplane.pb written under ``log_dir``."""
    (pb,) = pathlib.Path(log_dir).glob("plugins/profile/*/*.xplane.pb")
    data = profiler.ProfileData.from_file(str(pb))
    return [(p.name, line.name, e.name, dict(e.stats)) for p in data.planes for line in p.lines
            for e in line.events]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One trace of an already-compiled jitted function under nested annotations."""
    log_dir = tmp_path_factory.mktemp("trace")
    x = jnp.ones(3)
    scaled_sine(x).block_until_ready()
    with profiler.trace(log_dir, create_perfetto_trace=True):
        with profiler.StepTraceAnnotation("train_step", step_num=7):
            with profiler.TraceAnnotation("user_label_xyz", tag="t"):
                annotated_helper(x)
    return log_dir


def test_trace_writes_tensorboard_files(traced):
    (run,) = (pathlib.Path(traced) / "plugins" / "profile").iterdir()
    suffixes = sorted(p.name.split(".", 1)[1] if "." in p.name else p.name for p in run.iterdir())
    assert suffixes == ["json.gz", "trace.json.gz", "xplane.pb"]     # perfetto_trace.json.gz too
    with gzip.open(run / "perfetto_trace.json.gz") as f:
        perfetto = json.load(f)
    assert "metadata" not in perfetto and perfetto["traceEvents"]
    with gzip.open(next(run.glob("*.trace.json.gz"))) as f:
        assert "user_label_xyz" in {e.get("name") for e in json.load(f)["traceEvents"]}


def test_trace_holds_annotations_dispatch_and_executable(traced):
    events = _events(traced)
    names = {name for _, _, name, _ in events}
    assert {"user_label_xyz", "train_step", "annotated_helper", "PjitFunction(scaled_sine)"} <= names
    assert any(stats.get("hlo_module") == "jit_scaled_sine" for *_, stats in events)  # XLA's events
    (step,) = [stats for _, _, name, stats in events if name == "train_step"]
    assert step.get("step_num") == 7
    assert "jax" not in sys.modules


def test_trace_errors_and_recovery(tmp_path):
    with pytest.raises(RuntimeError, match="(?m)^No profile started$"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path)
    with pytest.raises(RuntimeError, match="Profile has already been started. Only one profile may be run"):
        profiler.start_trace(tmp_path / "other")
    with pytest.raises(RuntimeError, match="Profile has already been started"):
        with profiler.trace(tmp_path / "other"):
            pass
    profiler.stop_trace()
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
    assert not (tmp_path / "other").exists()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_start_stop_errors():
    with pytest.raises(ValueError, match="No active profiler server."):
        profiler.stop_server()
    server = profiler.start_server(_free_port())
    try:
        assert type(server).__name__ == "ProfilerServer"
        with pytest.raises(ValueError, match="Only one profiler server can be active at a time."):
            profiler.start_server(_free_port())
    finally:
        profiler.stop_server()
    with pytest.raises(ValueError, match="No active profiler server."):
        profiler.stop_server()


def _protobuf_fields(data: bytes) -> list:
    """(field number, value) of a protobuf message, failing unless it parses to its end."""
    fields, i = [], 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((field, varint()))
        elif wire == 2:
            n = varint()
            fields.append((field, data[i:i + n]))
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise AssertionError(f"wire type {wire} at byte {i}")
    assert i == len(data)
    return fields


def test_device_memory_profile_is_gzipped_pprof(tmp_path):
    live = jnp.arange(1000.0).block_until_ready()         # a live buffer to profile
    fields = _protobuf_fields(gzip.decompress(profiler.device_memory_profile()))
    strings = [v for f, v in fields if f == 6]                       # pprof Profile.string_table
    assert strings[0] == b"" and b"space" in strings                  # sample type ("space", "bytes")
    assert any(f == 2 for f, _ in fields) and not live.is_deleted()  # samples: the live buffers
    profiler.save_device_memory_profile(tmp_path / "mem.prof", backend=jaxprc.default_backend())
    _protobuf_fields(gzip.decompress((tmp_path / "mem.prof").read_bytes()))
    with pytest.raises(RuntimeError, match="tpu"):
        profiler.device_memory_profile("tpu")


def test_python_dispatched_jit_is_named_as_cpp_names_it(tmp_path):
    jaxprc.config.update("jaxprc_cpp_dispatch", False)
    try:
        python_path = jaxprc.jit(lambda x: x + 1)
    finally:
        jaxprc.config.update("jaxprc_cpp_dispatch", True)
    assert type(python_path).__name__ == "JitFunction"       # not jaxlib's PjitFunction
    x = jnp.ones(2)
    python_path(x)
    with profiler.trace(tmp_path):
        python_path(x)
    assert "PjitFunction(<lambda>)" in {name for _, _, name, _ in _events(tmp_path)}


def test_profile_options_reach_the_session(tmp_path):
    options = profiler.ProfileOptions()
    options.python_tracer_level = 0          # no Python function events
    with profiler.trace(tmp_path, profiler_options=options):
        with profiler.TraceAnnotation("kept_label"):
            scaled_sine(jnp.ones(3)).block_until_ready()
    names = {name for _, _, name, _ in _events(tmp_path)}
    assert "kept_label" in names and not any(n.startswith("$") for n in names)


def test_failed_export_raises_and_ends_the_trace(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    profiler.start_trace(not_a_dir)
    with pytest.raises(jaxprc.errors.JaxRuntimeError, match="is not a directory"):
        profiler.stop_trace()
    # JAX keeps the failed session, so no trace can start again; jaxprc ends it
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    with profiler.trace(tmp_path / "next"):
        pass


def test_register_subprocess_returns_its_unregister_function():
    port = _free_port()
    child = subprocess.Popen([sys.executable, "-c", "import sys, jaxprc.profiler as p; "
                              f"p.start_server({port}, requires_backend=False); sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:                           # until the child's server listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the child's profiler server did not start"
                time.sleep(0.1)
        unregister = profiler.register_subprocess(child.pid, port)
        unregister()
    finally:
        child.kill()
        child.wait()


def _port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_perfetto_link_serves_the_trace_until_fetched(tmp_path, capsys):
    if not _port_free(9001):
        pytest.skip("port 9001 (where ui.perfetto.dev looks) is in use")
    fetched = []

    def perfetto_ui():               # what ui.perfetto.dev does with the printed link
        for _ in range(300):
            try:
                with urllib.request.urlopen("http://127.0.0.1:9001/perfetto_trace.json.gz", timeout=5) as r:
                    fetched.append((r.headers["Access-Control-Allow-Origin"], r.read()))
                    return
            except OSError:
                time.sleep(0.1)
    ui = threading.Thread(target=perfetto_ui)
    ui.start()
    with profiler.trace(tmp_path, create_perfetto_link=True):
        scaled_sine(jnp.ones(3)).block_until_ready()
    ui.join()
    (cors, body), = fetched
    assert cors == "*" and "traceEvents" in json.loads(gzip.decompress(body))
    assert "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/perfetto_trace.json.gz" in capsys.readouterr().out
