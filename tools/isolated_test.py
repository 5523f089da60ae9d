"""The reducer's built-in interestingness tests (``--until-error``, ``--until-differs``) run in a
worker process, each candidate under a time limit: a candidate that makes XLA hang, or loops
forever, is not interesting (the worker is killed, a new one starts for the next candidate), and
one that kills the process is interesting only to ``--until-error``, when what the process wrote
to stderr as it died matches the pattern (an XLA abort, a segfault's message).

The worker (``python -m jaxprc.tools.isolated_test SPEC``) loads the plugins, answers ``ready``,
then reads one candidate per line (its text, JSON-quoted) and answers ``1`` or ``0``.
"""
from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile

# What the process wrote to stderr as it died is searched for the --until-error pattern over
# this many characters (its last ones).
_DEATH_TAIL = 20_000


class WorkerDied(Exception):
    """The worker could not start: its plugins failed, say."""


class IsolatedTest:
    """``interesting(program) -> bool`` computed by a worker process within ``timeout`` seconds.

    ``spec``: {"test": "error", "pattern": REGEX, "pipeline": PIPELINE or None} or
    {"test": "differs"}; ``plugins``: the --load-pass-plugin files the worker loads first.
    """

    def __init__(self, spec: dict, plugins: list[str], timeout: float):
        self.spec = dict(spec, plugins=[os.path.abspath(p) for p in plugins])
        self.timeout = timeout
        self.death = re.compile(spec["pattern"]) if spec["test"] == "error" else None
        self.worker = None
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        self.timeouts = self.deaths = 0

    def _start(self) -> None:
        self.stderr.seek(0)
        self.stderr.truncate()
        self.worker = subprocess.Popen([sys.executable, "-m", "jaxprc.tools.isolated_test", json.dumps(self.spec)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                       text=True)
        if self.worker.stdout.readline().strip() != "ready":      # startup is not the candidate's time
            self.worker.wait()
            raise WorkerDied(f"the test's worker process did not start:\n{self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(self.stderr.tell() - _DEATH_TAIL, 0))
        return self.stderr.read().decode("utf-8", "replace")

    def close(self) -> None:
        """Stop the worker (it would stop at the end of its input anyway)."""
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait()
            self.worker = None

    def __call__(self, program) -> bool:
        if self.worker is None:
            self._start()
        self.stderr.seek(0, os.SEEK_END)
        start = self.stderr.tell()
        try:
            self.worker.stdin.write(json.dumps(str(program)) + "\n")
            self.worker.stdin.flush()
        except BrokenPipeError:
            pass                                        # it died: read below as a death
        ready, _, _ = select.select([self.worker.stdout], [], [], self.timeout)
        if not ready:                                   # hung: XLA, or an endless loop
            self.timeouts += 1
            self.close()
            return False
        answer = self.worker.stdout.readline().strip()
        if answer in ("0", "1"):
            return answer == "1"
        self.deaths += 1
        self.worker.wait()
        self.worker = None
        self.stderr.seek(start)
        died = self.stderr.read().decode("utf-8", "replace")[-_DEATH_TAIL:]
        return self.death is not None and self.death.search(died) is not None


def _interesting(spec: dict):
    from jaxprc.tools.cli import differs_test, error_test
    if spec["test"] == "error":
        return error_test(spec["pattern"], spec["pipeline"])
    return differs_test()


def main(argv: list[str]) -> None:
    from jaxprc.ir.parser import parse
    from jaxprc.tools.cli import load_pass_plugins
    spec = json.loads(argv[0])
    # Answers go to the real stdout; what the tested code prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    load_pass_plugins(spec["plugins"])
    interesting = _interesting(spec)
    import jaxprc
    jaxprc.jit(lambda x: x + 1)(1.0)                   # start the backend: not a candidate's time
    print("ready", file=answers, flush=True)
    for line in sys.stdin:
        program = parse(json.loads(line))
        print("1" if interesting(program) else "0", file=answers, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
