"""The libraries' own test files, run on JAX and under jaxprc.compat: pass rates side by side.

    python tests_ecosystem/library_suites.py [--files N] [--budget SECONDS] [LIBRARY ...]

A slow tier, not part of any pytest run. For each library of the ``ecosystem`` extra (its pinned
version, from pyproject.toml) it gets the source distribution once (``pip download --no-binary
:all: --no-deps NAME==VERSION``, cached in ``$JAXPRC_SUITES_CACHE`` or
~/.cache/jaxprc/library-suites), lists its test files (``*_test.py`` and ``test_*.py`` files
with tests in them) and runs a deterministic sample of ``--files`` of them (the first in an
order fixed by a hash of each path: the same files every run, and a new file does not reshuffle
the others). Each file runs with pytest in its own process, on JAX and then with ``jax`` read as
``jaxprc`` (``python -m jaxprc.compat -m pytest``), each under a time limit. It prints, per
library, the tests passed on each side, and every test that passes on JAX but not on jaxprc with
the first line of jaxprc's error: the differences docs/guides/jax-libraries.md lists with their
reasons. Libraries whose source distribution ships no tests (equinox, diffrax, lineax,
optimistix) are listed as such.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tarfile
import time
import tomllib
import xml.etree.ElementTree as ElementTree
import zlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("JAXPRC_SUITES_CACHE", pathlib.Path.home() / ".cache" / "jaxprc" / "library-suites"))
DEFAULT_LIBRARIES = ("optax", "chex", "distrax", "equinox")
FILE_TIMEOUT = 600


def pinned_versions() -> dict:
    """name -> version, from the ``ecosystem`` extra of pyproject.toml."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ecosystem"]
    return dict(req.split("==") for req in extra if "==" in req and not req.startswith("jax=="))


def source_tree(name: str, version: str) -> pathlib.Path:
    """The unpacked source distribution (downloaded and unpacked once)."""
    unpacked = CACHE / f"{name}-{version}"
    if unpacked.is_dir():
        return unpacked
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                    f"{name}=={version}", "-d", str(CACHE)], check=True)
    archive = next(CACHE.glob(f"{name}-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return unpacked


def sample(tree: pathlib.Path, n: int) -> list:
    """``n`` test files of ``tree``, the same ones every run."""
    files = [p.relative_to(tree).as_posix() for p in tree.rglob("*.py")
             if (p.name.endswith("_test.py") or p.name.startswith("test_")) and "def test" in p.read_text()]
    return sorted(files, key=lambda f: (zlib.crc32(f.encode()), f))[:n]


def run_file(tree: pathlib.Path, path: str, on_jaxprc: bool) -> dict:
    """test id -> "passed", "skipped" or the first line of its failure; {} if nothing ran."""
    report = CACHE / f"report-{os.getpid()}.xml"
    launcher = ["-m", "jaxprc.compat", "-m", "pytest"] if on_jaxprc else ["-m", "pytest"]
    args = [sys.executable, *launcher, path, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
            f"--junitxml={report}"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=FILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {f"{path}::(the file)": f"timed out after {FILE_TIMEOUT} s"}
    if not report.exists():
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return {f"{path}::(the file)": lines[-1] if lines else "no report"}
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        if problem is not None:
            outcomes[test] = (problem.get("message") or problem.text or "?").strip().splitlines()[0][:200]
        else:
            outcomes[test] = "skipped" if case.find("skipped") is not None else "passed"
    report.unlink()
    return outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3, help="test files per library (default 3)")
    parser.add_argument("--budget", type=float, default=3600, help="stop starting files after this many seconds")
    parser.add_argument("libraries", nargs="*", help=f"default: {' '.join(DEFAULT_LIBRARIES)}")
    opts = parser.parse_args(argv)
    versions = pinned_versions()
    start = time.monotonic()
    rows, differences = [], []
    for name in opts.libraries or DEFAULT_LIBRARIES:
        tree = source_tree(name, versions[name])
        files = sample(tree, opts.files)
        if not files:
            rows.append(f"| {name} {versions[name]} | (its source distribution ships no tests) | | | | |")
            continue
        counts = {"tests": 0, "jax": 0, "jaxprc": 0, "skipped": 0}
        ran = []
        for path in files:
            if time.monotonic() - start > opts.budget:
                break
            ran.append(path)
            theirs, ours = run_file(tree, path, False), run_file(tree, path, True)
            for test, outcome in theirs.items():
                mine = ours.get(test, "did not run")
                counts["tests"] += 1
                counts["jax"] += outcome == "passed"
                counts["jaxprc"] += mine == "passed"
                counts["skipped"] += outcome == "skipped"
                if outcome == "passed" and mine != "passed":
                    differences.append(f"- {name}: `{test}`: {mine}")
            print(f"  {name}: {path}: {sum(o == 'passed' for o in theirs.values())}/{len(theirs)} pass on JAX, "
                  f"{sum(o == 'passed' for o in ours.values())}/{len(ours)} on jaxprc "
                  f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
        rows.append(f"| {name} {versions[name]} | {', '.join(ran) or '(over the budget)'} | {counts['tests']} | "
                    f"{counts['skipped']} | {counts['jax']} | {counts['jaxprc']} |")
    print("| library | test files (sample) | tests | skipped on JAX | pass on JAX | pass on jaxprc |\n"
          "|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nPassing on JAX, not on jaxprc:" if differences else "\nEvery test that passes on JAX passes on jaxprc.")
    print("\n".join(differences))
    return 0


if __name__ == "__main__":
    sys.exit(main())
