"""Time each quickstart program (tests_ecosystem/programs/) on jaxprc and on JAX: a table.

    python tests_ecosystem/time_programs.py [--repeats 3] [NAME ...]

Each program runs as a user runs it, a whole process (imports, tracing, compiling, running), in
turns: jaxprc.compat, then JAX, ``--repeats`` times, one process at a time so the two share the
machine alike. The table gives the median wall time of each and their ratio; the issue's bar is a
ratio of at most 2. The exit status is 1 if a program fails or is over the bar.
"""
import argparse
import pathlib
import statistics
import subprocess
import sys
import time

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"
BAR = 2.0


def _wall_time(args) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=PROGRAMS, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("names", nargs="*", help="programs to time (default: all)")
    opts = parser.parse_args(argv)
    names = opts.names or sorted(p.stem for p in PROGRAMS.glob("*.py"))
    print("| program | jaxprc (s) | JAX (s) | ratio |\n|---|---|---|---|", flush=True)
    worst = 0.0
    for name in names:
        path = str(PROGRAMS / f"{name}.py")
        ours, theirs = [], []
        for _ in range(opts.repeats):
            ours.append(_wall_time(["-m", "jaxprc.compat", path]))
            theirs.append(_wall_time([path]))
        a, b = statistics.median(ours), statistics.median(theirs)
        worst = max(worst, a / b)
        print(f"| {name} | {a:.1f} | {b:.1f} | {a / b:.2f} |", flush=True)
    return 0 if worst <= BAR else 1


if __name__ == "__main__":
    sys.exit(main())
