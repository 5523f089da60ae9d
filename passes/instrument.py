"""Pass instrumentation: objects ``run_pipeline`` calls around each pass (as MLIR's
``PassInstrumentation``), and the two the command line uses.

An instrumentation has either or both of ``run_before_pass(label, program)`` and
``run_after_pass(label, program, seconds)`` (``seconds``: the pass's own wall time, verification
not included). ``PassTiming`` collects a table of wall times and equation counts (mlir-opt's
``-mlir-timing``); ``IRPrinter`` prints the IR before or after steps, only after those that
changed it, or as a unified diff of consecutive IRs. Both take steps that are not passes too
(tracing, lowering) through ``record`` and ``show``.
"""
from __future__ import annotations

import difflib
import sys
import time
from typing import IO, Iterable

from .registry import count_equations


def step_name(label: str) -> str:
    """``vmap:axis_size=4`` -> ``vmap``."""
    return label.split(":")[0]


class PassTiming:
    """Wall time and equations before/after of each step; ``report()`` is the table."""

    def __init__(self):
        self.rows: list[tuple[str, float, int | None, int | None]] = []
        self._before: int | None = None

    def record(self, label: str, seconds: float, before: int | None = None, after: int | None = None):
        self.rows.append((label, seconds, before, after))

    def run_before_pass(self, label: str, program) -> None:
        self._before = count_equations(program)

    def run_after_pass(self, label: str, program, seconds: float) -> None:
        self.record(label, seconds, self._before, count_equations(program))

    def timed(self, label: str, fn, *args, count=None):
        """``fn(*args)``, recorded as the step ``label`` (``count(result)``: equations after)."""
        start = time.perf_counter()
        result = fn(*args)
        self.record(label, time.perf_counter() - start, None, count(result) if count else None)
        return result

    def report(self) -> str:
        total = sum(r[1] for r in self.rows) or 1e-12
        rule = "===" + "-" * 73 + "==="
        lines = [rule, "Execution time report".center(79).rstrip(), rule,
                 f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  -----Equations-----  ----Name----"]
        for label, seconds, before, after in self.rows:
            eqns = (f"{before} -> {after}" if before is not None and after is not None
                    else "" if after is None else f"{after}")
            lines.append(f"  {seconds:8.4f} ({100 * seconds / total:5.1f}%)  {eqns:>19}  {label}")
        lines.append(f"  {total:8.4f} (100.0%)  {'':>19}  Total")
        return "\n".join(lines)


class IRPrinter:
    """Prints the IR around steps to ``stream`` (stderr by default, as mlir-opt).

    ``after_all``: after every step; ``after``/``before``: after/before the steps of these names;
    ``after_change``: after every step that changed the printed IR; ``diff``: a unified diff of
    the IR before and after each step that changed it, instead of the whole IR."""

    def __init__(self, *, after_all: bool = False, after: Iterable[str] = (), before: Iterable[str] = (),
                 after_change: bool = False, diff: bool = False, stream: IO | None = None):
        self.after_all, self.after, self.before = after_all, set(after), set(before)
        self.after_change, self.diff = after_change, diff
        self.stream = stream
        self.last: str | None = None
        self._last_label = "input"

    def _print(self, text: str) -> None:
        print(text, file=self.stream if self.stream is not None else sys.stderr)

    def needs_every_step(self) -> bool:
        """Whether every step's IR must be produced (to see whether it changed)."""
        return self.after_all or self.after_change or self.diff

    def wants(self, label: str) -> bool:
        return self.needs_every_step() or step_name(label) in self.after

    def start(self, program) -> None:
        """The IR the first step starts from (what the first diff compares with)."""
        self.last = str(program)

    def run_before_pass(self, label: str, program) -> None:
        if step_name(label) in self.before:
            self._print(f"// -----// IR before {step_name(label)} //----- //\n{program}\n")

    def run_after_pass(self, label: str, program, seconds: float = 0.0) -> None:
        self.show(step_name(label), program)       # (headers name the pass, as they always have)

    def show(self, label: str, program) -> None:
        text = str(program)
        changed = text != self.last
        if self.diff:
            if changed and self.last is not None:
                lines = difflib.unified_diff(self.last.splitlines(), text.splitlines(),
                                             f"IR before {label}", f"IR after {label}", lineterm="")
                self._print("\n".join(lines) + "\n")
        elif self.after_all or step_name(label) in self.after or (self.after_change and changed):
            self._print(f"// -----// IR after {label} //----- //\n{text}\n")
        self.last, self._last_label = text, label
