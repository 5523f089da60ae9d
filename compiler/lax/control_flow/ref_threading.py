"""Refs (``jaxprc.ref``) written in loop and branch bodies: their values threaded through.

jaxprc discharges refs while tracing (compiler/ref.py): a ref holds its current value and the
trace that may change it. A body that writes a ref of the code around it (or reads an eager one)
raises ``Unthreaded``; the loop or conditional then traces its bodies again with the ref's value
in its carry (its operands and results), so the IR stays pure. Only ``_value`` and ``_trace`` of
a ref are touched here, which keeps the primitive families free of the API layer.
"""
from __future__ import annotations

from jaxprc.ir.core import JaxprcError
from jaxprc.ir.tracing import current_builder

__all__ = ["RefEscapeError", "Unthreaded", "thread_through_bodies", "initial_values", "enter_body",
           "body_values", "settle"]


class RefEscapeError(JaxprcError):
    """A ref used in a trace other than the one that created it (or after ``freeze``)."""


class Unthreaded(RefEscapeError):
    """Inside a nested trace, a write to a ref of an enclosing one, or a read of an eager ref
    (``write`` says which): a loop or conditional that catches it traces its bodies again with the
    ref's value threaded through, as jit, vmap and grad do (compiler/ref.py)."""

    def __init__(self, message: str, ref, write: bool = False):
        super().__init__(message)
        self.ref, self.write = ref, write


def thread_through_bodies(run):
    """``run(refs)`` runs a loop or conditional whose state also carries the values of ``refs``
    (each body calls ``enter_body`` first and returns ``body_values`` with its results; the
    caller then calls ``settle``). It first runs with no refs; a body that writes a ref of the
    calling code makes it run again with that ref added."""
    refs: list = []
    while True:
        saved = [(r._value, r._trace) for r in refs]
        try:
            return run(refs)
        except Unthreaded as e:
            for r, (value, trace) in zip(refs, saved):
                r._value, r._trace = value, trace
            if e.ref._trace is not current_builder() or any(e.ref is r for r in refs):
                raise
            refs.append(e.ref)


def initial_values(refs) -> list:
    return [r._value for r in refs]


def enter_body(refs, values) -> None:
    """In a body's trace: the refs hold the body's values of them."""
    builder = current_builder()
    for r, v in zip(refs, values):
        r._value, r._trace = v, builder


def body_values(refs) -> list:
    return [r._value for r in refs]


settle = enter_body      # after the loop, in the calling trace: the refs hold the final values
