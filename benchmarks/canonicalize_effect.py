"""What ``jaxprc_canonicalize`` does to the benchmark programs: ``python benchmarks/canonicalize_effect.py
[--repeats N] [--only NAME]``.

For each program of benchmarks/bench.py (jit of a gradient, mostly), with the flag off and on:
the StableHLO op count of its lowering, the lowering time (canonicalize runs there) and XLA's
compile time of that StableHLO (wall and CPU), each the median of N runs (a fresh compilation
each time: no cache). The two settings alternate run by run, so both see the same machine load. Prints a
Markdown table (docs/workbench.md holds one).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the programs)


def programs(lib):
    """(name, function, args) of the benchmark programs that jaxprc runs here."""
    api = lib.api
    out = [
        ("grad(mlp_loss)", api.grad(bench.make_mlp_loss(lib)), bench.mlp_data()),
        ("mlp sgd_step", bench.make_sgd_step(lib), bench.mlp_data()),
        ("vmap(chain), 2000 eqns", api.vmap(bench.make_chain(lib)), (bench._XS,)),
        ("grad(chain_loss), 2000 eqns", api.grad(bench.make_chain_loss(lib)), (bench._XS,)),
        ("grad(scan RNN)", api.grad(bench.make_rnn_loss(lib), argnums=(0, 1)), bench.rnn_data()),
        ("grad(ResNet block)", api.grad(bench.make_resnet_block_loss(lib), argnums=(0, 1)),
         bench.resnet_block_data()),
        ("grad(GP nll)", api.grad(bench.make_gp_nll(lib)), bench.gp_data()),
    ]
    params, x, y, loss = bench.mnist_convnet(lib)
    out.append(("grad(MNIST convnet)", api.grad(loss), (params, x, y)))
    if lib.odeint is not None:
        out.append(("grad(odeint pendulum)", api.grad(bench.make_pendulum_loss(lib), argnums=(0, 1, 2)),
                    bench.PENDULUM_ARGS))
    return out


def op_count(stablehlo: str) -> int:
    """The module's operations (bench.count_ops: regions' returns and applied reducers too)."""
    return sum(bench.count_ops(stablehlo).values())


def measure(lib, fn, args, canonicalize: bool):
    """(StableHLO text, lowering seconds, compile seconds, compile CPU seconds: all threads,
    steadier on a shared machine) with the flag set as given."""
    from jaxprc import runtime
    lib.api.config.update("jaxprc_canonicalize", canonicalize)
    start = time.perf_counter()
    text = lib.api.jit(fn).lower(*args).as_text()     # a new jit object: lowered anew
    lowered = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    runtime.compile(text, cache_dir=None)
    return text, lowered, time.perf_counter() - start, time.process_time() - cpu


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", help="only the programs whose name contains this")
    args = ap.parse_args(argv)
    lib = bench.load_lib("jaxprc")
    print("| program | ops off | ops on | lower ms off | lower ms on | compile ms off | compile ms on "
          "| compile CPU ms off | compile CPU ms on |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, fn, fargs in programs(lib):
        if args.only and args.only not in name:
            continue
        runs = {False: [], True: []}
        for _ in range(args.repeats):
            for flag in (False, True):
                runs[flag].append(measure(lib, fn, fargs, flag))
        ops = {flag: op_count(runs[flag][0][0]) for flag in runs}
        med = lambda flag, k: statistics.median(r[k] for r in runs[flag]) * 1e3     # noqa: E731
        print(f"| {name} | {ops[False]} | {ops[True]} | {med(False, 1):.0f} | {med(True, 1):.0f} "
              f"| {med(False, 2):.0f} | {med(True, 2):.0f} | {med(False, 3):.0f} | {med(True, 3):.0f} |", flush=True)
    lib.api.config.update("jaxprc_canonicalize", False)


if __name__ == "__main__":
    main()
