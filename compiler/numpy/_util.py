"""What every jnp function needs: reading operands, JAX promotion, numpy broadcasting.

Operands are jaxprc values (tracers, device Arrays) or constants (Python
scalars, numpy arrays and scalars). Constants stay constants while they are
converted, so a traced ``x + 2.0`` records ``2.0`` as a literal, not an
equation. A weakly typed constant is a Python scalar when its dtype is the
default int/float/complex (what Python scalars trace as), else a converted value.
"""
from __future__ import annotations

import sys
from typing import Sequence

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ShapedArray
from jaxprc.lax import elementwise as ew
from jaxprc.ir.tracing import Tracer, get_aval, is_scalar_constant, user_source_info
from jaxprc.runtime import Array

_PY_KIND = {"b": bool, "i": int, "u": int, "f": float, "c": complex}
_VALUE_TYPES = (Tracer, Array)   # values already in jaxprc, as opposed to host constants
_INEXACT = frozenset(d for d in dt.ALL_DTYPES if dt.is_inexact(d))


def located(fn: str) -> str:
    """``fn`` and the user's ``file:line``, to begin an error message. Argument errors are found
    before any equation is recorded, so the message itself must say where the bad call is."""
    src = user_source_info()
    return f"{fn} (at {src})" if src else fn


def from_jax_array(x):
    """An object with ``__jax_array__`` as the array it gives: what jax.numpy's array
    constructors and argument conversions take it as (primitives refuse it, as in JAX)."""
    return x.__jax_array__() if hasattr(type(x), "__jax_array__") else x


def aval_of(x, fn: str = "") -> ShapedArray:
    try:
        return get_aval(x)
    except TypeError as e:
        if isinstance(x, (np.ndarray, np.generic)):     # an array of a dtype jaxprc cannot hold
            raise TypeError(f"{located(fn or 'jaxprc.numpy')}: {e}") from None
        raise TypeError(f"{located(fn or 'jaxprc.numpy')}: expected an array or a scalar, got {x!r} of type {type(x).__name__}. "
                        "jaxprc.numpy functions take jaxprc arrays, numpy arrays and Python scalars; "
                        "convert lists and tuples with jnp.asarray first.") from None


def is_constant(x) -> bool:
    """Python and numpy values (not yet inside jaxprc)."""
    return is_scalar_constant(x) or isinstance(x, np.ndarray)


def convert(x, dtype, weak: bool = False):
    """``x`` as ``dtype`` (weakly typed if ``weak``); constants are converted in numpy."""
    dtype = np.dtype(dtype)
    if is_scalar_constant(x):
        if type(x) is int:
            # as in JAX: the int must fit the default integer type; it then wraps to ``dtype``
            # (``uint16_array * -1`` multiplies by 65535)
            dt.check_int_range(x, dt.default_int_dtype() if dtype.kind in "iu" else dtype)
        value = np.asarray(x).astype(dtype)[()]
        if weak and dtype != dt.bool_:
            if dtype in (dt.default_int_dtype(), dt.default_float_dtype(), dt.default_complex_dtype()):
                return _PY_KIND[dtype.kind](value.item())
            # Python scalars trace as the default dtypes only: ~f16, ~bf16, ... need an equation.
            return ew.convert_element_type_p.bind(value, new_dtype=dtype, weak_type=True)
        return value
    if isinstance(x, np.ndarray):
        return x.astype(dtype, copy=False)
    a = aval_of(x)
    if a.dtype == dtype and a.weak_type == weak:
        return x
    return ew.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak)


def broadcast_shapes(*shapes: Sequence[int], fn: str = "broadcast_shapes") -> tuple[int, ...]:
    """numpy's broadcasting of shapes; a ValueError naming the shapes when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"{located(fn)}: shapes {', '.join(map(str, map(tuple, shapes)))} cannot be "
                             "broadcast together (numpy broadcasting: trailing dimensions must be "
                             "equal or 1)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to_shape(x, shape: Sequence[int]):
    """``x`` broadcast to ``shape`` with one explicit ``broadcast_in_dim`` (numpy's rules:
    leading dimensions are added, size-1 dimensions expand)."""
    shape = tuple(shape)
    a = aval_of(x)
    if a.shape == shape:
        return x
    lead = len(shape) - a.ndim
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(a.shape)):
        raise ValueError(f"{located('broadcast_to')}: cannot broadcast an array of shape {a.shape} "
                         f"to shape {shape}")
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


# Modules of jaxprc's numerical library: a promotion they ask for is theirs, not the user's.
_LIBRARY = ("jaxprc.numpy", "jaxprc.lax", "jaxprc.scipy", "jaxprc.nn", "jaxprc.random", "jaxprc.image",
            "jaxprc.experimental", "jaxprc.example_libraries")


def _asked_by_the_library() -> bool:
    """Whether the function promoting its operands was called by jaxprc's numerical library
    (directly, or through array operators and transformations) rather than by the user's code.
    The strict promotion modes police the user's implicit promotions only: JAX's own
    implementations broadcast and convert explicitly, so they never trip them."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    promoting = frame.f_globals.get("__name__") if frame is not None else None
    while frame is not None and frame.f_globals.get("__name__") == promoting:
        frame = frame.f_back          # the promoting function and its helpers
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "jaxprc" and not module.startswith("jaxprc."):
            return False              # the user's code
        if module.startswith(_LIBRARY) and not frame.f_code.co_name.startswith("__"):
            return True               # not an operator or a ufunc's __call__: the library itself
        frame = frame.f_back
    return False


def _check_promotions(fn: str, avals, ranks: bool = True) -> None:
    """The ``numpy_dtype_promotion('strict')`` and (with ``ranks``) ``numpy_rank_promotion('warn'/'raise')``
    checks, of the user's promotions only."""
    if dt.config.jax_numpy_dtype_promotion == "strict":
        strong = sorted({a.dtype.name for a in avals if not a.weak_type})
        if len(strong) > 1 and not _asked_by_the_library():
            raise dt.TypePromotionError(
                f"Input dtypes {tuple(strong)} have no available implicit dtype promotion path when "
                "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired output type, "
                "or set jax_numpy_dtype_promotion=standard.")
    mode = dt.config.jax_numpy_rank_promotion
    if ranks and mode != "allow" and len({a.ndim for a in avals if a.ndim}) > 1 and not _asked_by_the_library():
        msg = (f"Operands could not be broadcast together for {fn} on shapes "
               f"{' '.join(str(a.shape) for a in avals)} and with the config option "
               f"jax_numpy_rank_promotion='{mode}'.")
        if mode == "raise":
            raise ValueError(msg)
        import warnings
        warnings.warn(msg, stacklevel=3)


def promote(fn: str, *args, to_inexact: bool = False, broadcast: bool = True):
    """Convert ``args`` to their common (dtype, weak type) and broadcast them to one shape.

    Returns ``(converted_args, dtype, weak)``. ``to_inexact``: integer and
    boolean results become the default float dtype (weakness kept), as
    jax.numpy's transcendental functions do. ``broadcast=False``: the dtypes only
    (JAX's promote_dtypes), the shapes left as they are.
    """
    if len(args) == 1 and type(args[0]) in _VALUE_TYPES:   # the common unary op: a dict-free path
        aval = args[0].aval
        if not to_inexact or aval.dtype in _INEXACT:
            return list(args), aval.dtype, aval.weak_type
    try:
        avals = [get_aval(a) for a in args]
    except TypeError:
        avals = [aval_of(a, fn) for a in args]   # raises, naming the function and the operand
    for a in avals:         # (a loop, not any(): no Python call per operation)
        if a.dtype == dt.float0:
            raise TypeError(f"Called {fn} with a float0 array. float0s do not support any operations by design because "
                            "they are not compatible with non-trivial vector spaces. No implicit dtype conversion is "
                            "done. You can use np.zeros_like(arr, dtype=np.float) to cast a float0 array to a regular "
                            "zeros array. \nIf you didn't expect to get a float0 you might have accidentally taken a "
                            "gradient with respect to an integer argument.")
    if args and avals.count(avals[0]) == len(avals) and all(isinstance(a, _VALUE_TYPES) for a in args):
        # Operands already in jaxprc sharing one type (the common eager case): nothing to do.
        # (Constants take the general path: their host dtype may still need canonicalising.)
        dtype, weak = avals[0].dtype, avals[0].weak_type
        if not to_inexact or dt.is_inexact(dtype):
            return list(args), dtype, weak
    for i, (x, a) in enumerate(zip(args, avals)):
        # JAX's jax.numpy functions are jitted: a Python int is parsed as their weak integer type
        # first, whatever it is combined with, and one beyond it is an OverflowError.
        if type(x) is int and not np.iinfo(a.dtype).min <= x <= np.iinfo(a.dtype).max:
            raise OverflowError("An overflow was encountered while parsing an argument to a jitted computation, "
                                f"whose argument path is operand {i} of {fn}. Got {type(x)} with value {x}")
    _check_promotions(fn, avals, ranks=broadcast)
    dtype, weak = dt.promote_types(*((a.dtype, a.weak_type) for a in avals))
    if to_inexact and not dt.is_inexact(dtype):
        dtype = dt.to_inexact_dtype(dtype)
    if not broadcast:
        return [convert(x, dtype, weak) for x in args], dtype, weak
    try:
        shape = broadcast_shapes(*(a.shape for a in avals), fn=fn)
    except ValueError:
        # As JAX: operands of different ranks fail in rank promotion (a ValueError); operands of
        # one rank reach the operation itself, whose error is a TypeError.
        shapes = [tuple(a.shape) for a in avals]
        src = user_source_info()
        where = f" (at {src})" if src else ""
        if len({len(s) for s in shapes}) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}{where}") from None
        raise TypeError(f"{fn} got incompatible shapes for broadcasting: "
                        f"{', '.join(map(str, shapes))}.{where}") from None
    out = [broadcast_to_shape(convert(x, dtype, weak), shape) for x in args]
    return out, dtype, weak


def canonical_axis(axis: int, ndim: int, fn: str = "") -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{fn}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def canonical_axes(axis, ndim: int, fn: str = "") -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence of ints) as sorted non-negative axes; None means all."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted(canonical_axis(int(a), ndim, fn) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}: repeated axis in {axis!r}")
    return out
