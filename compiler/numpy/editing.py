"""Building and editing arrays: append/insert/delete, block, choose/compress/extract,
put/place/put_along_axis/fill_diagonal (functional: ``inplace=False``), resize, rot90,
rollaxis, dsplit, diagflat, trim_zeros, vander, cross, ediff1d, partition/argpartition,
lexsort, packbits/unpackbits, matvec/vecmat, array_equiv, copy.

Where numpy mutates its argument, JAX returns the updated array and asks for
``inplace=False``; so do these.
"""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import ConcretizationTypeError

from . import ufuncs as uf
from ._util import aval_of, broadcast_shapes, broadcast_to_shape, canonical_axis, convert, located
from .creation import arange, array, as_array, asarray, full, zeros
from .reductions import all, sum
from .selection import argsort, where
from .setops import compact, static_size
from .shape_ops import (_promote_all, concatenate, moveaxis, ravel, reshape, swapaxes, flip, split,
                        expand_dims, stack)


def copy(a, order=None):
    """A copy of ``a`` (jaxprc arrays are immutable, so the array itself serves)."""
    return array(a, copy=True)


def array_equiv(a1, a2):
    """True when the arrays broadcast together and are equal elementwise."""
    a1, a2 = as_array(a1, "array_equiv"), as_array(a2, "array_equiv")
    try:
        broadcast_shapes(aval_of(a1).shape, aval_of(a2).shape, fn="array_equiv")
    except ValueError:
        return asarray(False)
    return all(uf.equal(a1, a2))


def append(arr, values, axis=None):
    """``values`` appended to ``arr`` along ``axis`` (both flattened if None)."""
    if axis is None:
        return concatenate([ravel(as_array(arr, "append")), ravel(as_array(values, "append"))])
    return concatenate([arr, values], axis=axis)


def _static_index_array(obj, fn):
    from .statistics import concrete
    return concrete(obj, f"the 'obj' argument of jnp.{fn}()")


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``arr`` without the entries ``obj`` (an int, a slice, integer or boolean indices) along
    ``axis``. Traced indices need ``assume_unique_indices=True``, as in JAX."""
    a = as_array(arr, "delete")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonical_axis(axis, aval_of(a).ndim, "delete")
    n = aval_of(a).shape[axis]
    head = (slice(None),) * axis
    if isinstance(obj, (int, np.integer)):
        i = operator.index(obj)
        if not -n <= i < n:
            raise IndexError(f"delete: index {i} is out of bounds for axis {axis} with size {n}")
        i %= n
        return concatenate([a[head + (slice(0, i),)], a[head + (slice(i + 1, None),)]], axis=axis)
    if isinstance(obj, slice):
        keep = np.ones(n, bool)
        keep[np.arange(n)[obj]] = False
        return a[head + (np.flatnonzero(keep),)]
    if assume_unique_indices and dt.is_int(aval_of(as_array(obj, "delete")).dtype):
        # Each kept position is its rank among kept positions plus the deleted ones before it.
        idx = ravel(as_array(obj, "delete"))
        idx = uf.minimum(uf.maximum(where(uf.less(idx, 0), uf.add(idx, n), idx), 0), n)
        idx = uf.subtract(lax.sort(idx, 0), arange(aval_of(idx).shape[0], dtype=aval_of(idx).dtype))
        kept = arange(n - aval_of(idx).shape[0], dtype=aval_of(idx).dtype)
        kept = uf.add(kept, sum(uf.greater_equal(kept[None, :], idx[:, None]), axis=0, dtype=aval_of(idx).dtype))
        return a[head + (kept,)]
    value = _static_index_array(obj, "delete")
    keep = np.ones(n, bool)
    if value.dtype == bool:
        if value.shape != (n,):
            raise ValueError(f"delete: boolean obj must be one-dimensional with length {n}; got shape {value.shape}")
        keep = ~value
    elif np.issubdtype(value.dtype, np.integer) or value.size == 0:
        keep[value.astype(int)] = False
    else:
        raise ValueError(f"delete: index array must be integer typed; got {value.dtype}")
    return a[head + (np.flatnonzero(keep),)]


def insert(arr, obj, values, axis=None):
    """``values`` inserted before the indices ``obj`` along ``axis`` (flattened if None);
    ``obj`` may be traced."""
    a = as_array(arr, "insert")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonical_axis(axis, aval_of(a).ndim, "insert")
    n = aval_of(a).shape[axis]
    if isinstance(obj, slice):
        idx = np.arange(*obj.indices(n))
    else:
        idx = as_array(obj, "insert")
        if aval_of(idx).ndim > 1:
            raise ValueError(f"jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; got {obj}")
        if not dt.is_int(aval_of(idx).dtype):
            if aval_of(idx).size == 0:
                idx = convert(idx, dt.default_int_dtype())
            else:
                raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    idx = asarray(idx)
    scalar = aval_of(idx).ndim == 0 and not isinstance(obj, slice)
    vals = array(values, dtype=aval_of(a).dtype, ndmin=aval_of(a).ndim, copy=False)
    if scalar:
        vals = moveaxis(vals, 0, axis) if aval_of(vals).ndim > 0 else vals
        idx = full((aval_of(vals).shape[axis],), idx, aval_of(idx).dtype)
    elif aval_of(idx).size == 1:
        idx = full((aval_of(vals).shape[axis],), ravel(idx)[0], aval_of(idx).dtype)
    k = broadcast_shapes(aval_of(idx).shape, (aval_of(vals).shape[axis],), fn="insert")[0]
    out_shape = list(aval_of(a).shape)
    out_shape[axis] += k
    vals = broadcast_to_shape(vals, tuple(out_shape[:axis]) + (k,) + tuple(out_shape[axis + 1:])) \
        if aval_of(vals).shape[axis] in (1, k) else vals
    idx = broadcast_to_shape(idx, (k,))
    idx = convert(idx, dt.default_int_dtype())
    idx = uf.minimum(uf.maximum(where(uf.less(idx, 0), uf.add(idx, n), idx), 0), n)
    # The inserted values go to their index plus the number inserted before them (stable order).
    order = argsort(idx, stable=True)
    placed = zeros(k, dt.default_int_dtype()).at[order].set(uf.add(idx[order], arange(k)))
    is_new = full((n + k,), False, dt.bool_).at[placed].set(True)
    old_slots = compact(arange(n + k), uf.logical_not(is_new), n, 0)
    out = zeros(tuple(out_shape), aval_of(a).dtype)
    head = (slice(None),) * axis
    out = out.at[head + (placed,)].set(vals)
    return out.at[head + (old_slots,)].set(a)


def block(arrays):
    """An array assembled from nested lists of blocks (innermost lists join along the last axis)."""
    def depth_of(x):
        return 1 + depth_of(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)

    def rank(x):
        return max(rank(v) for v in x) if isinstance(x, list) else aval_of(as_array(x, "block")).ndim

    if isinstance(arrays, tuple):
        raise TypeError("jnp.block: arrays must be nested lists, not tuples")
    depth = depth_of(arrays)
    ndim = max(rank(arrays), depth)

    def assemble(x, level):
        if not isinstance(x, list):
            return array(x, ndmin=ndim, copy=False)
        if not x:
            raise ValueError("jnp.block: lists cannot be empty")
        return concatenate([assemble(v, level + 1) for v in x], axis=-(depth - level))
    return assemble(arrays, 0)


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` elementwise (``mode``: "raise" checks the indices, so ``a`` must be
    concrete, as in JAX; "wrap" and "clip" adjust the index)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a = as_array(a, "choose")
    if not dt.is_int(aval_of(a).dtype):
        raise TypeError(f"choose: index array must be integer typed; got {aval_of(a).dtype}")
    n = len(choices)
    if mode == "raise":
        try:
            index = np.asarray(a)
        except ConcretizationTypeError as e:
            raise ConcretizationTypeError(f"{e}\nThe error occurred because jnp.choose was jit-compiled "
                                          "with mode='raise'. Use mode='wrap' or mode='clip' instead.") from None
        if ((index < 0) | (index >= n)).any():
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = uf.mod(a, n)
    elif mode == "clip":
        a = uf.minimum(uf.maximum(a, 0), n - 1)
    else:
        raise ValueError(f"choose: invalid mode {mode!r}; expected 'raise', 'wrap' or 'clip'")
    choices = _promote_all(list(choices), "choose")
    shape = broadcast_shapes(aval_of(a).shape, *(aval_of(c).shape for c in choices), fn="choose")
    out = broadcast_to_shape(choices[0], shape)
    a = broadcast_to_shape(a, shape)
    for i, c in enumerate(choices[1:], 1):
        out = where(uf.equal(a, i), broadcast_to_shape(c, shape), out)
    return out


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` where 1-D ``condition`` holds; ``size`` makes the
    length static (padding with ``fill_value``)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    cond = convert(as_array(condition, "compress"), dt.bool_)
    if aval_of(cond).ndim != 1:
        raise ValueError("compress: condition must be a 1D array")
    arr = as_array(a, "compress")
    if axis is None:
        arr, axis = ravel(arr), 0
    else:
        axis = canonical_axis(axis, aval_of(arr).ndim, "compress")
        arr = moveaxis(arr, axis, 0)
    n = aval_of(arr).shape[0]
    cond, extra = cond[:n], cond[n:]
    arr = arr[:aval_of(cond).shape[0]]
    if size is None:
        from .statistics import concrete
        if np.any(concrete(extra, "jnp.compress without size")):
            raise ValueError("compress: condition contains entries that are out of bounds")
    elif not 0 <= size <= aval_of(arr).shape[0]:
        raise ValueError(f"compress: size must be non-negative and not greater than the size of the array "
                         f"axis; got size={size} for a.shape[axis]={aval_of(arr).shape[0]}")
    size = static_size(cond, size, "compress")
    return moveaxis(compact(arr, cond, size, fill_value), 0, axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` holds (both flattened)."""
    return compress(ravel(as_array(condition, "extract")), ravel(as_array(arr, "extract")), size=size,
                    fill_value=fill_value)


def _immutable(fn, inplace):
    if inplace:
        raise ValueError(f"jax.numpy.{fn} cannot modify arrays in-place, because JAX arrays are immutable. "
                         "Pass inplace=False to instead return an updated array.")


def _tile_to(v, n):
    reps = -(-n // max(aval_of(v).shape[0], 1))
    return concatenate([v] * reps)[:n] if reps > 1 else v[:n]


def place(arr, mask, vals, *, inplace=True):
    """``arr`` with its masked elements replaced, in order, by ``vals`` (repeated as needed)."""
    _immutable("place", inplace)
    data, m, v = as_array(arr, "place"), as_array(mask, "place"), ravel(as_array(vals, "place"))
    if aval_of(data).size != aval_of(m).size:
        raise ValueError("place: arr and mask must be the same size")
    if aval_of(v).size == 0:
        raise ValueError("Cannot place values from an empty array")
    if aval_of(data).size == 0:
        return data
    size = aval_of(m).size
    positions = compact(arange(size), convert(ravel(m), dt.bool_), size, size)
    out = ravel(data).at[positions].set(convert(_tile_to(v, size), aval_of(data).dtype), mode="drop")
    return reshape(out, aval_of(data).shape)


def put(a, ind, v, mode=None, *, inplace=True):
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed)."""
    _immutable("put", inplace)
    arr, idx, vals = as_array(a, "put"), ravel(as_array(ind, "put")), ravel(as_array(v, "put"))
    size = aval_of(arr).size
    if size == 0 or aval_of(idx).size == 0 or aval_of(vals).size == 0:
        return arr
    vals = _tile_to(vals, aval_of(idx).shape[0])
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        idx, scatter_mode = uf.minimum(uf.maximum(idx, 0), size - 1), "promise_in_bounds"
    elif mode == "wrap":
        idx, scatter_mode = uf.mod(idx, size), "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"put: mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    from .index_tricks import unravel_index
    return arr.at[unravel_index(idx, aval_of(arr).shape)].set(vals, mode=scatter_mode)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """``arr`` with ``arr[..., indices, ...] = values`` along ``axis`` (take_along_axis's inverse)."""
    _immutable("put_along_axis", inplace)
    a = as_array(arr, "put_along_axis")
    idx = as_array(indices, "put_along_axis")
    if axis is None:
        a_flat = ravel(a)
        return reshape(put_along_axis(a_flat, ravel(idx), ravel(as_array(values, "put_along_axis")), 0,
                                      inplace=False, mode=mode), aval_of(a).shape)
    shape = aval_of(a).shape
    axis = canonical_axis(axis, len(shape), "put_along_axis")
    if aval_of(idx).ndim != len(shape):
        raise ValueError("put_along_axis: indices and arr must have the same number of dimensions")
    ishape = broadcast_shapes(tuple(1 if d == axis else s for d, s in enumerate(shape)),
                              tuple(1 if d == axis else s for d, s in enumerate(aval_of(idx).shape)),
                              fn="put_along_axis")
    ishape = ishape[:axis] + (aval_of(idx).shape[axis],) + ishape[axis + 1:]
    index = tuple(broadcast_to_shape(idx, ishape) if d == axis
                  else lax.broadcasted_iota(dt.default_int_dtype(), ishape, d) for d in range(len(shape)))
    vals = broadcast_to_shape(convert(as_array(values, "put_along_axis"), aval_of(a).dtype), ishape)
    return a.at[index].set(vals, mode=mode)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """``a`` with its main diagonal (all indices equal) set to ``val`` (repeated as needed)."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    a, val = as_array(a, "fill_diagonal"), as_array(val, "fill_diagonal")
    shape = aval_of(a).shape
    if len(shape) < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if len(shape) > 2 and any(n != shape[0] for n in shape[1:]):
        raise ValueError("fill_diagonal: all dimensions of input must be of equal length")
    n = min(shape)
    i = np.arange(n)
    v = val if aval_of(val).ndim == 0 else _tile_to(ravel(val), n)
    return a.at[(i,) * len(shape)].set(v)


def resize(a, new_shape):
    """``a`` flattened, repeated as needed and reshaped to ``new_shape``."""
    if isinstance(new_shape, (int, np.integer)):
        new_shape = (int(new_shape),)
    new_shape = tuple(operator.index(d) for d in new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError("resize: all elements of `new_shape` must be non-negative")
    flat = ravel(as_array(a, "resize"))
    size = int(np.prod(new_shape, dtype=np.int64))
    if aval_of(flat).size == 0 or size == 0:
        return zeros(new_shape, aval_of(flat).dtype)
    return reshape(_tile_to(flat, size), new_shape)


def rot90(m, k=1, axes=(0, 1)):
    """``m`` rotated by 90 degrees ``k`` times in the plane ``axes`` (from the first towards the second)."""
    m = as_array(m, "rot90")
    nd = aval_of(m).ndim
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2.")
    a0, a1 = canonical_axis(axes[0], nd, "rot90"), canonical_axis(axes[1], nd, "rot90")
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def rollaxis(a, axis, start=0):
    """``axis`` moved to lie before position ``start`` (numpy's older moveaxis)."""
    a = as_array(a, "rollaxis")
    n = aval_of(a).ndim
    axis = canonical_axis(axis, n, "rollaxis")
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start={start} must satisfy {-n} <= start <= {n}")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def dsplit(ary, indices_or_sections):
    """``split`` along the third axis."""
    if aval_of(as_array(ary, "dsplit")).ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, axis=2)


def diagflat(v, k=0):
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal."""
    from .selection import diag
    return diag(ravel(as_array(v, "diagflat")), k)


def trim_zeros(filt, trim="fb"):
    """``filt`` (1-D, concrete) without its leading ('f') and/or trailing ('b') zeros."""
    from .statistics import concrete
    f = as_array(filt, "trim_zeros")
    if aval_of(f).ndim != 1:
        raise ValueError("trim_zeros: filt must be 1-D")
    nz = np.flatnonzero(concrete(uf.not_equal(f, 0), "jnp.trim_zeros"))
    if nz.size == 0:
        return f[:0]
    start = nz[0] if "f" in trim.lower() else 0
    end = nz[-1] + 1 if "b" in trim.lower() else aval_of(f).shape[0]
    return f[start:end]


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D ``x``: columns are powers of ``x`` (decreasing unless ``increasing``)."""
    x = as_array(x, "vander")
    if aval_of(x).ndim != 1:
        raise ValueError("vander: x must be a one-dimensional array")
    N = aval_of(x).shape[0] if N is None else operator.index(N)
    if N < 0:
        raise ValueError("vander: N must be nonnegative")
    powers = arange(N, dtype=dt.default_int_dtype() if dt.is_int(aval_of(x).dtype) else aval_of(x).dtype)
    if not increasing:
        powers = lax.rev(powers, (0,))
    return uf.power(x[:, None], powers)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-vectors along the given axes (2-vectors give the z component)."""
    a, b = _promote_all([a, b], "cross")
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    na, nb = aval_of(a).shape[-1], aval_of(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("cross: incompatible dimensions for cross product (dimension must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else zeros((), aval_of(a).dtype)
    b2 = b[..., 2] if nb == 3 else zeros((), aval_of(b).dtype)
    z = uf.subtract(uf.multiply(a0, b1), uf.multiply(a1, b0))
    if na == 2 and nb == 2:
        return z
    c = stack(list(map(lambda t: broadcast_to_shape(t, aval_of(uf.add(z, uf.add(a2, b2))).shape),
                       (uf.subtract(uf.multiply(a1, b2), uf.multiply(a2, b1)),
                        uf.subtract(uf.multiply(a2, b0), uf.multiply(a0, b2)), z))), axis=-1)
    return moveaxis(c, -1, axisc)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened array, with optional ends."""
    a = ravel(as_array(ary, "ediff1d"))
    d = uf.subtract(a[1:], a[:-1])
    parts = ([ravel(convert(as_array(to_begin, "ediff1d"), aval_of(d).dtype))] if to_begin is not None else []) + \
        [d] + ([ravel(convert(as_array(to_end, "ediff1d"), aval_of(d).dtype))] if to_end is not None else [])
    return concatenate(parts) if len(parts) > 1 else d


def partition(a, kth, axis=-1):
    """``a`` rearranged so that the ``kth`` element is where a sort would put it: the kth+1
    smallest first (ascending), then the rest (descending), as JAX orders them."""
    arr = as_array(a, "partition")
    if dt.is_complex(aval_of(arr).dtype):
        raise NotImplementedError("jnp.partition for complex dtype is not implemented.")
    axis = canonical_axis(axis, aval_of(arr).ndim, "partition")
    kth = canonical_axis(kth, aval_of(arr).shape[axis], "partition")
    s = lax.sort(moveaxis(arr, axis, -1), aval_of(arr).ndim - 1)
    out = concatenate([s[..., :kth + 1], lax.rev(s[..., kth + 1:], (aval_of(arr).ndim - 1,))], axis=-1)
    return moveaxis(out, -1, axis)


def argpartition(a, kth, axis=-1):
    """Indices that ``partition`` ``a``: the kth+1 smallest (ascending, ties by index), then
    the other indices in increasing order, as JAX gives them."""
    arr = as_array(a, "argpartition")
    if dt.is_complex(aval_of(arr).dtype):
        raise NotImplementedError("jnp.argpartition for complex dtype is not implemented.")
    axis = canonical_axis(axis, aval_of(arr).ndim, "argpartition")
    kth = canonical_axis(kth, aval_of(arr).shape[axis], "argpartition")
    x = moveaxis(arr, axis, -1)
    n = aval_of(x).shape[-1]
    order = argsort(x, axis=-1, stable=True)
    bottom = order[..., :kth + 1]
    # The rest in index order: a stable sort of the "is among the bottom" flags (the rank of
    # each index in ``order`` is where it sits in the sorted order).
    in_bottom = uf.less_equal(argsort(order, axis=-1, stable=True), kth)
    rest = argsort(in_bottom, axis=-1, stable=True)[..., :n - kth - 1]
    return moveaxis(concatenate([bottom, rest], axis=-1), -1, axis)


def lexsort(keys, axis=-1):
    """Indices sorting by the last key, ties broken by the previous keys (stable)."""
    keys = list(keys) if not hasattr(keys, "shape") else [keys[i] for i in range(aval_of(keys).shape[0])]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    keys = [as_array(k, "lexsort") for k in keys]
    shape = aval_of(keys[0]).shape
    if any(aval_of(k).shape != shape for k in keys):
        raise ValueError("all keys need to be the same shape")
    if len(shape) == 0:
        return zeros((), dt.default_int_dtype())
    axis = canonical_axis(axis, len(shape), "lexsort")
    iota = lax.broadcasted_iota(dt.default_int_dtype(), shape, axis)
    return lax.sort((*keys[::-1], iota), axis, num_keys=len(keys))[-1]


def packbits(a, axis=None, bitorder="big"):
    """Boolean (or integer, nonzero = 1) elements packed into uint8, 8 per byte, zero-padded."""
    arr = as_array(a, "packbits")
    if not (dt.is_int(aval_of(arr).dtype) or dt.is_bool(aval_of(arr).dtype)):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = convert(uf.not_equal(arr, 0), dt.uint8)
    if axis is None:
        bits, axis = ravel(bits), 0
    axis = canonical_axis(axis, aval_of(bits).ndim, "packbits")
    bits = moveaxis(bits, axis, -1)
    n = aval_of(bits).shape[-1]
    pad = -n % 8
    if pad:
        bits = lax.pad(bits, convert(0, dt.uint8), [(0, 0, 0)] * (aval_of(bits).ndim - 1) + [(0, pad, 0)])
    bits = reshape(bits, aval_of(bits).shape[:-1] + ((n + pad) // 8, 8))
    shifts = np.arange(8, dtype=np.uint8) if bitorder == "little" else np.arange(7, -1, -1, dtype=np.uint8)
    packed = sum(uf.left_shift(bits, shifts), axis=-1, dtype=dt.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """uint8 elements unpacked into their 8 bits (``count`` keeps the first bits only)."""
    arr = as_array(a, "unpackbits")
    if aval_of(arr).dtype != dt.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    shifts = np.arange(8, dtype=np.uint8) if bitorder == "little" else np.arange(7, -1, -1, dtype=np.uint8)
    bits = uf.bitwise_and(uf.right_shift(expand_dims(arr, -1), shifts), convert(1, dt.uint8))
    if axis is None:
        bits, axis = ravel(bits), 0
    else:
        axis = canonical_axis(axis, aval_of(arr).ndim, "unpackbits")
        bits = swapaxes(bits, axis, -2)
        bits = reshape(bits, aval_of(bits).shape[:-2] + (aval_of(bits).shape[-2] * 8,))
        bits = moveaxis(bits, -1, axis)
    if count is not None:
        n = aval_of(bits).shape[axis]
        count = operator.index(count)
        head = (slice(None),) * axis
        if count <= n:
            bits = bits[head + (slice(0, count),)]
        else:
            widths = [(0, 0, 0)] * aval_of(bits).ndim
            widths[axis] = (0, count - n, 0)
            bits = lax.pad(bits, convert(0, dt.uint8), widths)
    return bits


def matvec(x1, x2, /):
    """Matrix-vector products over the last axes, batched (numpy 2's matvec)."""
    from .products import matmul
    return matmul(x1, expand_dims(as_array(x2, "matvec"), -1))[..., 0]


def vecmat(x1, x2, /):
    """Vector-matrix products (the vector conjugated), batched (numpy 2's vecmat)."""
    from .products import matmul
    return matmul(expand_dims(uf.conj(as_array(x1, "vecmat")), -2), x2)[..., 0, :]
