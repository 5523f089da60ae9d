"""jax.numpy's dtype vocabulary: scalar types (``jnp.float32``...), ``dtype``, ``result_type``, ``promote_types``.

Promotion is JAX's lattice with weak types (``jaxprc.ir.dtypes``), not numpy's.
"""
from __future__ import annotations

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import get_aval
from jaxprc.ir.core import ShapedArray


class ScalarType:
    """``jnp.float32`` and friends: dtype-like (``np.dtype(jnp.float32)`` works) and callable,
    ``jnp.float32(1)`` building a strongly typed 0-d array, as in JAX."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.__name__ = self.dtype.name

    def __call__(self, x):
        from .creation import asarray
        return asarray(x, dtype=self.dtype)

    def __repr__(self):
        return f"jaxprc.numpy.{self.dtype.name}"

    def __eq__(self, other):
        try:
            return self.dtype == to_dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.dtype)


bool_ = ScalarType(dt.bool_)
int8, int16, int32, int64 = map(ScalarType, (dt.int8, dt.int16, dt.int32, dt.int64))
uint8, uint16, uint32, uint64 = map(ScalarType, (dt.uint8, dt.uint16, dt.uint32, dt.uint64))
float16, bfloat16, float32, float64 = map(ScalarType, (dt.float16, dt.bfloat16, dt.float32, dt.float64))
complex64, complex128 = ScalarType(dt.complex64), ScalarType(dt.complex128)
# The narrow ml_dtypes types, by JAX's names.
(float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz, float8_e4m3fnuz, float8_e5m2fnuz, float8_e3m4, float8_e4m3,
 float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn) = map(ScalarType, dt.NARROW_FLOATS)
int1, int2, int4 = map(ScalarType, dt.NARROW_INTS)
uint1, uint2, uint4 = map(ScalarType, dt.NARROW_UINTS)
# Names numpy users reach for; like JAX's, they mean the 64-bit types (narrowed without x64).
int_, uint, float_, complex_ = int64, uint64, float64, complex128
dtype = np.dtype
float0 = dt.float0
# Abstract scalar kinds for issubdtype, as in numpy.
generic, number, inexact, floating, complexfloating = (
    np.generic, np.number, np.inexact, np.floating, np.complexfloating)
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger

_PYTHON_TYPE_DTYPES = {bool: dt.bool_, int: dt.int64, float: dt.float64, complex: dt.complex128}


def to_dtype(d) -> np.dtype:
    """A numpy dtype from anything dtype-like (a ScalarType, a Python type, a name, a dtype)."""
    if isinstance(d, ScalarType):
        return d.dtype
    if isinstance(d, type) and d in _PYTHON_TYPE_DTYPES:
        return dt.canonicalize_dtype(_PYTHON_TYPE_DTYPES[d])
    try:
        return np.dtype(d)
    except TypeError as e:
        raise TypeError(f"{d!r} is not a valid dtype: expected a dtype, a dtype name, a jnp "
                        "scalar type (jnp.float32) or a Python type (int, float, bool, complex)") from e


def typed(x) -> tuple[np.dtype, bool]:
    """``(dtype, weak_type)`` of a value or dtype-like, as the promotion lattice sees it.

    Python scalars and the Python types int/float/complex are weak; values
    report their aval; anything else is read as a dtype (strong).
    """
    if isinstance(x, type) and x in (int, float, complex):
        return dt.canonicalize_dtype(_PYTHON_TYPE_DTYPES[x]), True
    if x is bool:
        return dt.bool_, False
    if isinstance(x, (str, np.dtype, ScalarType, type)):
        d = to_dtype(x)
        if d not in dt.ALL_DTYPES:
            raise ValueError(f"dtype={d!r} is not a valid dtype for JAX type promotion.")
        return d, False
    aval = get_aval(x)
    return aval.dtype, aval.weak_type


def result_type(*args, return_weak_type_flag: bool = False):
    """JAX's ``jnp.result_type``: the dtype of combining ``args`` (values or dtypes)."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    types = list(map(typed, args))
    _check_strict(types)
    dtype_, weak = dt.promote_types(*types)
    return (dtype_, weak) if return_weak_type_flag else dtype_


def promote_types(a, b) -> np.dtype:
    """The join of dtypes ``a`` and ``b`` on the lattice, as JAX's: the Python types
    int/float/complex are weak (``promote_types(int8, int)`` is int8), and a join that stays
    weak gives the 64-bit type of its kind (``promote_types(int, float)`` is float64)."""
    types = [typed(a), typed(b)]
    _check_strict(types)
    dtype, weak = dt.promote_types(*types)
    return _PYTHON_TYPE_DTYPES[_PY_KIND[dtype.kind]] if weak else dtype


def _check_strict(types) -> None:
    """``jax_numpy_dtype_promotion='strict'`` applies to the user's ``result_type`` and
    ``promote_types`` too (not to the library's own calls)."""
    if dt.config.jax_numpy_dtype_promotion == "strict":
        from ._util import _check_promotions
        _check_promotions("promote_types", [ShapedArray((), d, w) for d, w in types], ranks=False)


_PY_KIND = {"i": int, "u": int, "f": float, "c": complex}


# numpy's abstract scalar classes: no dtype of their own, only a place in the type hierarchy
_ABSTRACT = (np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer, np.signedinteger,
             np.unsignedinteger, np.flexible, np.character)


def issubdtype(arg1, arg2) -> bool:
    if arg1 in _ABSTRACT:
        return isinstance(arg2, type) and issubclass(arg1, arg2)
    a = to_dtype(arg1)
    if isinstance(arg2, type) and issubclass(arg2, np.generic) and arg2 in (
            np.generic, np.number, np.inexact, np.floating, np.complexfloating,
            np.integer, np.signedinteger, np.unsignedinteger):
        # numpy sees ml_dtypes' types (bfloat16, float8_*, int4...) as voids: their kinds are ours
        kind = dt.kind(a)
        if a.isbuiltin == 2 and kind != "other":
            return arg2 in {"float": (np.generic, np.number, np.inexact, np.floating),
                            "int": (np.generic, np.number, np.integer, np.signedinteger),
                            "uint": (np.generic, np.number, np.integer, np.unsignedinteger)}[kind]
        return np.issubdtype(a, arg2)
    return a == to_dtype(arg2)


def isdtype(d, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    d = to_dtype(d)
    known = ("bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric")
    for k in kinds:
        if isinstance(k, str) and k not in known:
            raise ValueError(f"Unrecognized kind={k!r} expected one of {list(known)}, or a dtype.")
    checks = {"bool": dt.is_bool, "signed integer": dt.is_signed, "unsigned integer": dt.is_unsigned,
              "integral": dt.is_int, "real floating": dt.is_float, "complex floating": dt.is_complex,
              "numeric": lambda x: not dt.is_bool(x)}
    return any(checks[k](d) if isinstance(k, str) else d == to_dtype(k) for k in kinds)


def can_cast(from_, to, casting: str = "safe") -> bool:
    return np.can_cast(to_dtype(from_), to_dtype(to), casting=casting)


finfo, iinfo = dt.finfo, dt.iinfo
