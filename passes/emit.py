"""The few operations the pass drivers emit themselves.

The drivers are generic interpreters and import no primitive. Three things
they build on their own: a materialised zero (a symbolic ``Zero`` that must
become a value), the sum of two (co)tangents that meet at one variable, and a
batch axis that is moved or broadcast. The primitive families
(``jaxprc.lax``) supply these operations through ``provide`` when they load.
"""
from __future__ import annotations

from typing import Callable

from jaxprc.ir.core import Literal, ShapedArray
from jaxprc.ir.tracing import current_builder


def provide(**ops: Callable) -> None:
    """Supply driver operations by name: ``full(shape, value, dtype)``, ``add(x, y)`` (of equal
    types), ``transpose(x, permutation)``, ``broadcast_in_dim(x, shape, broadcast_dimensions)``.

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


_OPERATIONS = frozenset({"full", "add", "transpose", "broadcast_in_dim"})
full = _missing("full")
add = _missing("add")
transpose = _missing("transpose")
broadcast_in_dim = _missing("broadcast_in_dim")


def zeros(aval: ShapedArray):
    """Zeros of type ``aval``, its weak bit included (JAX's ``zeros_like_aval``)."""
    if current_builder() is None:      # evaluated at once (no trace to hold a literal)
        return full(aval.shape, 0, aval.dtype)
    zero = Literal(0, ShapedArray((), aval.dtype, aval.weak_type))
    return broadcast_in_dim(zero, aval.shape, ())
