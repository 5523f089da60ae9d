"""Array creation: array, asarray, zeros, ones, full, empty, *_like, arange, linspace, eye, identity, tri."""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import DimExpr, canonicalize_shape, is_symbolic_dim, non_negative_dim
from jaxprc.lax import elementwise as ew
from jaxprc.ir.tracing import get_aval
from jaxprc.key_moves import array_of_keys, full_keys, holds_keys, is_key_dtype

from ._dtypes import to_dtype
from ._util import aval_of, broadcast_to_shape, convert, from_jax_array, is_constant


def _is_constant_tree(x) -> bool:
    if isinstance(x, (list, tuple)):
        return all(map(_is_constant_tree, x))
    return is_constant(x)


def _constant_array(value, dtype, weak: bool):
    """A jaxprc Array holding a Python/numpy constant (a concrete value, also inside a trace)."""
    from jaxprc import runtime
    return runtime.device_put(np.asarray(value).astype(dtype, copy=False), weak_type=weak)


def _python_int_array(obj) -> np.ndarray:
    """``np.asarray(obj)``; Python ints beyond int64/uint64 raise OverflowError, as in JAX (numpy
    would make an object array of them)."""
    value = np.asarray(obj)
    if value.dtype.kind == "O" and value.size and all(type(v) is int for v in value.flat):
        big = max(value.flat, key=abs)
        raise OverflowError(f"Python int {big} too large to convert to {dt.default_int_dtype().name}")
    return value


def array(object, dtype=None, copy: bool = True, order: str | None = "K", ndmin: int = 0, *, device=None,
          out_sharding=None):
    """An array from an array, a scalar, or (nested) lists of them; like jax.numpy.array (on
    ``device``, or laid out as ``out_sharding`` says)."""
    if order is not None and order != "K":
        raise NotImplementedError("Only implemented for order='K'")
    if object is None:
        raise ValueError("None is not a valid value for jnp.array")
    if holds_keys(object):
        return _placed(array_of_keys(object, dtype), device, out_sharding)
    dtype = None if dtype is None else dt.canonicalize_dtype(to_dtype(dtype))
    object = from_jax_array(object)
    if isinstance(object, (list, tuple)) and not _is_constant_tree(object):
        from .shape_ops import stack
        from ._dtypes import result_type
        parts = [asarray(o) for o in object]   # stacking copies already
        out = stack([convert(p, dtype or result_type(*parts)) for p in parts])
    elif not is_constant(object) and not isinstance(object, (list, tuple)):
        aval_of(object, "array")          # a clear error for non-array objects
        # A copy is a new value, as in JAX: donating the original later must not delete it.
        out = ew.copy_p.bind(object) if copy else object
        out = out if dtype is None else convert(out, dtype, False)
    else:
        aval = get_aval(object) if not isinstance(object, (list, tuple)) else None
        weak = dtype is None and aval is not None and aval.weak_type
        value = _python_int_array(object)
        if value.dtype.kind == "O":
            raise TypeError(f"array: cannot make an array from {object!r}")
        from_python_ints = value.dtype.kind in "iu" and (type(object) is int or isinstance(object, (list, tuple)))
        if dtype is None and aval is None and from_python_ints:
            dtype = dt.default_int_dtype()   # Python ints are signed, even where numpy chose uint64
        dtype = dtype or (aval.dtype if aval is not None else dt.canonicalize_dtype(value.dtype))
        if from_python_ints:
            dt.check_int_range(value, dtype)
        out = _constant_array(value, dtype, weak)
    aval = aval_of(out)
    if aval.ndim < ndmin:
        out = lax.broadcast_in_dim(out, (1,) * (ndmin - aval.ndim) + aval.shape,
                                   tuple(range(ndmin - aval.ndim, ndmin)))
    return _placed(out, device, out_sharding)


def as_array(a, fn: str):
    """The operand ``a`` of ``fn`` as a jaxprc array; a TypeError naming ``fn`` if it is none."""
    a = from_jax_array(a)
    aval_of(a, fn)
    return asarray(a)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """``a`` as a jaxprc array; jaxprc arrays of the right dtype are returned as they are (unless
    ``copy=True``)."""
    if out_sharding is not None and isinstance(a, np.ndarray) and (dtype is None or to_dtype(dtype) == a.dtype):
        out_sharding = None       # JAX 0.10.2 keeps a NumPy array it need not convert uncommitted, laid out as is
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device, out_sharding=out_sharding)


def _shape_tuple(shape, fn: str) -> tuple[int, ...]:
    """A shape argument as a tuple of ints: an int, or any sequence of ints (a numpy array too);
    symbolic dimensions stay as they are."""
    if is_symbolic_dim(shape):
        return (shape,)
    try:
        return (operator.index(shape),)
    except TypeError:
        pass
    try:
        return canonicalize_shape(shape)
    except TypeError:
        raise TypeError(f"{fn}: shape must be an int or a sequence of ints, got {shape!r}") from None


def _full(shape, fill_value, dtype, weak):
    fill = convert(fill_value, dtype, weak)
    if not shape and is_constant(fill):
        return _constant_array(fill, dtype, weak)
    return broadcast_to_shape(fill, shape)


def _placed(x, device, out_sharding, like=None):
    """``x`` laid out as ``out_sharding`` asks or on ``device``; a ``*_like`` result of ``like``'s
    shape takes ``like``'s sharding, as in JAX."""
    from jaxprc.lax.sharding_constraint import match_type_sharding, out_sharding_of
    if device is not None and out_sharding is not None:
        raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got {device=} and {out_sharding=}")
    if like is not None and get_aval(like).vma:      # varies over the manual axes its model does
        from jaxprc.lax.parallel import vary_like
        x = vary_like(x, get_aval(like))
    if out_sharding is not None:
        return out_sharding_of(x, out_sharding, "creation")
    if device is not None:
        from jaxprc.api import device_put
        return device_put(x, device)
    if like is not None and get_aval(like).sharding_in_type is not None and get_aval(x).shape == get_aval(like).shape:
        concrete = getattr(like, "sharding", None)
        return out_sharding_of(x, concrete, "creation") if hasattr(concrete, "spec") else match_type_sharding(
            x, get_aval(like).update(dtype=get_aval(x).dtype))
    return x


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    """An array of ``shape`` filled with ``fill_value`` (weakly typed if the fill is and no dtype is given)."""
    shape = _shape_tuple(shape, "full")
    if is_key_dtype(dtype) or (dtype is None and holds_keys(fill_value)):
        return full_keys(shape, fill_value, dtype if dtype is not None else fill_value.dtype)
    a = aval_of(fill_value, "full")
    if dtype is None:
        return _placed(_full(shape, fill_value, a.dtype, a.weak_type), device, out_sharding)
    return _placed(_full(shape, fill_value, dt.canonicalize_dtype(to_dtype(dtype)), False), device, out_sharding)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    return full(shape, 0, dtype if dtype is not None else dt.default_float_dtype(), device=device,
                out_sharding=out_sharding)


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    return full(shape, 1, dtype if dtype is not None else dt.default_float_dtype(), device=device,
                out_sharding=out_sharding)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    return zeros(shape, dtype, device=device, out_sharding=out_sharding)


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Like ``full`` with ``a``'s shape, dtype and sharding; keeps ``a``'s weak type when no dtype is given."""
    if holds_keys(a) or is_key_dtype(dtype):
        return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)
    aval = aval_of(a, "full_like")
    shape = aval.shape if shape is None else _shape_tuple(shape, "full_like")
    if dtype is None:
        out = _full(shape, fill_value, aval.dtype, aval.weak_type)
    else:
        out = _full(shape, fill_value, dt.canonicalize_dtype(to_dtype(dtype)), False)
    return _placed(out, device, out_sharding, like=a)


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    return full_like(a, 0, dtype, shape, device=device, out_sharding=out_sharding)


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    return full_like(a, 1, dtype, shape, device=device, out_sharding=out_sharding)


def empty_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    return full_like(a, 0, dtype, shape, device=device, out_sharding=out_sharding)


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """Evenly spaced values; the bounds must be concrete (as in JAX). One argument traces to ``iota``."""
    return _placed(_arange(start, stop, step, dtype), device, out_sharding)


def _arange(start, stop, step, dtype):
    if dtype is not None:
        dtype = dt.canonicalize_dtype(to_dtype(dtype))
    if any(type(b) is DimExpr for b in (start, stop, step)):
        return _symbolic_arange(start, stop, step, dtype)
    if stop is None and step is None:
        if not isinstance(start, (float, np.floating)) and (dtype is None or dt.is_int(dtype)):
            n = operator.index(start)
            return lax.iota(dtype or dt.default_int_dtype(), max(n, 0))
    bounds = [np.asarray(b) for b in (start, stop, step) if b is not None]
    value = np.arange(*bounds)
    return _constant_array(value, dtype or dt.canonicalize_dtype(value.dtype), False)


def _symbolic_arange(start, stop, step, dtype):
    """``arange`` with a symbolic bound (``jnp.arange(x.shape[0])``): an iota, scaled and shifted.
    Its length is a dimension, so the bounds must be dimensions (ints or symbolic), the step a
    positive int."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else operator.index(step)
    if step <= 0:
        raise ValueError(f"arange: a symbolic bound needs a positive integer step, got {step}")
    dtype = dtype or dt.default_int_dtype()
    values = lax.iota(dtype, non_negative_dim((stop - start + step - 1) // step))
    if step != 1:
        values = values * convert(step, dtype, False)
    if not (type(start) is int and start == 0):
        values = values + convert(start, dtype, False)
    return values


def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype=None, axis: int = 0, *, device=None):
    """``num`` evenly spaced samples over [start, stop]; start/stop may be traced arrays."""
    out, step = _linspace(start, stop, num, endpoint, dtype, axis)
    out = _placed(out, device, None)
    return (out, step) if retstep else out


def _linspace(start, stop, num, endpoint, dtype, axis):
    from . import ufuncs as uf
    from .shape_ops import expand_dims
    # A symbolic ``num`` is accepted, as in JAX; its comparisons with 1 then need constraints.
    num = num if is_symbolic_dim(num) else operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    from ._dtypes import result_type
    out_dtype = dt.canonicalize_dtype(to_dtype(dtype)) if dtype is not None else None
    compute = result_type(start, stop, float)
    compute = dt.to_inexact_dtype(compute)
    start, stop = asarray(start, compute), asarray(stop, compute)
    bshape = aval_of(uf.add(start, stop)).shape
    start, stop = broadcast_to_shape(start, bshape), broadcast_to_shape(stop, bshape)
    axis = axis % (len(bshape) + 1)
    div = (num - 1) if endpoint else num
    if num > 1:
        # JAX's formula, so that the samples agree bit for bit: start * (1 - t) + stop * t with
        # t = i / div computed in the real dtype; the endpoint is ``stop`` itself.
        step = uf.divide(uf.subtract(stop, start), asarray(div, compute))
        real = dt.finfo(compute).dtype
        t = convert(uf.divide(lax.broadcasted_iota(real, bshape[:axis] + (div,) + bshape[axis:], axis),
                              asarray(div, real)), compute)
        out = uf.add(uf.multiply(expand_dims(start, axis), uf.subtract(asarray(1, compute), t)),
                     uf.multiply(expand_dims(stop, axis), t))
        if endpoint:
            out = lax.concatenate([out, expand_dims(stop, axis)], axis)
    elif num == 1:
        # One sample: the step is undefined with the endpoint (NaN, as in JAX).
        step = full((), np.nan, compute) if endpoint else uf.subtract(stop, start)
        out = expand_dims(start, axis)
    else:
        step = full((), np.nan, compute)
        out = zeros(bshape[:axis] + (0,) + bshape[axis:], compute)
    if out_dtype is not None:
        if dt.is_int(out_dtype):
            out = uf.floor(out)
        out = convert(out, out_dtype)
    return out, step


def eye(N: int, M: int | None = None, k: int = 0, dtype=None, *, device=None):
    """The 2-D identity (ones on the ``k``-th diagonal)."""
    return _placed(_eye(N, M, k, dtype), device, None)


def _eye(N, M, k, dtype):
    from . import ufuncs as uf
    N = N if is_symbolic_dim(N) else operator.index(N)
    M = N if M is None else M if is_symbolic_dim(M) else operator.index(M)
    dtype = dt.canonicalize_dtype(to_dtype(dtype)) if dtype is not None else dt.default_float_dtype()
    rows = lax.broadcasted_iota(dt.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dt.int32, (N, M), 1)
    return convert(uf.equal(uf.add(rows, operator.index(k)), cols), dtype)


def identity(n: int, dtype=None):
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype=None):
    """Ones at and below the ``k``-th diagonal."""
    from . import ufuncs as uf
    M = N if M is None else M
    dtype = dt.canonicalize_dtype(to_dtype(dtype)) if dtype is not None else dt.default_float_dtype()
    rows = lax.broadcasted_iota(dt.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dt.int32, (N, M), 1)
    return convert(uf.greater_equal(uf.add(rows, k), cols), dtype)
