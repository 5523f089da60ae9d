"""jaxprc.dtypes: JAX's ``jax.dtypes`` names (float0, bfloat16, canonicalization, promotion)."""
from __future__ import annotations

import abc

import numpy as np

from .ir import dtypes as dt
from .ir.dtypes import TypePromotionError, bfloat16, finfo, float0, iinfo  # noqa: F401
from .ir.tracing import get_aval
from .numpy import _dtypes as _np_dtypes
from .numpy._dtypes import promote_types, result_type  # noqa: F401

__all__ = ["ExtendedDType", "TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo", "float0", "iinfo",
           "issubdtype", "itemsize_bits", "prng_key", "promote_types", "result_type", "scalar_type_of"]


class extended(np.generic):
    """Abstract scalar class of the extended dtypes (typed PRNG keys); never instantiated."""


class prng_key(extended):
    """Abstract scalar class of typed PRNG key dtypes (``key<fry>``); never instantiated."""


class ExtendedDType(abc.ABC):
    """Base class of the dtypes numpy does not have (typed PRNG keys): ``type`` is the scalar class
    under ``extended`` that ``issubdtype`` places it under."""

    @property
    @abc.abstractmethod
    def type(self) -> type: ...


def _is_key_dtype(d) -> bool:
    from .random import PRNGKeyDType
    return isinstance(d, PRNGKeyDType)


def issubdtype(a, b) -> bool:
    """numpy's ``issubdtype`` extended to bfloat16 and to typed-key dtypes (under ``extended``)."""
    if a in (extended, prng_key):
        return isinstance(b, type) and issubclass(a, b)
    if _is_key_dtype(a) or _is_key_dtype(b):
        return _is_key_dtype(a) and (b in (extended, prng_key, np.generic) or _is_key_dtype(b))
    if b in (extended, prng_key):
        return False
    return _np_dtypes.issubdtype(a, b)


def canonicalize_dtype(dtype, allow_extended_dtype: bool = False):
    """The dtype values of ``dtype`` get (64-bit types narrow without x64); typed-key dtypes pass
    through when ``allow_extended_dtype``."""
    if _is_key_dtype(dtype):
        if not allow_extended_dtype:
            raise ValueError(f"Internal: canonicalize_dtype called on extended dtype {dtype} with "
                             "allow_extended_dtype=False")
        return dtype
    return dt.canonicalize_dtype(_np_dtypes.to_dtype(dtype))


def dtype(x) -> np.dtype:
    """The dtype of a value or dtype-like: Python types and scalars and dtype names canonicalized,
    arrays as they are (``jax.dtypes.dtype``, exported as ``jax.lax.dtype``)."""
    if x is None:
        raise ValueError(f"Invalid argument to dtype: {x}.")
    if _is_key_dtype(getattr(x, "dtype", None)) or _is_key_dtype(x):
        return getattr(x, "dtype", x)
    if isinstance(x, (type, str, np.dtype, _np_dtypes.ScalarType)) or type(x) in (bool, int, float, complex):
        d = _np_dtypes.to_dtype(type(x) if type(x) in (bool, int, float, complex) else x)
        if d not in dt.ALL_DTYPES:
            raise TypeError(f"Value '{x}' with dtype {d} is not a valid JAX array type. Only arrays of "
                            "numeric types are supported by JAX.")
        return dt.canonicalize_dtype(d)
    try:
        return get_aval(x).dtype
    except TypeError:
        pass
    try:
        d = np.result_type(x)
    except TypeError as err:
        raise TypeError(f"Cannot determine dtype of {x}") from err
    if d not in dt.ALL_DTYPES:
        raise TypeError(f"Value '{x}' with dtype {d} is not a valid JAX array type. Only arrays of numeric "
                        "types are supported by JAX.")
    return d


def itemsize_bits(dtype) -> int:         # noqa: F811 (JAX's parameter name shadows ``dtype``)
    """Bits per element (8 for bool, as stored)."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    d = _np_dtypes.to_dtype(dtype)
    if d == dt.bool_:
        return 8
    if dt.is_int(d):
        return iinfo(d).bits
    if dt.is_float(d):
        return finfo(d).bits
    if dt.is_complex(d):
        return 2 * finfo(d).bits
    raise ValueError(f"unexpected input: dtype={dtype!r}")


def scalar_type_of(x) -> type:
    """The Python scalar type of a value's dtype: bool, int, float or complex."""
    d = dtype(x)
    for kind, typ in ((dt.is_bool, bool), (dt.is_int, int), (dt.is_float, float), (dt.is_complex, complex)):
        if kind(d):
            return typ
    raise TypeError(f"Invalid scalar value {x}")
