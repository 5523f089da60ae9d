"""``jaxprc.stages``: the stages of ``jit`` (JAX's ``jax.stages``).

``jit(f)`` is a ``Wrapped``; ``.trace(*args)`` gives a ``Traced`` (the jaxpr of one call
signature), ``.lower()`` a ``Lowered`` (its StableHLO), ``.compile()`` a ``Compiled`` (XLA's
executable, callable on arguments of that signature). Each describes its arguments by
``args_info``, a pytree of ``ArgInfo``.
"""
from __future__ import annotations

from typing import Protocol, Union, runtime_checkable

from .api import ArgInfo, Compiled, Lowered, Traced

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]

CompilerOptions = dict[str, Union[str, bool]]


@runtime_checkable
class Wrapped(Protocol):
    """A function ready to be traced, lowered and compiled: what ``jit`` returns."""

    def __call__(self, *args, **kwargs):
        """Run it, tracing, lowering and compiling as needed."""

    def trace(self, *args, **kwargs) -> Traced:
        """Trace it for these arguments."""

    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and lower it for these arguments (``self.trace(...).lower()``)."""
