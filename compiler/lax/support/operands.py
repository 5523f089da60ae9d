"""Operand normalisation shared by the builders of every primitive family.

A builder (``lax.add``, ``lax.reduce_sum``, ...) normalises its arguments
before binding: negative axes, lists to tuples, and Python scalars. Binary
ops require equal dtypes, as in JAX: a Python scalar operand has its default
dtype (weakly typed), so the user's ``lax.add(f16_array, 1.0)`` or
``lax.max(f32_array, 0)`` is a TypeError as in JAX. jaxprc's own library keeps one
convenience: where it calls a builder, a Python scalar takes the dtype of the
other operands when that dtype can hold its kind (its rules write ``mul(t, 2.0)``
for every float dtype, where JAX's write typed constants). Rank-0 operands are
broadcast to the others' shape with ``broadcast_in_dim``.
"""
from __future__ import annotations

import sys

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Literal, ShapedArray
from jaxprc.ir.shape_poly import InconclusiveDimensionOperation, canonicalize_shape
from jaxprc.ir.tracing import current_builder, get_aval

_PY_SCALARS = (bool, int, float, complex)


def aval(x) -> ShapedArray:
    return x.aval if isinstance(x, Literal) else get_aval(x)


def is_py_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def canonical_axis(axis: int, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else axis


def canonical_axes(axes, ndim: int) -> tuple[int, ...]:
    return tuple(canonical_axis(a, ndim) for a in axes)


def ints(xs) -> tuple[int, ...]:
    """Sizes or axes as Python ints; symbolic dimensions (sizes) stay as they are."""
    try:
        return tuple(int(x) for x in xs)
    except InconclusiveDimensionOperation:
        return canonicalize_shape(xs)


def scalar_of_dtype(x, dtype, weak: bool):
    """A scalar constant of ``dtype``: a Literal inside a trace, a converted value outside."""
    value = np.asarray(x, dtype=dtype)[()]
    if current_builder() is not None:
        return Literal(value, ShapedArray((), dtype, weak))
    if weak:   # keep the weak bit on the eager value (a plain numpy scalar would lose it)
        return lax.convert_element_type_p.bind(value, new_dtype=np.dtype(dtype), weak_type=True)
    return value


# The builders users call (lax.add, lax.clamp, ...): frames to look through for their caller.
_BUILDER_CODES: set = set()


def builder(fn):
    """Register ``fn`` as a builder users call, so its caller decides how Python scalars convert."""
    _BUILDER_CODES.add(fn.__code__)
    return fn


def _called_by_user() -> bool:
    """Whether the builder converting Python scalars was called by the user's code (not jaxprc's)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code in _BUILDER_CODES or frame.f_globals.get("__name__") == __name__):
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return module != "jaxprc" and not module.startswith("jaxprc.")


def match_python_scalars(name: str, args):
    """Convert Python scalar operands: to their default dtypes for the user (as JAX), to the
    typed operands' dtype for jaxprc's library (see the module docstring)."""
    typed = [aval(a) for a in args if not is_py_scalar(a)]
    if len(typed) == len(args):
        return list(args)
    if typed:
        dtype = typed[0].dtype
    else:       # Python scalars only: each has its default dtype, and these must agree (as in JAX)
        dtype = dt.python_scalar_dtype(args[0])
    if any(is_py_scalar(a) and dt.python_scalar_dtype(a) != dtype for a in args) and _called_by_user() \
            and not (name == "pow" and type(args[1]) is int and not is_py_scalar(args[0])):
        # as JAX: each scalar has its default dtype, and the primitive's typing rule reports the mismatch
        # (pow alone takes an integer exponent: lax.pow(x, 2) is valid)
        return [scalar_of_dtype(a, dt.python_scalar_dtype(a), not isinstance(a, bool)) if is_py_scalar(a) else a
                for a in args]
    out = []
    for a in args:
        if not is_py_scalar(a):
            out.append(a)
            continue
        weak = not isinstance(a, bool)
        kind = (dt.python_scalar_dtype(a), weak)
        # a bool is no number to lax (JAX: add(i32_array, True) is a TypeError)
        if dt.promote_types((dtype, False), kind)[0] != dtype or (not weak and dtype != np.bool_) or \
                (not typed and kind[0] != dtype):
            raise TypeError(_scalar_mismatch(name, args, a, dtype, typed))
        out.append(scalar_of_dtype(a, dtype, weak))
    return out


def _scalar_mismatch(name, args, scalar, dtype, typed) -> str:
    """JAX's words (the operands' dtypes, a Python scalar's being its default one), then ours."""
    from ..elementwise import _PROMOTING      # the family above these helpers names its promoting twins
    dtypes = ", ".join((dt.python_scalar_dtype(a) if is_py_scalar(a) else aval(a).dtype).name for a in args)
    tip = "" if name not in _PROMOTING else (f" (Tip: jnp.{_PROMOTING[name]} is a similar function that does "
                                             "automatic type promotion on inputs).")
    return (f"lax.{name} requires arguments to have the same dtypes, got {dtypes}.{tip} The Python scalar "
            f"{scalar!r} cannot take the dtype {dtype.name} of the other operands"
            + (f" ({', '.join(t.str_short() for t in typed)})." if typed else "."))


def broadcast_rank0(args):
    """Broadcast rank-0 operands to the shape of the others (lax's only implicit broadcasting)."""
    shapes = [aval(a).shape for a in args]
    target = next((s for s in shapes if s != ()), None)
    if target is None:
        return list(args)
    return [lax.broadcast_in_dim(a, target, ()) if s == () else a for a, s in zip(args, shapes)]


def broadcast_size1(args):
    """Operands of equal rank broadcast where their sizes are 1 (JAX's binary ops accept
    ``(3, 1)`` with ``(1, 4)``); other mismatches are left for the typing rule to report."""
    shapes = [aval(a).shape for a in args]
    if len(set(shapes)) <= 1 or len({len(s) for s in shapes}) != 1:
        return list(args)
    columns = list(zip(*shapes))
    if any(len(set(sizes) - {1}) > 1 for sizes in columns):
        return list(args)
    target = tuple(next(iter(set(sizes) - {1}), 1) for sizes in columns)   # (0,) with (1,) is (0,)
    out = []
    for a, s in zip(args, shapes):
        if s == target:
            out.append(a)
            continue
        kept = [d for d in range(len(s)) if s[d] == target[d]]
        squeezed = lax.reshape(a, [s[d] for d in kept])
        out.append(lax.broadcast_in_dim(squeezed, target, kept))
    return out


def nary(prim, name: str, *args, **params):
    shape = None
    for a in args:          # the common case, typed operands of one shape: nothing to normalise
        if type(a) in _PY_SCALARS:
            break
        s = aval(a).shape
        if shape is None:
            shape = s
        elif s != shape:
            break
    else:
        return prim.bind(*args, **params)
    args = broadcast_size1(broadcast_rank0(match_python_scalars(name, args)))
    return prim.bind(*args, **params)
