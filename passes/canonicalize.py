"""Canonicalization: the ``canonicalize`` pattern set, constant folding, CSE and DCE, repeated
until the program stops changing.

The patterns live with their primitives (the families under ``jaxprc.lax`` register them in the
set ``"canonicalize"``); every one is exact under IEEE semantics: ``x * 1.0 -> x`` and
``x + -0.0 -> x`` are, ``x + 0.0 -> x`` (wrong for -0.0) and ``x * 0 -> 0`` (wrong for NaN and
inf) are not, and no rewrite here changes a bit of any result. Folding evaluates equations
whose operands are literals or constants of at most ``fold_limit`` elements, and whose results
are that small too.
"""
from __future__ import annotations

from jaxprc.ir.core import ClosedJaxpr

from .cse import cse
from .dce import dce
from .patterns import PATTERN_SETS, rewrite_jaxpr
from .registry import count_equations, register_pass

CANONICALIZE = "canonicalize"


def canonicalize(cj: ClosedJaxpr, fold_limit: int = 64, max_iterations: int = 20) -> ClosedJaxpr:
    patterns = PATTERN_SETS.get(CANONICALIZE, {})
    size = count_equations(cj)
    for _ in range(max_iterations):
        cj, changed = rewrite_jaxpr(cj, patterns, fold_limit=fold_limit)
        cj = dce(cse(cj))
        size, before = count_equations(cj), size
        if not changed and size == before:
            break
    return cj


register_pass("canonicalize", canonicalize)
