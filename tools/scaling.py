"""How the toolchain's time grows with program size: ``python -m jaxprc.tools.scaling``.

Each size runs in a process of its own (a crash is reported, not inherited):
a straight-line chain of n equations (``x = sin(x) * 1.0001``, n/2 times) is
traced (``make_jaxpr``), differentiated (``make_jaxpr(grad)``), batched
(``make_jaxpr(vmap)``), printed, parsed back, lowered to StableHLO, and run by
``jit`` (which splits it into executables of ``jaxprc_max_segment_eqns``
equations, compiler/engine/segmenting.py) with its result checked against numpy.
Reported per step: the process's CPU time (steadier than wall time on a shared
machine) and wall time at each size, and the exponent k of time ~ n^k (the
log-log slope between the smallest and largest size; 1 is linear).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

STEPS = ("make_jaxpr", "grad", "vmap", "print", "parse", "lower", "jit")

_RUN_ONE = r"""
import json, sys, time
import numpy as np
import jaxprc as jx, jaxprc.numpy as jnp
from jaxprc.ir import parse
n, steps = int(sys.argv[1]), sys.argv[2].split(",")

def chain(x):
    for _ in range(n // 2):
        x = jnp.sin(x) * 1.0001
    return x

times = {}
def timed(step, fn):
    if step not in steps:
        return None
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    times[step] = (time.process_time() - c, time.perf_counter() - w)
    return out

x = np.float32(0.3)
cj = jx.make_jaxpr(chain)(x) if "make_jaxpr" not in steps else timed("make_jaxpr", lambda: jx.make_jaxpr(chain)(x))
assert len(cj.eqns) == n, len(cj.eqns)
timed("grad", lambda: jx.make_jaxpr(jx.grad(chain))(x))
timed("vmap", lambda: jx.make_jaxpr(jx.vmap(chain))(np.ones(3, np.float32)))
text = str(cj) if "print" not in steps else timed("print", lambda: str(cj))
timed("parse", lambda: parse(text))
timed("lower", lambda: jx.jit(chain).lower(x).as_text())
out = timed("jit", lambda: float(jx.jit(chain)(x)))
if out is not None:
    want = np.float32(0.3)
    for _ in range(n // 2):
        want = np.sin(want) * np.float32(1.0001)
    assert abs(out - float(want)) <= 1e-5 * max(1.0, abs(float(want))), (out, want)
print(json.dumps(times))
"""


def run_size(n: int, steps, timeout: float) -> dict:
    """{step: (cpu s, wall s)} for a chain of ``n`` equations, measured in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", _RUN_ONE, str(n), ",".join(steps)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise RuntimeError(f"the {n}-equation run failed (exit status {proc.returncode}): {tail[0]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def exponent(n0: int, t0: float, n1: int, t1: float) -> float:
    """k in t ~ n^k through two points."""
    return math.log(t1 / t0) / math.log(n1 / n0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m jaxprc.tools.scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,50000,100000", help="equation counts, comma-separated")
    p.add_argument("--steps", default=",".join(STEPS), help=f"a subset of {','.join(STEPS)}")
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed per size")
    args = p.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown or len(sizes) < 2 or sizes[0] < 2 or any(n % 2 for n in sizes):
        p.error(f"unknown steps {unknown}" if unknown else "give two or more even sizes (>= 2)")
    results = {}
    for n in sizes:
        results[n] = run_size(n, steps, args.timeout)
        print(f"n={n}: " + ", ".join(f"{s} {results[n][s][0]:.2f}s cpu / {results[n][s][1]:.2f}s wall"
                                     for s in steps), flush=True)
    lo, hi = sizes[0], sizes[-1]
    print(f"\n| step | " + " | ".join(f"n={n} (cpu s)" for n in sizes) + f" | exponent {lo}→{hi} (cpu) | (wall) |")
    print("|---" * (len(sizes) + 3) + "|")
    for s in steps:
        cpu = [results[n][s][0] for n in sizes]
        k_cpu = exponent(lo, cpu[0], hi, cpu[-1])
        k_wall = exponent(lo, results[lo][s][1], hi, results[hi][s][1])
        print(f"| {s} | " + " | ".join(f"{t:.2f}" for t in cpu) + f" | {k_cpu:.2f} | {k_wall:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
