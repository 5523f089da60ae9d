"""The command line run in this process: ``cli("opt", ...)`` is what ``jaxprc opt ...`` does,
without an interpreter start."""
import contextlib
import io
import subprocess

from jaxprc.tools.cli import main


def cli(*argv) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return subprocess.CompletedProcess(argv, rc, out.getvalue(), err.getvalue())
