"""jaxprc.profiler against jax.profiler: the same errors, files and annotation events.

Both libraries drive the one process-wide jaxlib profiler, so their traces run one after the other."""
import gzip
import json

import jax
import jax.numpy as jnp
import jax.profiler
import pytest

import jaxprc
import jaxprc.numpy as xnp
from jaxprc import profiler as xprof

LIBS = {"jax": (jax, jnp, jax.profiler), "jaxprc": (jaxprc, xnp, xprof)}


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- the error itself is compared
        return type(e), str(e)
    return None


def test_same_public_names():
    def public(m):
        return {n for n in dir(m) if not n.startswith("_")}
    assert public(jax.profiler) <= public(xprof)


def _error_sequence(prof, log_dir):
    """The errors of: stop before a start, a second start, a second stop, stopping no server."""
    before = _raised(prof.stop_trace)
    prof.start_trace(log_dir)
    try:
        twice = _raised(lambda: prof.start_trace(log_dir / "again"))
    finally:
        prof.stop_trace()
    return before, twice, _raised(prof.stop_trace), _raised(prof.stop_server)


def test_trace_errors_match(tmp_path):
    got = {name: _error_sequence(prof, tmp_path / name) for name, (_, _, prof) in LIBS.items()}
    assert got["jax"] == got["jaxprc"]
    assert None not in got["jax"]


def _trace(tmp_path, name, **kwargs):
    lib, np_, prof = LIBS[name]
    f = lib.jit(lambda x: np_.cos(x) + 1)
    x = np_.ones(4)
    f(x).block_until_ready()
    annotated = prof.annotate_function(lambda x: f(x).block_until_ready(), name="annotated_fn")
    with prof.trace(tmp_path / name, **kwargs):
        with prof.StepTraceAnnotation("step", step_num=1), prof.TraceAnnotation("label_abc"):
            annotated(x)
    (run,) = (tmp_path / name / "plugins" / "profile").iterdir()
    return run


@pytest.mark.parametrize("perfetto", [False, True])
def test_trace_files_and_events_match(tmp_path, perfetto):
    runs = {name: _trace(tmp_path, name, create_perfetto_trace=perfetto) for name in LIBS}
    files = {name: sorted(p.name.split(".", 1)[1] if "." in p.name else p.name for p in run.iterdir())
             for name, run in runs.items()}
    assert files["jax"] == files["jaxprc"]
    for name, run in runs.items():
        with gzip.open(next(run.glob("*.trace.json.gz"))) as f:
            names = {e.get("name") for e in json.load(f)["traceEvents"]}
        assert {"step", "label_abc", "annotated_fn"} <= names, name
        if perfetto:
            with gzip.open(run / "perfetto_trace.json.gz") as f:
                assert "metadata" not in json.load(f)


def _has_pprof_sample_type(profile: bytes) -> bool:
    data = gzip.decompress(profile)
    return b"space" in data and b"bytes" in data


def test_device_memory_profile_matches(tmp_path):
    live = [np_.arange(100.0).block_until_ready() for _, np_, _ in LIBS.values()]
    for name, (_, _, prof) in LIBS.items():
        assert _has_pprof_sample_type(prof.device_memory_profile()), name
        prof.save_device_memory_profile(tmp_path / name)
        assert _has_pprof_sample_type((tmp_path / name).read_bytes()), name
    assert not any(x.is_deleted() for x in live)
    errors = {name: _raised(lambda: prof.device_memory_profile("tpu")) for name, (_, _, prof) in LIBS.items()}
    assert errors["jax"][0] is errors["jaxprc"][0] is RuntimeError
