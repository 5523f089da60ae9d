"""Transitional: what the families not yet moved out of ``ir/`` and ``passes/`` take from here.

The elementwise family (its primitives, kind predicates, builders and rules)
lives in ``jaxprc.lax.elementwise``. The typing rules of ``structural``,
``reductions``, ``linalg`` and ``control_flow`` still import the kind
predicates below, and their builders and pass rules still say ``ew.<name>_p``:
``jaxprc.lax`` installs the elementwise primitives here when it loads. This
module goes when those families have moved.
"""
from __future__ import annotations

from .. import dtypes as dt


def _kinds(*preds):
    """A dtype predicate: the union of ``preds``, precomputed over the IR's dtypes."""
    accepted = frozenset(d for d in dt.ALL_DTYPES if any(p(d) for p in preds))
    return lambda d: d in accepted


IS_BOOL, IS_INT, IS_UINT = dt.is_bool, dt.is_signed, dt.is_unsigned
IS_FLOAT, IS_COMPLEX = dt.is_float, dt.is_complex
ANY = lambda d: d != dt.float0
NUM = _kinds(IS_INT, IS_UINT, IS_FLOAT, IS_COMPLEX)
INTEGRAL = _kinds(IS_INT, IS_UINT)
BOOL_OR_INT = _kinds(IS_BOOL, IS_INT, IS_UINT)
ORDERED = _kinds(IS_BOOL, IS_INT, IS_UINT, IS_FLOAT)
KIND_NAMES = {ANY: "any dtype", NUM: "a numeric dtype", IS_FLOAT: "a floating dtype",
              INTEGRAL: "an integer dtype", BOOL_OR_INT: "a boolean or integer dtype",
              ORDERED: "an ordered (non-complex) dtype"}


def fmt_types(avals) -> str:
    return ", ".join(a.str_short() for a in avals)
