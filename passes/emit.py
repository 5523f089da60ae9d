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


def provide(**ops: Callable) -> None:
    """Supply driver operations by name: ``full``, ``add``, ``transpose``, ``broadcast_in_dim``.

    The supplied function replaces the module attribute, so a driver's ``emit.add(x, y)`` calls
    it directly (these run once per equation the passes emit)."""
    for name, fn in ops.items():
        if name not in _OPERATIONS:
            raise ValueError(f"unknown pass operation '{name}'; expected one of {sorted(_OPERATIONS)}")
        globals()[name] = fn


def _missing(name: str) -> Callable:
    def op(*args, **kwargs):
        raise RuntimeError(f"no primitive family supplied the pass operation '{name}' "
                           "(jaxprc.lax supplies it on import)")
    op.__name__ = name
    return op


_OPERATIONS = {
    "full": "full(shape, value, dtype): an array of shape and dtype filled with the scalar value",
    "add": "add(x, y): x + y of equal types (accumulating tangents or cotangents)",
    "transpose": "transpose(x, permutation)",
    "broadcast_in_dim": "broadcast_in_dim(x, shape, broadcast_dimensions)",
}
for _name in _OPERATIONS:
    globals()[_name] = _missing(_name)


def zeros(aval: ShapedArray):
    return full(aval.shape, 0, aval.dtype)
