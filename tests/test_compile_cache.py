"""The persistent compilation cache (runtime/compile_cache.py): a second process loads what the
first compiled; damaged, stale or unwritable entries cost a warning and a compilation, never a crash."""
import hashlib
import json
import os
import subprocess
import sys
import threading
import warnings

import jaxlib
import numpy as np
import pytest

import jaxprc
from jaxprc import runtime
from jaxprc.runtime import compile_cache

# A fresh process: jit(grad) of a small MLP, then what happened (compile-cache counters) and the numbers.
WORKLOAD = """
import json, sys
import numpy as np
import jaxprc, jaxprc.numpy as jnp
from jaxprc.runtime import compile_cache

def loss(params, x):
    h = x
    for w in params:
        h = jnp.tanh(h @ w)
    return jnp.sum(h * h)

rng = np.random.default_rng(0)
params = [rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)]
x = rng.normal(size=(4, 6)).astype(np.float32)
grads = jaxprc.jit(jaxprc.grad(loss))(params, x)
print(json.dumps({"dir": jaxprc.config.jaxprc_compilation_cache_dir, "stats": dict(compile_cache.stats),
                  "grads": [np.asarray(g).tolist() for g in grads], "jax": "jax" in sys.modules}))
"""


def _env(cache_dir):
    env = {k: v for k, v in os.environ.items() if k != "JAXPRC_COMPILATION_CACHE_DIR"}
    if cache_dir is not None:
        env["JAXPRC_COMPILATION_CACHE_DIR"] = str(cache_dir)
    return env


def _start(cache_dir):
    return subprocess.Popen([sys.executable, "-c", WORKLOAD], env=_env(cache_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert not result["jax"]
    return result, err


def _entries(cache_dir):
    return sorted(p for p in os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    cold, _ = _result(_start(cache))
    assert cold["dir"] == str(cache)
    assert cold["stats"].get("compiles") == 1 and cold["stats"].get("writes") == 1
    assert len(_entries(cache)) == 1
    warm, err = _result(_start(cache))
    assert warm["stats"].get("compiles", 0) == 0, "XLA compiled in the warm process"
    assert warm["stats"].get("hits") == 1 and "compilation cache" not in err
    assert warm["grads"] == cold["grads"]


def test_off_by_default(tmp_path):
    result, _ = _result(_start(None))
    assert result["dir"] is None
    assert result["stats"] == {"compiles": 1}


def test_concurrent_writers(tmp_path):
    cache = tmp_path / "cache"
    procs = [_start(cache) for _ in range(2)]
    results = [_result(p)[0] for p in procs]
    assert results[0]["grads"] == results[1]["grads"]
    assert len(_entries(cache)) == 1              # one entry, no temporary file left behind
    warm, err = _result(_start(cache))
    assert warm["stats"].get("hits") == 1 and warm["stats"].get("compiles", 0) == 0, err


# ------------------------------------------------------------ in this process

PROGRAM = """func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.sine %a : tensor<3xf32>
  %1 = stablehlo.multiply %0, %a : tensor<3xf32>
  return %1 : tensor<3xf32>
}"""
X = np.array([0.5, -1.0, 2.0], np.float32)
EXPECTED = np.sin(X) * X


def _compile(cache_dir, program=PROGRAM):
    """Compile and run ``program``; the counters' change."""
    before = compile_cache.stats.copy()
    out = runtime.compile(program, cache_dir=cache_dir)(X)[0]
    np.testing.assert_allclose(np.asarray(out), EXPECTED, rtol=1e-6)
    return {k: v - before[k] for k, v in compile_cache.stats.items() if v != before[k]}


def _entry(cache_dir):
    (name,) = _entries(cache_dir)
    return os.path.join(cache_dir, name)


def test_hit_in_process(tmp_path):
    assert _compile(tmp_path) == {"compiles": 1, "writes": 1}
    assert _compile(tmp_path) == {"hits": 1}


def test_key_changes_with_program_and_options():
    from jaxlib import xla_client as xc
    b = runtime.backend()
    options = xc.CompileOptions().SerializeAsString()
    other_options = xc.CompileOptions()
    other_options.num_replicas = 2
    keys = {compile_cache.key(PROGRAM.encode(), options, b),
            compile_cache.key(PROGRAM.replace("sine", "cosine").encode(), options, b),
            compile_cache.key(PROGRAM.encode(), other_options.SerializeAsString(), b)}
    assert len(keys) == 3
    assert compile_cache.key(PROGRAM.encode(), options, b) in keys       # deterministic


def _damage(path, how):
    data = open(path, "rb").read()
    if how == "flip":
        i = len(data) - 100
        data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
    elif how == "truncate":
        data = data[:len(data) // 2]
    elif how == "garbage":
        data = b"\x00" * 64
    elif how == "stale":
        header_end = data.index(b"\n", data.index(b"\n") + 1)
        header = json.loads(data[data.index(b"\n") + 1:header_end])
        header["jaxlib"] = "0.0.1"
        data = data[:data.index(b"\n") + 1] + json.dumps(header).encode() + data[header_end:]
    elif how == "bad header":
        data = data.replace(b'"size"', b'"sise"', 1)
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("how, message", [
    ("flip", "checksum does not match"), ("truncate", "truncated"), ("garbage", "not a jaxprc cache entry"),
    ("stale", "another version"), ("bad header", "header is unreadable")])
def test_damaged_or_stale_entry_is_ignored_with_a_warning(tmp_path, how, message):
    _compile(tmp_path)
    _damage(_entry(tmp_path), how)
    with pytest.warns(RuntimeWarning, match=message):
        assert _compile(tmp_path) == {"rejected": 1, "compiles": 1, "writes": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile(tmp_path) == {"hits": 1}          # rewritten whole


def test_payload_jaxlib_rejects_is_a_warning(tmp_path):
    """An entry whose checksum holds but whose payload jaxlib refuses (say, written by another build)."""
    _compile(tmp_path)
    path = _entry(tmp_path)
    data = open(path, "rb").read()
    magic_end = data.index(b"\n") + 1
    header_end = data.index(b"\n", magic_end)
    payload = b"not an executable"
    header = {"format": 1, "jaxlib": jaxlib.__version__, "size": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest()}
    with open(path, "wb") as f:
        f.write(data[:magic_end] + json.dumps(header).encode() + data[header_end:header_end + 1] + payload)
    with pytest.warns(RuntimeWarning, match="jaxlib could not load"):
        assert _compile(tmp_path) == {"rejected": 1, "compiles": 1, "writes": 1}


def test_unwritable_directory_warns_and_computes(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="could not write"):
        assert _compile(blocker / "cache") == {"compiles": 1}


def test_threads_writing_at_once(tmp_path):
    errors = []

    def work():
        try:
            _compile(tmp_path)
        except Exception as e:   # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(_entries(tmp_path)) == 1
    assert _compile(tmp_path) == {"hits": 1}


@pytest.fixture
def cache_config(tmp_path):
    jaxprc.config.update("jaxprc_compilation_cache_dir", str(tmp_path))
    yield tmp_path
    jaxprc.config.update("jaxprc_compilation_cache_dir", None)


def test_config_turns_it_on_for_jit(cache_config):
    def make():      # a new function each time: jit shares compilations of one function
        return lambda x: jaxprc.numpy.cos(x) * 3.0
    y = jaxprc.jit(make())(X)
    assert len(_entries(cache_config)) == 1
    before = compile_cache.stats.copy()
    np.testing.assert_array_equal(np.asarray(jaxprc.jit(make())(X)), np.asarray(y))
    assert compile_cache.stats["hits"] == before["hits"] + 1
    assert compile_cache.stats["compiles"] == before["compiles"]


def test_programs_calling_python_are_not_cached(cache_config):
    def f(x):
        jaxprc.debug.callback(lambda v: None, x)
        return x + 1.0
    np.testing.assert_array_equal(np.asarray(jaxprc.jit(f)(X)), X + 1)
    assert _entries(cache_config) == []


def test_a_path_object_and_a_bad_value(tmp_path):
    assert _compile(tmp_path / "cache") == {"compiles": 1, "writes": 1}       # a pathlib.Path
    with pytest.raises(TypeError, match="jaxprc_compilation_cache_dir must be a directory path"):
        runtime.compile(PROGRAM, cache_dir=5)



def test_locations_are_not_in_the_key(cache_config):
    """As in JAX: the same program traced from another line (other locations) hits the same entry."""
    f1 = lambda x: jaxprc.numpy.sin(x) + 2.0    # noqa: E731
    f2 = lambda x: jaxprc.numpy.sin(x) + 2.0    # noqa: E731
    texts = [jaxprc.jit(f).lower(X).as_text(debug_info=True) for f in (f1, f2)]
    assert texts[0] != texts[1] and "test_compile_cache.py" in texts[0]
    y = jaxprc.jit(f1)(X)
    before = compile_cache.stats.copy()
    np.testing.assert_array_equal(np.asarray(jaxprc.jit(f2)(X)), np.asarray(y))
    assert compile_cache.stats["hits"] == before["hits"] + 1
    assert compile_cache.stats["compiles"] == before["compiles"]
