"""Shape manipulation: reshape, transpose, squeeze, expand_dims, joining, splitting, tiling, flips, rolls, padding."""
from __future__ import annotations

import math
import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import InconclusiveDimensionOperation, canonicalize_shape, is_symbolic_dim
from jaxprc.key_moves import holds_keys

from .creation import as_array
from ._util import (aval_of, broadcast_shapes, broadcast_to_shape, canonical_axes, canonical_axis, convert,
                    located)


def _shaped(a, fn: str):
    """What ``ndim``/``shape``/``size`` read: the aval, or a key array itself (shape without key words)."""
    return a if holds_keys(a) else aval_of(a, fn)


def ndim(a) -> int:
    return _shaped(a, "ndim").ndim


def shape(a) -> tuple[int, ...]:
    return _shaped(a, "shape").shape


def size(a, axis=None) -> int:
    aval = _shaped(a, "size")
    return aval.size if axis is None else aval.shape[axis]


def _resolve_shape(newshape, size: int, old) -> tuple[int, ...]:
    newshape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(newshape)
    newshape = canonicalize_shape(newshape)
    unknown = [i for i, d in enumerate(newshape) if type(d) is int and d == -1]
    known = math.prod(d for i, d in enumerate(newshape) if i not in unknown)
    if len(unknown) > 1 or any(d < -1 for d in newshape):
        raise ValueError(f"reshape: invalid new shape {newshape} (at most one -1)")
    if unknown:
        if known == 0 or size % known:
            raise TypeError(f"{located('reshape')}: cannot reshape an array of shape {old} (size {size}) "
                            f"into shape {newshape}")
        newshape = tuple(size // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != size:
        raise TypeError(f"{located('reshape')}: cannot reshape an array of shape {old} (size {size}) "
                        f"into shape {newshape}")
    return newshape


def reshape(a, shape=None, order="C", *, newshape=None, copy=None, out_sharding=None):
    """``a`` with a new shape (one dimension may be -1), read and written in row-major
    (``order="C"``) or column-major (``order="F"``) order; ``out_sharding``: the result's layout."""
    if order not in ("C", "F"):
        raise NotImplementedError(f"reshape: order={order!r} is not supported (only 'C' and 'F')")
    shape = newshape if shape is None else shape
    a = as_array(a, "reshape")
    aval = aval_of(a)
    new = _resolve_shape(shape, aval.size, aval.shape)
    if order == "F" and new != aval.shape:   # column-major is row-major on the reversed axes
        return transpose(lax.reshape(transpose(a), new[::-1]))
    if out_sharding is not None:
        return lax.reshape(a, new, out_sharding=out_sharding)
    return a if new == aval.shape else lax.reshape(a, new)


def ravel(a, order="C"):
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    a = as_array(a, "transpose")
    n = aval_of(a).ndim
    perm = tuple(range(n))[::-1] if axes is None else tuple(canonical_axis(int(i), n, "transpose") for i in axes)
    if sorted(perm) != list(range(n)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {n} dimensions")
    return a if perm == tuple(range(n)) else lax.transpose(a, perm)


def permute_dims(a, axes):
    return transpose(a, axes)


def matrix_transpose(x):
    n = ndim(x)
    return swapaxes(x, n - 2, n - 1)


def swapaxes(a, axis1, axis2):
    a = as_array(a, "swapaxes")
    n = aval_of(a).ndim
    perm = list(range(n))
    i, j = canonical_axis(axis1, n, "swapaxes"), canonical_axis(axis2, n, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    a = as_array(a, "moveaxis")
    n = aval_of(a).ndim
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of elements")
    src = [canonical_axis(s, n, "moveaxis") for s in src]
    dst = [canonical_axis(d, n, "moveaxis") for d in dst]
    perm = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(a, perm)


def squeeze(a, axis=None):
    a = as_array(a, "squeeze")
    shp = aval_of(a).shape
    if axis is None and any(is_symbolic_dim(d) for d in shp):
        # a symbolic dimension may or may not be 1: the rank of the result is unknown (JAX's error)
        raise ValueError("jnp.squeeze with axis=None is not supported with shape polymorphism")
    axes = tuple(i for i, d in enumerate(shp) if d == 1) if axis is None else canonical_axes(axis, len(shp), "squeeze")
    for i in axes:
        if shp[i] != 1:
            raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal "
                             f"to one (axis {i} of shape {shp})")
    return lax.squeeze(a, axes) if axes else a


def expand_dims(a, axis):
    a = as_array(a, "expand_dims")
    n = aval_of(a).ndim
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return lax.expand_dims(a, canonical_axes(axes, n + len(axes), "expand_dims"))


def atleast_1d(*arys):
    outs = [reshape(a, (1,)) if ndim(a) == 0 else as_array(a, "atleast_1d") for a in arys]
    return outs[0] if len(outs) == 1 else outs


def atleast_2d(*arys):
    def one(a):
        a = as_array(a, "atleast_2d")
        return lax.broadcast_to_rank(a, 2) if ndim(a) < 2 else a
    outs = [one(a) for a in arys]
    return outs[0] if len(outs) == 1 else outs


def atleast_3d(*arys):
    def one(a):
        a = as_array(a, "atleast_3d")
        n = ndim(a)
        if n == 0:
            return reshape(a, (1, 1, 1))
        if n == 1:
            return expand_dims(expand_dims(a, 0), 2)
        return expand_dims(a, 2) if n == 2 else a
    outs = [one(a) for a in arys]
    return outs[0] if len(outs) == 1 else outs


def _promote_all(arrays, fn):
    from ._dtypes import result_type
    arrays = [as_array(a, fn) for a in arrays]
    if not arrays:
        raise ValueError(f"{fn}: need at least one array")
    dtype, weak = result_type(*arrays, return_weak_type_flag=True)
    return [convert(a, dtype, weak) for a in arrays]


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing axis (flattened first when ``axis`` is None), promoting dtypes."""
    arrays = _promote_all(arrays, "concatenate")
    if dtype is not None:
        from ._dtypes import to_dtype
        arrays = [convert(a, dt.canonicalize_dtype(to_dtype(dtype))) for a in arrays]
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    n = aval_of(arrays[0]).ndim
    if n == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = canonical_axis(axis, n, "concatenate")
    shapes = [aval_of(a).shape for a in arrays]
    for s in shapes:
        if len(s) != n or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
            raise TypeError(f"{located('concatenate')}: all dimensions but axis {axis} must match, got shapes "
                             f"{', '.join(map(str, shapes))}")
    return arrays[0] if len(arrays) == 1 else lax.concatenate(arrays, axis)


concat = concatenate


def stack(arrays, axis=0, dtype=None):
    arrays = _promote_all(arrays, "stack")
    shapes = {aval_of(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"{located('stack')}: all input arrays must have the same shape, got {sorted(shapes)}")
    axis = canonical_axis(axis, aval_of(arrays[0]).ndim + 1, "stack")
    return concatenate([expand_dims(a, axis) for a in arrays], axis, dtype)


def hstack(tup, dtype=None):
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if ndim(arrs[0]) == 1 else 1, dtype)


def vstack(tup, dtype=None):
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


def dstack(tup, dtype=None):
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    arrs = [reshape(a, (-1, 1)) if ndim(a) < 2 else a for a in tup]
    return concatenate(arrs, 1)


def _split_points(n: int, indices_or_sections, fn: str, exact: bool):
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"{fn}: number of sections must be positive, got {sections}")
        if exact and n % sections:
            raise ValueError(f"{fn}: array split does not result in an equal division "
                             f"({n} elements into {sections} sections)")
        size, extra = divmod(n, sections)
        sizes = [size + 1] * extra + [size] * (sections - extra)
        return list(np.cumsum([0] + sizes))
    points = [0] + [operator.index(i) for i in indices_or_sections] + [n]
    sizes = np.diff(points).tolist()
    if any(size < 0 for size in sizes):
        # as JAX (numpy would count negative indices from the end and clip the rest)
        raise ValueError(f"{fn}: split indices {points[1:-1]} must be nondecreasing and within the "
                         f"axis of size {n} (sizes passed to split must be nonnegative, got {sizes})")
    return points


def split(ary, indices_or_sections, axis=0):
    """Split into sub-arrays along ``axis`` at static indices or into equal sections."""
    return _split(ary, indices_or_sections, axis, "split", exact=True)


def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "array_split", exact=False)


def _split(ary, indices_or_sections, axis, fn, exact):
    ary = as_array(ary, fn)
    shp = aval_of(ary).shape
    axis = canonical_axis(axis, len(shp), fn)
    points = _split_points(shp[axis], indices_or_sections, fn, exact)
    out = []
    for lo, hi in zip(points[:-1], points[1:]):
        out.append(lax.slice_in_dim(ary, *(p if is_symbolic_dim(p) else int(p) for p in (lo, hi)), 1, axis))
    return out


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0 if ndim(ary) == 1 else 1)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0)


def broadcast_to(array, shape):
    array = as_array(array, "broadcast_to")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return broadcast_to_shape(array, shape)


def broadcast_arrays(*args):
    shp = broadcast_shapes(*(aval_of(a, "broadcast_arrays").shape for a in args), fn="broadcast_arrays")
    return [broadcast_to(a, shp) for a in args]


def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis."""
    A = as_array(A, "tile")
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    shp = aval_of(A).shape
    n = max(len(reps), len(shp))
    reps = (1,) * (n - len(reps)) + reps
    shp = (1,) * (n - len(shp)) + shp
    A = reshape(A, shp)
    # Broadcast to (r0, s0, r1, s1, ...) then merge each pair.
    interleaved = tuple(x for pair in zip(reps, shp) for x in pair)
    b = lax.broadcast_in_dim(A, interleaved, tuple(range(1, 2 * n, 2)))
    return reshape(b, tuple(r * s for r, s in zip(reps, shp)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat each element ``repeats`` times (a static int or a static sequence per element)."""
    a = as_array(a, "repeat")
    if axis is None:
        a, axis = ravel(a), 0
    shp = aval_of(a).shape
    axis = canonical_axis(axis, len(shp), "repeat")
    if isinstance(repeats, (int, np.integer)) and total_repeat_length in (None, shp[axis] * int(repeats)):
        r = int(repeats)
        b = lax.broadcast_in_dim(a, shp[:axis + 1] + (r,) + shp[axis + 1:],
                                 tuple(range(axis + 1)) + tuple(range(axis + 2, len(shp) + 1)))
        return reshape(b, shp[:axis] + (shp[axis] * r,) + shp[axis + 1:])
    counts = np.asarray(repeats)
    if counts.shape not in ((), (shp[axis],)):
        raise ValueError(f"repeat: repeats must be an int or have length {shp[axis]}, got shape {counts.shape}")
    from .indexing import take
    index = np.repeat(np.arange(shp[axis]), counts)
    if total_repeat_length is not None:
        # as JAX: a longer result is cut, a shorter one is filled up with the array's final element
        total = int(total_repeat_length)
        index = np.concatenate([index[:total], np.full(max(total - index.size, 0), shp[axis] - 1, index.dtype)])
    return take(a, index, axis=axis)


def flip(m, axis=None):
    m = as_array(m, "flip")
    axes = canonical_axes(axis, aval_of(m).ndim, "flip")
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def _index_tuple(x):
    """``x`` as a tuple of Python ints (one int or a sequence); TypeError if any is not one."""
    try:
        return (operator.index(x),)
    except TypeError:
        return tuple(map(operator.index, x))


def roll(a, shift, axis=None):
    """Elements shifted along ``axis`` with wrap-around: integer shifts are slices and a
    concatenate; any other shift (traced, or a float: truncated to int32, as in JAX) is a
    dynamic slice of the axis repeated twice."""
    a = as_array(a, "roll")
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), aval_of(a).shape)
    axes = tuple(canonical_axis(ax, aval_of(a).ndim, "roll") for ax in _index_tuple(axis))
    try:
        shifts = _index_tuple(shift)
    except TypeError:
        return _roll_dynamic(a, shift, axes)
    if any(is_symbolic_dim(aval_of(a).shape[ax]) for ax in axes):   # the split point depends on the size
        return _roll_dynamic(a, shifts, axes)
    for s, ax in zip(*np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))):
        n = aval_of(a).shape[ax]
        k = int(s) % n if n else 0
        if k:
            a = concatenate([lax.slice_in_dim(a, n - k, n, 1, int(ax)),
                             lax.slice_in_dim(a, 0, n - k, 1, int(ax))], int(ax))
    return a


def pad(array, pad_width, mode="constant", *, constant_values=0, stat_length=None, end_values=0):
    """Pad with a scalar constant (``lax.pad``); for numpy's index-based modes ("edge", "wrap",
    "reflect", "symmetric") by gathering the indices numpy's own pad computes; with a statistic
    of each axis ("maximum", "minimum", "mean", "median", over ``stat_length`` elements at each
    end) or a ramp to ``end_values`` ("linear_ramp"), one axis after another as numpy and JAX."""
    array = as_array(array, "pad")
    aval = aval_of(array)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (aval.ndim, 2))
    if (widths < 0).any():
        raise ValueError(f"pad: pad widths must be non-negative, got {pad_width}")
    if mode == "constant":
        if np.ndim(constant_values):
            raise NotImplementedError("pad: only a scalar constant_values is supported")
        return lax.pad(array, convert(constant_values, aval.dtype, False),
                       [(int(lo), int(hi), 0) for lo, hi in widths])
    if mode in _PAD_STATISTICS:
        lengths = None if stat_length is None else np.broadcast_to(np.asarray(stat_length, np.int64), (aval.ndim, 2))
        return _pad_statistic(array, widths, lengths, mode)
    if mode == "linear_ramp":
        return _pad_linear_ramp(array, widths, np.broadcast_to(np.asarray(end_values), (aval.ndim, 2)))
    if mode not in ("edge", "wrap", "reflect", "symmetric"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (constant, edge, wrap, reflect, "
                                  f"symmetric, linear_ramp, {', '.join(_PAD_STATISTICS)})")
    from .indexing import take
    for ax, (lo, hi) in enumerate(widths):
        if is_symbolic_dim(aval.shape[ax]) and (lo or hi):
            array = _pad_symbolic_axis(array, int(lo), int(hi), mode, ax)
        elif lo or hi:
            idx = np.pad(np.arange(aval.shape[ax]), (int(lo), int(hi)), mode=mode)
            array = take(array, idx, axis=ax)
    return array


def _pad_symbolic_axis(array, lo: int, hi: int, mode: str, ax: int):
    """numpy's index-based pad along an axis of symbolic size ``n``, from slices whose bounds are
    expressions in ``n``; the pad must not outrun one reflection (as JAX requires), which the
    constraints must decide (else JAX's errors)."""
    n = aval_of(array).shape[ax]
    rev = lambda piece: lax.rev(piece, (ax,))                  # noqa: E731
    piece = lambda start, stop: lax.slice_in_dim(array, start, stop, 1, ax)   # noqa: E731
    if mode == "edge":
        left, right = [piece(0, 1)] * lo, [piece(n - 1, n)] * hi
    elif mode == "wrap":
        # JAX wraps by ``width % n`` whole periods and a remainder: its comparisons, its errors
        _ = [width % n > 0 for width in (lo, hi) if width]
        if not (lo <= n and hi <= n):
            raise NotImplementedError(f"pad: mode 'wrap' along axis {ax} of symbolic size {n} with pad widths "
                                      f"({lo}, {hi}) larger than the size")
        left, right = [piece(n - lo, n)] * bool(lo), [piece(0, hi)] * bool(hi)
    else:
        shift = int(mode == "reflect")     # reflect skips the edge element, symmetric repeats it
        for before, width in ((True, lo), (False, hi)):
            try:
                ok = not width or (n > 1 and n >= width + shift)
            except InconclusiveDimensionOperation:
                ok = False
            if not ok:
                raise ValueError(
                    f"Shape polymorphism is supported for jnp.pad with 'reflect' or 'symmetric' padding mode "
                    f"only when it is possible to determine at lowering time that the axis size (= {n}) is "
                    f"larger than 1 and larger or equal than the padding length (= {width}). Error while "
                    f"handling {'left' if before else 'right'} padding on axis {ax}.")
        left = [rev(piece(shift, lo + shift))] * bool(lo)
        right = [rev(piece(n - hi - shift, n - shift))] * bool(hi)
    return concatenate([*left, array, *right], ax)


_PAD_STATISTICS = ("maximum", "minimum", "mean", "median")


def _pad_statistic(array, widths, lengths, mode):
    from . import reductions, statistics
    from .ufuncs import round as round_
    stat = {"maximum": reductions.max, "minimum": reductions.min, "mean": reductions.mean,
            "median": statistics.median}[mode]
    dtype = aval_of(array).dtype
    for ax, (lo, hi) in enumerate(widths):
        n = aval_of(array).shape[ax]
        if lengths is None:
            before = after = stat(array, axis=ax, keepdims=True)
        else:
            if 0 in lengths[ax]:
                raise ValueError("stat_length of 0 yields no value for padding")
            k_lo, k_hi = (int(min(k, n)) for k in lengths[ax])
            before = stat(lax.slice_in_dim(array, 0, k_lo, 1, ax), axis=ax, keepdims=True)
            after = stat(lax.slice_in_dim(array, n - k_hi, n, 1, ax), axis=ax, keepdims=True)
        if dt.is_int(dtype):        # an integer mean or median rounds half to even
            before, after = round_(before), round_(after)
        before, after = convert(before, dtype), convert(after, dtype)
        array = lax.concatenate([repeat(before, int(lo), axis=ax), array, repeat(after, int(hi), axis=ax)], ax)
    return array


def _pad_linear_ramp(array, widths, end_values):
    from .creation import linspace
    dtype = aval_of(array).dtype
    for ax, (lo, hi) in enumerate(widths):
        n = aval_of(array).shape[ax]
        first = squeeze(lax.slice_in_dim(array, 0, 1, 1, ax), ax)
        last = squeeze(lax.slice_in_dim(array, n - 1, n, 1, ax), ax)
        ramp_before = linspace(end_values[ax][0], first, int(lo), endpoint=False, dtype=dtype, axis=ax)
        ramp_after = linspace(end_values[ax][1], last, int(hi), endpoint=False, dtype=dtype, axis=ax)
        array = lax.concatenate([ramp_before, array, flip(ramp_after, ax)], ax)
    return array


def _roll_dynamic(a, shift, axes):
    """``roll`` by traced (or non-integer) shifts, one per axis, converted to int32 as in JAX."""
    from .ufuncs import mod
    shape = aval_of(a).shape
    from .creation import asarray
    shifts = asarray(shift)          # (a sequence may hold traced scalars)
    bshape = np.broadcast_shapes(aval_of(shifts).shape, (len(axes),))
    if len(bshape) != 1 or aval_of(shifts).ndim > 1:
        raise ValueError("roll: 'shift' and 'axis' arguments must be scalars or 1D arrays")
    shifts = broadcast_to(convert(shifts, dt.int32), bshape)
    for k, ax in enumerate(np.broadcast_to(np.asarray(axes), bshape)):
        n = shape[ax]
        if n == 0:
            continue
        start = mod(-lax.index_in_dim(shifts, k, keepdims=False), n)
        a = lax.dynamic_slice_in_dim(concatenate([a, a], int(ax)), start, n, int(ax))
    return a


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis``; ``prepend``/``append`` values (scalars
    are broadcast across the other axes) join ``a`` first, as in numpy."""
    from .ufuncs import subtract
    a = as_array(a, "diff")
    ax = canonical_axis(axis, aval_of(a).ndim, "diff")
    if n < 0:
        raise ValueError(f"diff: order must be non-negative, got n={n}")
    if n == 0:      # as numpy and JAX: no differences taken, so prepend/append are not joined
        return a
    if prepend is not None or append is not None:
        def edge(v):
            v = as_array(v, "diff")
            if aval_of(v).ndim == 0:
                shape = list(aval_of(a).shape)
                shape[ax] = 1
                v = broadcast_to(v, tuple(shape))
            return v
        parts = [edge(prepend)] if prepend is not None else []
        parts += [a] + ([edge(append)] if append is not None else [])
        a = concatenate(parts, ax)
    for _ in range(n):
        size = aval_of(a).shape[ax]
        a = subtract(lax.slice_in_dim(a, 1, size, 1, ax), lax.slice_in_dim(a, 0, size - 1, 1, ax))
    return a


def unstack(x, /, *, axis: int = 0):
    """The slices of ``x`` along ``axis``, as a tuple (the inverse of ``stack``)."""
    x = as_array(x, "unstack")
    aval = aval_of(x)
    if aval.ndim == 0:
        raise ValueError("unstack requires an array of rank at least 1, got a scalar")
    axis = canonical_axis(axis, aval.ndim, "unstack")
    return tuple(squeeze(lax.slice_in_dim(x, i, i + 1, axis=axis), axis) for i in range(aval.shape[axis]))


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    """Coordinate arrays from 1-D coordinate vectors; ``indexing='xy'`` swaps the first two axes
    (Cartesian), ``sparse`` leaves each array unbroadcast (size 1 along the other axes)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xi = [ravel(as_array(x, "meshgrid")) for x in xi]
    sizes = [aval_of(x).shape[0] for x in xi]
    order = list(range(len(xi)))
    if indexing == "xy" and len(xi) > 1:
        order[0], order[1] = 1, 0     # the axis each input varies along
    shape = [0] * len(xi)
    for i, axis in enumerate(order):
        shape[axis] = sizes[i]
    out = [reshape(x, [sizes[i] if d == order[i] else 1 for d in range(len(xi))]) for i, x in enumerate(xi)]
    return out if sparse else [broadcast_to_shape(x, shape) for x in out]
