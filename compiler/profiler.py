"""``jaxprc.profiler``: JAX's profiler API (``jax.profiler``) on jaxlib's profiler bindings.

A trace is a jaxlib ``ProfilerSession``: it collects the host's TraceMe events (the user's
``TraceAnnotation`` names) and XLA's own events, which name each executable by its module
(``jit_<function name>``), so jit dispatch needs no Python annotation of its own: the C++
fast path stays as it is. ``stop_trace`` exports what TensorBoard reads:
``LOG_DIR/plugins/profile/<timestamp>/<host>.xplane.pb`` and ``<host>.trace.json.gz``.
"""
from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import pathlib
import socketserver
import threading
from contextlib import contextmanager

from jaxlib import _profile_data, _profiler
from jaxlib import version as _jaxlib_version

from .toplevel import _backend
from .version import __version__

ProfileData = _profile_data.ProfileData
ProfileEvent = _profile_data.ProfileEvent
ProfilePlane = _profile_data.ProfilePlane


class ProfileOptions(_profiler.ProfileOptions):
    """Profiler Options to configure the collectors for the profiler."""


# ------------------------------------------------------------------ profiler server

_server: _profiler.ProfilerServer | None = None


def start_server(port: int, requires_backend: bool = True) -> _profiler.ProfilerServer:
    """Start the profiler server on ``port`` (TensorBoard's "capture profile" connects to it)."""
    global _server
    if _server is not None:
        raise ValueError("Only one profiler server can be active at a time.")
    if requires_backend:     # device tracers register when the client is made
        _backend(None)
    _server = _profiler.start_server(port)
    return _server


def stop_server() -> None:
    """Stop the running profiler server."""
    global _server
    if _server is None:
        raise ValueError("No active profiler server.")
    _server = None           # dropping the last reference shuts it down


def register_subprocess(pid: int, port: int):
    """Profile the subprocess whose profiler server listens on ``port`` along with this process;
    returns a function that unregisters it (RuntimeError if it cannot be registered)."""
    return _profiler.register_subprocess(pid, port)


# ------------------------------------------------------------------ traces

class _TraceState:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.session = None
        self.log_dir: str | None = None
        self.perfetto_trace = False
        self.perfetto_link = False


_state = _TraceState()


def _set_session_metadata() -> None:
    _profiler.clear_metadata()
    _profiler.set_metadata("jaxprc_version", __version__)
    _profiler.set_metadata("jaxlib_version", _jaxlib_version.__version__)
    b = _backend(None)
    _profiler.set_metadata(f"{b.platform}_version", b.client.platform_version)


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options: ProfileOptions | None = None) -> None:
    """Start a profiler trace, saved to ``log_dir`` by :func:`stop_trace`. One trace at a time:
    starting a second raises RuntimeError. ``create_perfetto_trace`` also writes
    ``perfetto_trace.json.gz``; ``create_perfetto_link`` does too, then serves it to
    https://ui.perfetto.dev and blocks until the UI has loaded it."""
    with _state.lock:
        if _state.session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be run at a time.")
        _set_session_metadata()     # also makes the client first: its device tracers must exist
        _state.session = _profiler.ProfilerSession(profiler_options or ProfileOptions())
        _state.log_dir = str(log_dir)
        _state.perfetto_trace = create_perfetto_trace or create_perfetto_link
        _state.perfetto_link = create_perfetto_link


def stop_trace() -> None:
    """Stop the running trace and save it to the ``log_dir`` given to :func:`start_trace`;
    RuntimeError if no trace is running. A failed export (``log_dir`` not a directory) raises
    jaxlib's error and still ends the trace (JAX's stays started: no trace could start again)."""
    with _state.lock:
        if _state.session is None:
            raise RuntimeError("No profile started")
        try:
            _state.session.stop_and_export(_state.log_dir)
            if _state.perfetto_trace:
                path = _write_perfetto_trace(_state.log_dir)
                if _state.perfetto_link:
                    _serve_to_perfetto(path)
        finally:
            _state.reset()
            _profiler.clear_metadata()


@contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options: ProfileOptions | None = None):
    """Context manager: a profiler trace of its body (:func:`start_trace` ... :func:`stop_trace`)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


def _write_perfetto_trace(log_dir: str) -> pathlib.Path:
    """``perfetto_trace.json.gz`` next to the newest export: its trace.json without the
    ``metadata`` field, which Perfetto's UI rejects."""
    runs = (pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir()
    newest = max(runs, key=os.path.getmtime)
    found = list(newest.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise ValueError(f"Invalid trace folder: {newest}")
    with gzip.open(found[0], "rb") as f:
        events = json.load(f)
    events.pop("metadata", None)
    out = newest / "perfetto_trace.json.gz"
    with gzip.open(out, "wb") as f:
        f.write(json.dumps(events).encode("utf-8"))
    return out


class _PerfettoHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the trace folder to ui.perfetto.dev (a cross-origin fetch) and records what it asked."""

    def end_headers(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def do_GET(self):
        self.server.last_path = self.path
        super().do_GET()

    def do_POST(self):
        self.send_error(404, "File not found")


def _serve_to_perfetto(path: pathlib.Path, port: int = 9001) -> None:
    """Perfetto's UI loads traces from 127.0.0.1:9001: serve ``path`` there until it has been fetched."""
    handler = functools.partial(_PerfettoHandler, directory=str(path.parent))
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), handler) as httpd:
        print(f"Open URL in browser: https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/{path.name}")
        while getattr(httpd, "last_path", None) != "/" + path.name:
            httpd.handle_request()


# ------------------------------------------------------------------ annotations

class TraceAnnotation(_profiler.TraceMe):
    """Context manager: a trace event named ``name`` spanning its body (keyword arguments become
    the event's metadata), recorded while a trace is running."""


class StepTraceAnnotation(TraceAnnotation):
    """A :class:`TraceAnnotation` marking one step (e.g. of training; pass ``step_num=``): the
    profiler analyses performance per step."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, _r=1, **kwargs)     # _r=1: the step-marker flag TensorBoard reads


def annotate_function(func, name: str | None = None, **decorator_kwargs):
    """Decorator: each call of ``func`` is a trace event named ``name`` (default: its
    qualified name); keyword arguments become the event's metadata."""
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


# ------------------------------------------------------------------ device memory

def device_memory_profile(backend: str | None = None) -> bytes:
    """The live device buffers and executables as a gzip'd ``pprof`` protocol buffer
    (``pprof`` reads it)."""
    return gzip.compress(_backend(backend).client.heap_profile())


def save_device_memory_profile(filename, backend: str | None = None) -> None:
    """Write :func:`device_memory_profile` to ``filename``."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)


__all__ = ["ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane", "StepTraceAnnotation",
           "TraceAnnotation", "annotate_function", "device_memory_profile", "register_subprocess",
           "save_device_memory_profile", "start_server", "start_trace", "stop_server", "stop_trace", "trace"]
