"""The command-line page: every ``jaxprc`` command run on the files in ``examples/``, with the
output it gives, captured at build time (in this process, through ``jaxprc.tools.cli.main``)."""
from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import tempfile
from pathlib import Path

# (what it shows, the command line); a command writing a file (-o) is followed by the file
SESSION = [
    ("The commands", "jaxprc --help"),
    ("`trace`: a Python function on argument types to text IR",
     "jaxprc trace examples/model.py:loss --args 'f32[8,4], f32[8]'"),
    ("... with a transformation, written to a file",
     "jaxprc trace examples/model.py:loss --args 'f32[8,4], f32[8]' --transform grad -o grad.jaxpr"),
    ("`opt`: a pass pipeline over a text IR file, verified after each pass",
     "jaxprc opt grad.jaxpr --passes cse,dce"),
    ("", "jaxprc opt examples/loss.jaxpr --passes vmap:axis_size=4,dce -o batched.jaxpr"),
    ("`lower`: text IR to StableHLO (or XLA's optimized HLO with `--emit hlo`)",
     "jaxprc lower examples/clipped_norm.jaxpr"),
    ("", "jaxprc lower examples/clipped_norm.jaxpr --emit hlo"),
    ("`run`: compile with XLA and run; inputs by name or in order, a `.npy` file or a literal",
     "jaxprc run examples/loss.jaxpr --input a=0.5 --input b='[1, 2, 3, 4, 5, 6, 7, 8]'"),
    ("", "jaxprc run batched.jaxpr --input 0.25 --input 1.0"),
    ("`export`: a function serialized as `jax.export` does (symbolic sizes allowed), for `run` or JAX",
     "jaxprc export examples/model.py:loss --args 'f32[b,4], f32[b]' --constraints 'b >= 2' --vjp-order 1 "
     "-o loss.bin"),
    ("", "jaxprc run loss.bin --input '[[1, 2, 3, 4], [5, 6, 7, 8]]' --input '[0.5, 1.5]'"),
    ("`check`: parse, verify and round-trip", "jaxprc check examples/clipped_norm.jaxpr"),
    ("A program that does not verify gives the line and column",
     "jaxprc check broken.jaxpr"),
    ("`graph`: the dataflow graph, DOT on stdout or SVG", "jaxprc graph examples/loss.jaxpr"),
    ("", "jaxprc graph examples/clipped_norm.jaxpr -o clipped_norm.svg"),
    ("`--timing`, `--print-ir-diff`: what each pass did, and how long it took",
     "jaxprc opt examples/loss.jaxpr --passes jvp,canonicalize,dce --timing"),
    ("A failing pass (or lowering, or XLA) writes a reproducer with `--reproducer DIR`",
     "jaxprc opt examples/loss.jaxpr --passes transpose --reproducer crashes"),
    ("`repro`: replay reproducers, say whether the failure comes back", "jaxprc repro crashes"),
    ("`reduce`: shrink a program while its failure persists (delta debugging)",
     "jaxprc reduce examples/loss.jaxpr --passes transpose --until-error integer_pow --quiet"),
    ("`demo`: a small model with a custom derivative, through every pass to XLA", "jaxprc demo"),
]
BROKEN = "{ lambda ; a:f32[3]. let\n    b:f32[] = sin a\n  in (b,) }\n"


def run_cli(argv: list[str]) -> tuple[int, str]:
    from jaxprc.tools import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = cli.main(argv)
        except SystemExit as e:            # --help
            rc = e.code or 0
    return rc, out.getvalue()


def cli_markdown(repo_root: Path, images: Path) -> str:
    out = []
    old_cwd, old_columns = os.getcwd(), os.environ.get("COLUMNS")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(repo_root / "examples", Path(tmp) / "examples")
        (Path(tmp) / "broken.jaxpr").write_text(BROKEN)
        os.chdir(tmp)
        os.environ["COLUMNS"] = "100"          # argparse wraps help to the terminal's width
        try:
            for title, line in SESSION:
                argv = shlex.split(line)[1:]
                rc, text = run_cli(argv)
                if title:
                    out += [f"## {title}", ""]
                status = "" if rc == 0 else f"   # exit status {rc}"
                out += ["```console", f"$ {line}{status}", text.rstrip(), "```", ""]
                if "-o" in argv:                   # the file it wrote, instead of stdout
                    out += _show_written(Path(tmp) / argv[argv.index("-o") + 1], images)
        finally:
            os.chdir(old_cwd)
            if old_columns is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = old_columns
    return "\n".join(out)


def _show_written(path: Path, images: Path) -> list[str]:
    if path.suffix == ".svg":
        images.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, images / path.name)
        return [f"![the dataflow graph of the program, drawn by jaxprc graph]({images.name}/{path.name})", ""]
    if path.suffix == ".bin":
        return [f"`{path.name}` now holds {path.stat().st_size} bytes: the serialized Exported.", ""]
    return [f"`{path.name}` now holds:", "", "```text", path.read_text().rstrip(), "```", ""]
