"""``accuracy=`` of the transcendental unary ops (exp, log, sin, ...): ``Tolerance`` and
``AccuracyMode``, as JAX has them.

The request is an optional ``accuracy`` param of the op's equation (absent when not given, so
programs print as before) and reaches StableHLO as the op's ``result_accuracy`` attribute, which
lets the compiler pick an implementation; XLA:CPU has one implementation per op and keeps it.
"""
from __future__ import annotations

import enum
import typing

from jaxprc.interpreters.mlir import hlo
from jaxprc.ir.core import param_type
from jaxprc.ir.params import Enum, Int, OneOf, Optional, Record, Scalar

__all__ = ["Tolerance", "AccuracyMode", "ACCURACY", "accuracy_attr", "check_accuracy"]


class _ToleranceFields(typing.NamedTuple):
    atol: float
    rtol: float
    ulps: int


@param_type
class Tolerance(_ToleranceFields):
    """Tolerances for a unary function's result: at most two of ``atol``, ``rtol``, ``ulps``
    (``atol`` and ``rtol``, or ``atol`` and ``ulps``), none negative, one at least set."""
    __slots__ = ()

    def __new__(cls, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0.0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        return super().__new__(cls, float(atol), float(rtol), int(ulps))


@param_type
class AccuracyMode(enum.Enum):
    HIGHEST = 1
    DEFAULT = 2


ACCURACY = Optional(OneOf(Enum(AccuracyMode),
                          Record(Tolerance, atol=Scalar(), rtol=Scalar(), ulps=Int(0))))


def check_accuracy(name: str, accuracy):
    if accuracy is not None and not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise TypeError(f"lax.{name}: accuracy must be a lax.Tolerance, a lax.AccuracyMode or None, "
                        f"got {accuracy!r}")
    return accuracy


def accuracy_attr(accuracy):
    """The ``#stablehlo.result_accuracy`` of a request (None: no attribute)."""
    if accuracy is None:
        return None
    if isinstance(accuracy, AccuracyMode):
        return hlo.ResultAccuracyAttr.get(0.0, 0.0, 0, accuracy.name)
    return hlo.ResultAccuracyAttr.get(atol=accuracy.atol, rtol=accuracy.rtol, ulps=accuracy.ulps,
                                      mode="TOLERANCE")
