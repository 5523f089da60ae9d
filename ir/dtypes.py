"""Dtypes of the IR, their short text names, canonicalization and JAX's promotion lattice.

Python scalars are *weakly typed*: they take the dtype of the array they meet
instead of widening it (``f16_array + 1.0`` stays float16). Promotion follows
JAX's lattice, not numpy's, so ``int32 + float16`` is float16 and ``uint64 +
int64`` is the default float.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .config import config  # jaxprc.config (one table of every option); x64 decides the defaults

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
# The tangent type of integer and boolean values, as in JAX: a zero-size void.
float0 = np.dtype([("float0", np.void, 0)])
# The type of XLA tokens (lax.create_token, lax.after_all): 0-d values that order side effects and
# hold no data. Printed ``token[]``; at a program's boundary they travel as booleans, like float0.
token = np.dtype([("token", np.void, 0)])
# The narrow ml_dtypes types JAX exports (8/6/4-bit floats, 1/2/4-bit integers): numpy sees them
# as voids, so their kinds come from these tuples, not from np.issubdtype.
NARROW_FLOAT_NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
                      "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
                      "float4_e2m1fn")
NARROW_INT_NAMES = ("int1", "int2", "int4")
NARROW_UINT_NAMES = ("uint1", "uint2", "uint4")
NARROW_FLOATS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in NARROW_FLOAT_NAMES)
NARROW_INTS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in NARROW_INT_NAMES)
NARROW_UINTS = tuple(np.dtype(getattr(ml_dtypes, n)) for n in NARROW_UINT_NAMES)

SHORT_NAMES = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128", float0: "float0", token: "token",
    # "f8e4m3fn" for float8_e4m3fn..., "i4" for int4, "u2" for uint2...
    **{d: d.name.replace("float", "f").replace("_", "") for d in NARROW_FLOATS},
    **{d: "i" + d.name[3:] for d in NARROW_INTS}, **{d: "u" + d.name[4:] for d in NARROW_UINTS},
}
FROM_SHORT_NAME = {v: k for k, v in SHORT_NAMES.items()}
ALL_DTYPES = tuple(SHORT_NAMES)


def short_name(dtype) -> str:
    return SHORT_NAMES[np.dtype(dtype)]


def _classify(dtype: np.dtype) -> str:
    if dtype == bool_:
        return "bool"
    if dtype == bfloat16 or dtype in NARROW_FLOATS or np.issubdtype(dtype, np.floating):
        return "float"
    if dtype in NARROW_INTS:
        return "int"
    if dtype in NARROW_UINTS:
        return "uint"
    if np.issubdtype(dtype, np.complexfloating):
        return "complex"
    if np.issubdtype(dtype, np.signedinteger):
        return "int"
    if np.issubdtype(dtype, np.unsignedinteger):
        return "uint"
    return "other"


# Typing rules ask for kinds on every equation; np.issubdtype is slow, so classify once.
_KINDS: dict = {d: _classify(d) for d in ALL_DTYPES}


def kind(dtype) -> str:
    """One of bool, int, uint, float, complex, other."""
    k = _KINDS.get(dtype)
    if k is None:
        d = np.dtype(dtype)
        k = _KINDS[dtype] = _KINDS.get(d) or _classify(d)
    return k


def is_float(dtype) -> bool:
    return kind(dtype) == "float"


def is_complex(dtype) -> bool:
    return kind(dtype) == "complex"


def is_inexact(dtype) -> bool:
    return kind(dtype) in ("float", "complex")


def is_int(dtype) -> bool:
    return kind(dtype) in ("int", "uint")


def is_signed(dtype) -> bool:
    return kind(dtype) == "int"


def is_unsigned(dtype) -> bool:
    return kind(dtype) == "uint"


def is_bool(dtype) -> bool:
    return kind(dtype) == "bool"


def finfo(dtype):
    d = np.dtype(dtype)
    return ml_dtypes.finfo(d) if d == bfloat16 or d in NARROW_FLOATS else np.finfo(d)


def bit_width(dtype) -> int:
    """Bits per element as XLA stores them (int4 and float4_e2m1fn: 4, float6_*: 6, bool: 8)."""
    d = np.dtype(dtype)
    if d in NARROW_FLOATS:
        return int(finfo(d).bits)
    if d in NARROW_INTS or d in NARROW_UINTS:
        return int(iinfo(d).bits)
    return 8 * d.itemsize


def supports_inf(dtype) -> bool:
    """Whether an inexact dtype has infinities (the fn/fnuz/fnu narrow floats have none)."""
    if not is_inexact(dtype):
        return False
    with np.errstate(invalid="ignore", over="ignore"):     # inf becomes NaN in those types
        return bool(np.isinf(np.asarray(np.inf, dtype).astype(np.complex128)))


def iinfo(dtype):
    d = np.dtype(dtype)
    return ml_dtypes.iinfo(d) if d in NARROW_INTS or d in NARROW_UINTS else np.iinfo(d)


class TypePromotionError(ValueError):
    """Raised when type promotion fails (as ``jax.dtypes.TypePromotionError``)."""

_NARROW = {float64: float32, int64: int32, uint64: uint32, complex128: complex64}


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype a value of ``dtype`` gets in jaxprc: 64-bit types narrow unless x64 is on."""
    dtype = np.dtype(dtype)
    if config.jax_enable_x64:
        return dtype
    return _NARROW.get(dtype, dtype)


def default_int_dtype() -> np.dtype:
    return canonicalize_dtype(int64)


def default_float_dtype() -> np.dtype:
    return canonicalize_dtype(float64)


def to_numeric_dtype(dtype) -> np.dtype:
    """The dtype jax.numpy's arithmetic computes booleans in: int32, with x64 on too (JAX's
    ``to_numeric_dtype``); other dtypes stay as they are."""
    dtype = np.dtype(dtype)
    return int32 if dtype == bool_ else dtype


def to_inexact_dtype(dtype) -> np.dtype:
    """The inexact dtype jax.numpy computes a (canonical) non-inexact ``dtype`` in, as JAX does:
    booleans and integers of up to 32 bits become float32 even with x64 on; only 64-bit
    integers (which exist with x64 on) become float64. Inexact dtypes stay as they are."""
    dtype = np.dtype(dtype)
    if is_inexact(dtype):
        return dtype
    return canonicalize_dtype(float64) if dtype in (int64, uint64) else float32


def default_complex_dtype() -> np.dtype:
    return canonicalize_dtype(complex128)


PYTHON_SCALAR_TYPES = (bool, int, float, complex)


def check_int_range(x, dtype) -> None:
    """An integer given as Python ints must fit the integer ``dtype`` it becomes: JAX raises
    OverflowError rather than wrap (``jnp.array(2**40)`` is not 0). ``x`` is an int or an
    integer numpy array made from Python ints."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":      # the narrow ml_dtypes integers wrap, as in JAX
        return
    info = np.iinfo(dtype)
    if np.ndim(x) == 0:
        lo = hi = int(x)
    elif np.size(x) == 0:
        return
    else:
        lo, hi = int(np.min(x)), int(np.max(x))
    bad = hi if hi > info.max else lo if lo < info.min else None
    if bad is not None:
        raise OverflowError(f"Python int {bad} too large to convert to {dtype.name}")


def python_scalar_dtype(x) -> np.dtype:
    """The (canonical) dtype of a Python scalar; it is weakly typed unless it is a bool."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int_dtype()
    if isinstance(x, float):
        return default_float_dtype()
    if isinstance(x, complex):
        return default_complex_dtype()
    raise TypeError(f"not a Python scalar: {x!r}")


# ------------------------------------------------------------ promotion lattice
# Nodes are dtypes plus the three weak kinds "i*", "f*", "c*" (Python int,
# float, complex). Edges point from a type to its immediate supertypes.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
# The narrow types sit alone above the weak kinds (JAX's lattice): a Python scalar takes their
# type, and nothing else joins them without an explicit cast.
_LATTICE = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8, *NARROW_INTS, *NARROW_UINTS],
    **{t: [] for t in NARROW_INTS + NARROW_UINTS + NARROW_FLOATS},
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64],
    int8: [int16], int16: [int32], int32: [int64],
    int64: [_WEAK_FLOAT], uint64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [*NARROW_FLOATS, bfloat16, float16, _WEAK_COMPLEX],
    bfloat16: [float32], float16: [float32],
    float32: [float64, complex64],
    float64: [complex128],
    _WEAK_COMPLEX: [complex64],
    complex64: [complex128],
    complex128: [],
}


def _upper_bounds():
    ub = {}

    def closure(node):
        if node not in ub:
            s = {node}
            for sup in _LATTICE[node]:
                s |= closure(sup)
            ub[node] = frozenset(s)
        return ub[node]

    for n in _LATTICE:
        closure(n)
    return ub


_UPPER = _upper_bounds()


def _lattice_node(dtype: np.dtype, weak: bool):
    if not weak or dtype == bool_:
        return dtype
    if is_complex(dtype):
        return _WEAK_COMPLEX
    if is_float(dtype):
        return _WEAK_FLOAT
    return _WEAK_INT


def _least_upper_bound(nodes):
    common = frozenset.intersection(*(_UPPER[n] for n in nodes))
    # The LUB is the element of the common upper bounds below all the others.
    for c in common:
        if all(c2 in _UPPER[c] for c2 in common):
            return c
    raise TypePromotionError(_no_promotion_message(nodes))


# Why a join fails (only a narrow type can make it fail), in JAX's words.
_NARROW_FAMILIES = (
    (lambda d: d.name.startswith("float8"), "8-bit floats do not", "float32"),
    (lambda d: d.name.startswith("float6"), "6-bit floats do not", "float32"),
    (lambda d: d.name.startswith("float4"), "4-bit floats do not", "float32"),
    (lambda d: d in NARROW_INTS or d in NARROW_UINTS, "1-bit, 2-bit and 4-bit integers do not", "int32"))


def _no_promotion_message(nodes) -> str:
    names = tuple({_WEAK_INT: "int", _WEAK_FLOAT: "float", _WEAK_COMPLEX: "complex"}.get(n) or str(n)
                  for n in nodes)
    head = f"Input dtypes {names} have no available implicit dtype promotion path."
    dtypes_ = [n for n in nodes if isinstance(n, np.dtype)]
    for member, what, cast in _NARROW_FAMILIES:
        if any(member(d) for d in dtypes_):
            return (f"{head} To avoid unintended promotion, {what} support implicit promotion. If you'd "
                    f"like your inputs to be promoted to another type, you can do so explicitly using "
                    f"e.g. x.astype('{cast}')")
    return f"{head} Try explicitly casting inputs to the desired output type."


def _node_dtype(node) -> np.dtype:
    return {_WEAK_INT: default_int_dtype, _WEAK_FLOAT: default_float_dtype,
            _WEAK_COMPLEX: default_complex_dtype}.get(node, lambda: node)()


def promote_types(*typed) -> tuple[np.dtype, bool]:
    """JAX's result type of ``(dtype, weak_type)`` pairs: returns ``(dtype, weak_type)``."""
    dtypes = [np.dtype(d) for d, _ in typed]
    weaks = [w for _, w in typed]
    if len(typed) == 1:
        return canonicalize_dtype(dtypes[0]), weaks[0]
    if len(set(dtypes)) == 1 and not all(weaks):
        return canonicalize_dtype(dtypes[0]), False
    if all(weaks):
        lub = _least_upper_bound(tuple(dict.fromkeys(_lattice_node(d, False) for d in dtypes)))
        return canonicalize_dtype(_node_dtype(lub)), True
    lub = _least_upper_bound(tuple(dict.fromkeys(_lattice_node(d, w) for d, w in zip(dtypes, weaks))))
    weak = lub in (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX)
    return canonicalize_dtype(_node_dtype(lub)), weak
