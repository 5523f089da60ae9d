"""The benchmark suite: its op counter, and a smoke run of the CLI on jaxprc alone (no jax here)."""
import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"   # not installed
sys.path.insert(0, str(BENCH.parent))
from bench import count_ops  # noqa: E402

MODULE = """module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<f32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.sine %arg0 : tensor<4xf32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %2 = call @helper(%1) : (tensor<f32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
  func.func private @helper(%x: tensor<f32>) -> tensor<f32> {
    %0 = "stablehlo.negate"(%x) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
"""


def test_count_ops_reads_pretty_generic_and_compact_forms():
    assert count_ops(MODULE) == {
        "stablehlo.constant": 1, "stablehlo.sine": 1, "stablehlo.reduce": 1, "stablehlo.add": 1,
        "stablehlo.return": 1, "func.call": 1, "func.return": 2, "stablehlo.negate": 1}


def test_cli_runs_a_benchmark_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--libs", "jaxprc", "--reps", "3",
         "--only", "dispatch: jit(a*b+1) device", "--only", "StableHLO size: vmap", "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| dispatch: jit(a*b+1) device arrays | µs/call | – |" in proc.stdout
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    dispatch = results["dispatch: jit(a*b+1) device arrays"]["jaxprc"]
    assert len(dispatch["samples"]) == 3 and 0 < dispatch["min"] <= dispatch["median"] <= dispatch["max"]
    size = results["StableHLO size: vmap(chain)"]["jaxprc"]
    assert size["by_op"]["stablehlo.tanh"] == 500 and size["by_op"]["stablehlo.cosine"] == 500


def test_fresh_process_rows_and_the_cache_speedup(tmp_path):
    """The persistent-cache rows: each sample a fresh process, and the no-cache / warm-cache ratio."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--libs", "jaxprc", "--reps", "1",
         "--only", "first call, fresh process", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Persistent compilation cache, a fresh process's first call" in proc.stdout
    report = json.loads(out.read_text())
    assert not report["notes"], report["notes"]
    assert report["cache_speedups"]["jaxprc"] > 1


def test_canonicalize_effect_measures_both_settings():
    import canonicalize_effect
    import jaxprc
    import numpy as np
    lib = canonicalize_effect.bench.load_lib("jaxprc")
    f = lambda x: (x * 1.0).T.T.reshape(-1).reshape(2, 3)      # noqa: E731
    x = np.ones((2, 3), np.float32)
    try:
        off, on = (canonicalize_effect.measure(lib, f, (x,), flag) for flag in (False, True))
    finally:
        jaxprc.config.update("jaxprc_canonicalize", False)
    assert canonicalize_effect.op_count(off[0]) > canonicalize_effect.op_count(on[0]) == 1   # main's return
    assert all(t > 0 for t in (*off[1:], *on[1:]))
