"""Dtypes of the IR, their short text names, canonicalization and JAX's promotion lattice.

Python scalars are *weakly typed*: they take the dtype of the array they meet
instead of widening it (``f16_array + 1.0`` stays float16). Promotion follows
JAX's lattice, not numpy's, so ``int32 + float16`` is float16 and ``uint64 +
int64`` is the default float.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
# The tangent type of integer and boolean values, as in JAX: a zero-size void.
float0 = np.dtype([("float0", np.void, 0)])

SHORT_NAMES = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128", float0: "float0",
}
FROM_SHORT_NAME = {v: k for k, v in SHORT_NAMES.items()}
ALL_DTYPES = tuple(SHORT_NAMES)


def short_name(dtype) -> str:
    return SHORT_NAMES[np.dtype(dtype)]


def _classify(dtype: np.dtype) -> str:
    if dtype == bool_:
        return "bool"
    if dtype == bfloat16 or np.issubdtype(dtype, np.floating):
        return "float"
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
    return ml_dtypes.finfo(dtype) if np.dtype(dtype) == bfloat16 else np.finfo(dtype)


def iinfo(dtype):
    return np.iinfo(dtype)


# ---------------------------------------------------------------- x64 switch

def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


class Config:
    """``jaxprc.config``: the flags JAX users set, and jaxprc's own.

    ``jax_enable_x64`` (env ``JAX_ENABLE_X64``) changes semantics: 64-bit types.
    ``jaxprc_verify_passes`` (env ``JAXPRC_VERIFY_PASSES``) makes the pass pipelines (and the
    transformations' passes) verify the program after each pass; off by default, for speed.
    ``jaxprc_compilation_cache_dir`` (env ``JAXPRC_COMPILATION_CACHE_DIR``): the directory of the
    persistent compilation cache (runtime/compile_cache.py); None (the default) turns it off.
    ``jaxprc_cpp_dispatch`` (env ``JAXPRC_CPP_DISPATCH``, on by default): cached jit calls and eager
    ops run through jaxlib's C++ dispatch (compiler/cpp_dispatch.py); off, through Python only.
    """

    _BOOL_FLAGS = ("jax_enable_x64", "jaxprc_verify_passes", "jax_debug_nans", "jax_debug_infs",
                   "jax_disable_jit", "jaxprc_cpp_dispatch")

    def __init__(self):
        self.jax_enable_x64 = _env_flag("JAX_ENABLE_X64")
        self.jaxprc_verify_passes = _env_flag("JAXPRC_VERIFY_PASSES")
        # Checked by eager ops and jit calls (jaxprc.debug_nans / debug_infs / disable_jit).
        self.jax_debug_nans = _env_flag("JAX_DEBUG_NANS")
        self.jax_debug_infs = _env_flag("JAX_DEBUG_INFS")
        self.jax_disable_jit = _env_flag("JAX_DISABLE_JIT")
        self.jaxprc_compilation_cache_dir = os.environ.get("JAXPRC_COMPILATION_CACHE_DIR") or None
        self.jaxprc_cpp_dispatch = os.environ.get("JAXPRC_CPP_DISPATCH", "1").strip().lower() not in (
            "0", "false", "no", "off")

    # Called with (name, value) after each option is set: jaxlib's C++ jit dispatch mirrors the
    # options that decide whether a cached executable may run (compiler/cpp_dispatch.py).
    listeners: list = []

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        for listener in Config.listeners:
            listener(name, value)

    def update(self, name: str, value) -> None:
        if not hasattr(self, name):
            raise AttributeError(f"Unrecognized config option: {name!r}")
        setattr(self, name, bool(value) if name in self._BOOL_FLAGS else value)

    def read(self, name: str):
        return getattr(self, name)

    @property
    def x64_enabled(self) -> bool:
        return self.jax_enable_x64


config = Config()
config.jax_numpy_dtype_promotion = "standard"   # or "strict" (jaxprc.numpy_dtype_promotion)
config.jax_numpy_rank_promotion = "allow"       # or "warn" / "raise" (jaxprc.numpy_rank_promotion)
config.jax_default_matmul_precision = None      # a Precision for dots that name none


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


def default_complex_dtype() -> np.dtype:
    return canonicalize_dtype(complex128)


PYTHON_SCALAR_TYPES = (bool, int, float, complex)


def check_int_range(x, dtype) -> None:
    """An integer given as Python ints must fit the integer ``dtype`` it becomes: JAX raises
    OverflowError rather than wrap (``jnp.array(2**40)`` is not 0). ``x`` is an int or an
    integer numpy array made from Python ints."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
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
_LATTICE = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64],
    int8: [int16], int16: [int32], int32: [int64],
    int64: [_WEAK_FLOAT], uint64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [bfloat16, float16, _WEAK_COMPLEX],
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
    raise TypeError(f"no common type for {sorted(map(str, nodes))}")


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
        lub = _least_upper_bound({_lattice_node(d, False) for d in dtypes})
        return canonicalize_dtype(_node_dtype(lub)), True
    lub = _least_upper_bound({_lattice_node(d, w) for d, w in zip(dtypes, weaks)})
    weak = lub in (_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX)
    return canonicalize_dtype(_node_dtype(lub)), weak
