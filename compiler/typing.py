"""``jaxprc.typing``: the annotations JAX's ``jax.typing`` gives (``ArrayLike``, ``DTypeLike``).

``ArrayLike`` is what converts implicitly to an array: a jaxprc ``Array``, a numpy array, or a
numpy / Python scalar; unlike
``numpy.typing.ArrayLike`` it excludes nested sequences and strings. ``DTypeLike`` is whatever
names a dtype: a string, a scalar type, a ``numpy.dtype`` or an object with a ``dtype``.
"""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from .array_type import Array

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    """An object naming a dtype by its ``dtype`` attribute (``jaxprc.numpy.float32``)."""

    @property
    def dtype(self, /) -> np.dtype: ...


ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
