"""Resident memory stays flat over many calls (measured in a fresh process, so other tests'
allocations do not blur it).

Each workload is warmed up, then run twice more; the growth over the runs after warm-up must stay
far below what a leak of even a few dozen bytes per call would add. (jaxlib's per-execution
traceback records leaked ~70 bytes a call: 60,000 cached calls grew by ~4 MB.)
"""
import json
import subprocess
import sys
import textwrap

import pytest

MEASURE = textwrap.dedent("""
    import gc, json
    import numpy as np
    import jaxprc, jaxprc.numpy as jnp

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    x_dev, x_np = jnp.ones(3), np.ones(3, np.float32)
    cached = jaxprc.jit(lambda x: x + 1)
    workloads = {
        "cached_device_array": (lambda i: cached(x_dev), 30000),
        "cached_numpy": (lambda i: cached(x_np), 30000),
        "eager": (lambda i: jnp.sin(x_dev) + 1.0, 3000),
        "fresh_compilations": (lambda i: jaxprc.jit(lambda x: x * i + 1.0)(x_dev), 40),
    }
    growth = {}
    for name, (run, n) in workloads.items():
        for i in range(n):
            run(i)
        gc.collect()
        before = rss()
        for i in range(2 * n):
            run(i)
        gc.collect()
        growth[name] = (rss() - before) / (2 * n)
    print(json.dumps(growth))
""")


@pytest.fixture(scope="module")
def growth_per_call():
    out = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("workload, bytes_per_call", [
    ("cached_device_array", 20), ("cached_numpy", 20), ("eager", 200), ("fresh_compilations", 20000),
])
def test_memory_is_flat(growth_per_call, workload, bytes_per_call):
    assert growth_per_call[workload] < bytes_per_call, growth_per_call
