"""The few operations the pass drivers emit themselves.

The drivers are generic interpreters and import no primitive. Three things
they build on their own: a materialised zero (a symbolic ``Zero`` that must
become a value), the sum of two (co)tangents that meet at one variable, and a
batch axis that is moved or broadcast. The primitive families
(``jaxprc.lax``) supply these operations through ``provide`` when they load.
"""
from __future__ import annotations

from typing import Callable

from jaxprc.ir.core import ShapedArray

_SUPPLIED: dict[str, Callable] = {}


def provide(**ops: Callable) -> None:
    """Supply driver operations by name: ``full``, ``add``, ``transpose``, ``broadcast_in_dim``."""
    _SUPPLIED.update(ops)


def _op(name: str) -> Callable:
    try:
        return _SUPPLIED[name]
    except KeyError:
        raise RuntimeError(f"no primitive family supplied the pass operation '{name}' "
                           "(jaxprc.lax supplies it on import)") from None


def full(shape, value, dtype):
    """An array of ``shape`` and ``dtype`` filled with the scalar ``value``."""
    return _op("full")(tuple(shape), value, dtype)


def zeros(aval: ShapedArray):
    return full(aval.shape, 0, aval.dtype)


def add(x, y):
    """``x + y`` of equal types (accumulating tangents or cotangents)."""
    return _op("add")(x, y)


def transpose(x, permutation):
    return _op("transpose")(x, tuple(permutation))


def broadcast_in_dim(x, shape, broadcast_dimensions):
    return _op("broadcast_in_dim")(x, tuple(shape), tuple(broadcast_dimensions))
