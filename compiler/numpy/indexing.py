"""Indexing: ``x[idx]``, ``take``, ``take_along_axis``, ``nonzero`` and ``x.at[idx].set/add/...``.

``x[idx]`` follows numpy. Basic indices (static slices and integers, None,
Ellipsis) become ``slice``/``rev``/``squeeze``, traced integers a
``dynamic_slice``; integer arrays (and boolean masks, which must be concrete
and become their ``nonzero`` indices) become one ``gather``, whose result
dimensions go where numpy puts them (in place when the advanced indices are
adjacent, in front otherwise). ``.at`` updates scatter into the flattened
array at the positions ``x[idx]`` would read, so they follow the same rules;
the common ``x.at[i, j].set(row)`` (leading integers, then whole dimensions)
is one window scatter that XLA turns into a dynamic-update-slice.
"""
from __future__ import annotations

import math

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import DimExpr, max_dim, min_dim, slice_bounds
from jaxprc.ir.tracing import ConcretizationTypeError, JAXIndexError, Tracer

from .creation import as_array, asarray, zeros
from ._util import (aval_of, broadcast_shapes, broadcast_to_shape, canonical_axis, convert, is_constant, located,
                    promote)

_SLICE, _INT, _ARRAY, _NONE = "slice", "int", "array", "none"


class NonConcreteBooleanIndexError(ConcretizationTypeError, JAXIndexError):
    pass


def _concrete_bool_mask(mask):
    try:
        return np.asarray(mask)
    except ConcretizationTypeError as e:
        raise NonConcreteBooleanIndexError(
            f"Array boolean indices must be concrete: the mask {mask!r} is a traced value, so the "
            "shape of the result would depend on its values. Use jnp.where(mask, x, fill) instead, "
            f"or compute the mask outside the transformed function. ({e})") from None


def _refuse_list_index(idx):
    """numpy's old reading of ``x[[i, j]]`` (a list as a tuple of indices) is ambiguous: JAX
    refuses a list as the whole index, for reading and for ``.at`` updates."""
    if isinstance(idx, list):
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; use "
                        "`arr[array(seq)]` instead of `arr[seq]`.")


def _parse_index(shape, idx):
    """The index as a list of (kind, dim, value) entries with Ellipsis expanded and
    boolean masks turned into integer arrays; ``dim`` is None for new axes."""
    _refuse_list_index(idx)
    idx = idx if isinstance(idx, tuple) else (idx,)
    items = []
    for i in idx:
        if i is None or i is Ellipsis or isinstance(i, slice):
            items.append(i)
        elif isinstance(i, (bool, np.bool_)):
            raise IndexError("indexing with a Python bool is not supported; use a boolean array")
        elif isinstance(i, (int, np.integer)):
            items.append((_INT, int(i)))
        else:
            if isinstance(i, (list, tuple)):
                i = np.asarray(i) if all(is_constant(v) for v in np.ravel(np.asarray(i, dtype=object))) \
                    else asarray(i)
            aval = aval_of(i, "indexing")
            if dt.is_bool(aval.dtype):
                if aval.ndim == 0:
                    raise IndexError("indexing with a 0-d boolean array is not supported")
                items.extend((_ARRAY, np.asarray(n, dt.default_int_dtype()))
                             for n in np.nonzero(_concrete_bool_mask(i)))
            elif dt.is_int(aval.dtype):
                if aval.ndim == 0:   # a scalar: static if it is a numpy value, else dynamic
                    items.append((_INT, int(i) if is_constant(i) else i))
                else:
                    items.append((_ARRAY, i))
            else:
                given = np.asarray(i).dtype if isinstance(i, (float, complex)) else aval.dtype   # as JAX names it
                raise TypeError(f"Indexer must have integer or boolean type, got indexer with type {given.name} "
                                f"({located('indexing')}: a {aval.str_short()} value)")
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"{located('indexing')}: too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {used} were indexed")
    if Ellipsis not in items:
        items.append(Ellipsis)
    entries, dim = [], 0
    for i in items:
        if i is Ellipsis:
            for _ in range(len(shape) - used):
                entries.append((_SLICE, dim, slice(None)))
                dim += 1
        elif i is None:
            entries.append((_NONE, None, None))
        elif isinstance(i, slice):
            entries.append((_SLICE, dim, i))
            dim += 1
        else:
            entries.append((i[0], dim, i[1]))
            dim += 1
    return entries


def _static_int(i, size, dim):
    """A static index, clamped into bounds as JAX's gathers clamp (numpy would raise)."""
    if size == 0:
        raise IndexError(f"{located('indexing')}: index {i} is out of bounds for axis {dim} with size 0")
    return min_dim(max_dim(i + size if i < 0 else i, 0), size - 1)


def _apply_slices(x, entries):
    """Static slices (and static integers, as length-1 slices) in one ``slice``, then ``rev``."""
    shape = aval_of(x).shape
    starts, limits, strides, flips, pre_flips = [0] * len(shape), list(shape), [1] * len(shape), [], []
    for kind, dim, v in entries:
        if kind == _SLICE:
            for bound in (v.start, v.stop, v.step):
                if bound is not None and not isinstance(bound, (int, np.integer)):
                    raise IndexError(f"{located('indexing')}: slice bounds must be static integers, got {v!r}; use "
                                     "lax.dynamic_slice for traced start indices")
            if type(shape[dim]) is DimExpr:
                if v.step is not None and v.step < 0:
                    # x[s:t:-k] is rev(x)[-1-s : -1-t : k]: the same slice, counted from the end
                    pre_flips.append(dim)
                    v = slice(None if v.start is None else -1 - v.start, None if v.stop is None else -1 - v.stop,
                              -v.step)
                starts[dim], limits[dim], strides[dim] = slice_bounds(v.start, v.stop, v.step, shape[dim])
                continue
            chosen = range(*v.indices(shape[dim]))
            step = chosen.step
            if len(chosen) == 0:
                starts[dim] = limits[dim] = 0
            elif step > 0:
                starts[dim], limits[dim], strides[dim] = chosen[0], chosen[-1] + 1, step
            else:
                starts[dim], limits[dim], strides[dim] = chosen[-1], chosen[0] + 1, -step
                flips.append(dim)
        elif kind == _INT and isinstance(v, int):
            i = _static_int(v, shape[dim], dim)
            starts[dim], limits[dim] = i, i + 1
    if pre_flips:
        x = lax.rev(x, pre_flips)
    if starts != [0] * len(shape) or limits != list(shape) or strides != [1] * len(shape):
        x = lax.slice(x, starts, limits, None if all(s == 1 for s in strides) else strides)
    return lax.rev(x, flips) if flips else x


def _insert_new_axes(y, tokens):
    """``tokens`` lists the result's dimensions in order; "new" ones are inserted with size 1."""
    new = tuple(i for i, t in enumerate(tokens) if t == "new")
    return lax.expand_dims(y, new) if new else y


def getitem(x, idx, mode=None, fill_value=None):
    """``x[idx]`` with numpy's semantics (see the module docstring). Out-of-bounds indices are
    clamped; with a gather ``mode`` ("fill", "clip") integers go through the gather too, so
    that mode applies to them."""
    x = as_array(x, "indexing")
    entries = _parse_index(aval_of(x).shape, idx)
    kinds = {kind for kind, _, _ in entries}
    if _ARRAY in kinds or (mode is not None and _INT in kinds):
        mode = lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode
        mode, fill_value = _gather_mode(mode, fill_value, aval_of(x).dtype)
        return _advanced(x, entries, mode, fill_value)
    y = _apply_slices(x, entries)
    traced = [(dim, v) for kind, dim, v in entries if kind == _INT and not isinstance(v, int)]
    if traced:
        shape = aval_of(y).shape
        starts = [0] * len(shape)
        sizes = list(shape)
        for dim, v in traced:
            starts[dim], sizes[dim] = v, 1
        y = lax.dynamic_slice(y, starts, sizes)
    ints = tuple(dim for kind, dim, _ in entries if kind == _INT)
    if ints:
        y = lax.squeeze(y, ints)
    return _insert_new_axes(y, [("new" if k == _NONE else "dim") for k, _, _ in entries if k != _INT])


def _normalized_indices(index, size):
    """Integer indices with negative ones counted from the end (numpy in numpy, ``select_n``
    traced)."""
    from .selection import where
    from .ufuncs import add, less
    if is_constant(index):
        index = np.asarray(index)
        return np.where(index < 0, index + size, index).astype(dt.default_int_dtype())
    index = convert(index, dt.default_int_dtype())
    return where(less(index, 0), add(index, size), index)


def gather_indices(x, dims, index_arrays, *, batch_position=0, mode=None, fill_value=None,
                   count_negative_from_end=True, unique_indices=False, indices_are_sorted=False):
    """``x`` indexed along ``dims`` by broadcast integer ``index_arrays``: one ``gather``.

    The index dimensions appear at ``batch_position`` among the remaining dimensions of ``x``.
    Negative indices count from the end, except where ``count_negative_from_end`` is False
    (JAX's ``take`` in "clip" mode clamps them to 0).
    """
    shape = aval_of(x).shape
    bshape = broadcast_shapes(*(aval_of(i).shape for i in index_arrays), fn="indexing")
    parts = [_normalized_indices(i, shape[d]) if count_negative_from_end else i
             for d, i in zip(dims, index_arrays)]
    if all(is_constant(p) for p in parts):
        indices = np.stack([np.broadcast_to(p, bshape) for p in parts], axis=-1).astype(dt.default_int_dtype())
    else:
        from .shape_ops import concatenate
        indices = concatenate([lax.expand_dims(broadcast_to_shape(p, bshape), (len(bshape),)) for p in parts],
                              axis=-1)
    rest = [d for d in range(len(shape)) if d not in dims]
    nb = len(bshape)
    offset_dims = tuple(range(batch_position)) + tuple(
        range(batch_position + nb, nb + len(rest)))
    dnums = lax.GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=tuple(sorted(dims)),
                                       start_index_map=tuple(dims), operand_batching_dims=(),
                                       start_indices_batching_dims=())
    slice_sizes = tuple(1 if d in dims else shape[d] for d in range(len(shape)))
    if any(shape[d] == 0 for d in dims):
        # No slice of an empty dimension exists for gather to read: every index is out of bounds.
        rest_shape = [shape[d] for d in rest]
        out_shape = tuple(rest_shape[:batch_position]) + bshape + tuple(rest_shape[batch_position:])
        fill = fill_value if mode == lax.GatherScatterMode.FILL_OR_DROP and fill_value is not None else 0
        return lax.full(out_shape, fill, aval_of(x).dtype)
    return lax.gather(x, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def _advanced(x, entries, mode, fill_value):
    x = _apply_slices(x, [e for e in entries if e[0] == _SLICE])
    adv = [(dim, v) for kind, dim, v in entries if kind in (_INT, _ARRAY)]
    positions = [i for i, (kind, _, _) in enumerate(entries) if kind in (_INT, _ARRAY)]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    before = sum(1 for k, _, _ in entries[:positions[0]] if k == _SLICE) if adjacent else 0
    y = gather_indices(x, [d for d, _ in adv], [v for _, v in adv], batch_position=before,
                       mode=mode, fill_value=fill_value)
    nb = aval_of(y).ndim - sum(1 for k, _, _ in entries if k == _SLICE)
    tokens = []
    if not adjacent:
        tokens += ["dim"] * nb
    for i, (kind, _, _) in enumerate(entries):
        if kind == _SLICE:
            tokens.append("dim")
        elif kind == _NONE:
            tokens.append("new")
        elif adjacent and i == positions[0]:
            tokens += ["dim"] * nb
    return _insert_new_axes(y, tokens)


def _default_fill(dtype):
    if dt.is_inexact(dtype):
        return np.nan
    if dt.is_bool(dtype):
        return True
    info = dt.iinfo(dtype)
    return info.max if dt.is_unsigned(dtype) else info.min


def _gather_mode(mode, fill_value, dtype):
    mode = lax.GatherScatterMode.from_any(mode)
    if mode == lax.GatherScatterMode.FILL_OR_DROP and fill_value is None:
        fill_value = _default_fill(dtype)
    return mode, fill_value


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array if None).
    Modes as JAX's: "fill" (the default; out-of-bounds gives ``fill_value``, NaN for floats),
    "clip" (negative indices clamp to 0) and "wrap"."""
    from .shape_ops import ravel
    from .ufuncs import mod
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a = as_array(a, "take")
    iaval = aval_of(indices, "take")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonical_axis(axis, aval_of(a).ndim, "take")
    shape = aval_of(a).shape
    if mode is None or mode == "fill":
        gather_mode = lax.GatherScatterMode.FILL_OR_DROP
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported.")
    elif mode in ("wrap", "clip"):
        gather_mode = lax.GatherScatterMode.CLIP
    else:
        raise ValueError(f"Invalid mode '{mode}' for np.take")
    # Nothing to gather: JAX answers before looking at the indices' dtype.
    if shape[axis] == 0:
        if iaval.size:
            raise IndexError("take: cannot do a non-empty jnp.take() from an empty axis.")
        return a
    if iaval.size == 0:
        return zeros(shape[:axis] + iaval.shape + shape[axis + 1:], aval_of(a).dtype)
    if not (dt.is_int(iaval.dtype) or dt.is_bool(iaval.dtype)):
        raise ValueError(f"take: indices must have an integer type, got {iaval.dtype.name}")
    if mode == "wrap":
        indices = mod(indices, shape[axis])
    if gather_mode == lax.GatherScatterMode.FILL_OR_DROP and fill_value is None:
        fill_value = _default_fill(aval_of(a).dtype)
    return gather_indices(a, [axis], [indices], batch_position=axis, mode=gather_mode, fill_value=fill_value,
                          count_negative_from_end=mode in (None, "fill"), unique_indices=unique_indices,
                          indices_are_sorted=indices_are_sorted)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None, *, wrap_negative_indices=True):
    """``arr`` indexed along ``axis`` by ``indices`` (same rank; other dimensions broadcast);
    ``wrap_negative_indices=False`` leaves negative indices out of bounds (for ``mode``)."""
    arr = as_array(arr, "take_along_axis")
    shape = aval_of(arr).shape
    if axis is None:
        from .shape_ops import ravel
        arr, shape, axis = ravel(arr), (aval_of(arr).size,), 0
    ishape = aval_of(indices, "take_along_axis").shape
    if len(ishape) != len(shape):
        raise ValueError(f"take_along_axis: indices and arr must have the same number of dimensions; "
                         f"{len(ishape)} vs {len(shape)}")
    axis = canonical_axis(axis, len(shape), "take_along_axis")
    mode, fill_value = _gather_mode(mode, fill_value, aval_of(arr).dtype)
    out_shape = broadcast_shapes(tuple(1 if d == axis else s for d, s in enumerate(shape)),
                                 tuple(1 if d == axis else s for d, s in enumerate(ishape)),
                                 fn="take_along_axis")
    out_shape = out_shape[:axis] + (ishape[axis],) + out_shape[axis + 1:]
    index_arrays = [broadcast_to_shape(indices, out_shape) if d == axis
                    else lax.broadcasted_iota(dt.default_int_dtype(), out_shape, d)
                    for d in range(len(shape))]
    if any(out_shape[d] != shape[d] for d in range(len(shape)) if d != axis):
        arr = broadcast_to_shape(arr, tuple(out_shape[d] if d != axis else shape[d] for d in range(len(shape))))
    return gather_indices(arr, list(range(len(shape))), index_arrays, mode=mode, fill_value=fill_value,
                          count_negative_from_end=bool(wrap_negative_indices))


def nonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements: ``a`` must be concrete (the result's shape depends on
    it) unless a static ``size`` is given."""
    if size is not None and isinstance(a, Tracer):
        from .setops import nonzero_sized
        return nonzero_sized(a, size, fill_value)
    value = _concrete_bool_mask(a)
    out = np.nonzero(value)
    if size is not None:
        fill = 0 if fill_value is None else fill_value
        out = tuple(np.concatenate([o[:size], np.full(max(0, size - len(o)), fill, o.dtype)]) for o in out)
    return tuple(asarray(o.astype(dt.default_int_dtype())) for o in out)


def flatnonzero(a, *, size=None, fill_value=None):
    from .shape_ops import ravel
    flat = ravel(a) if isinstance(a, Tracer) else np.ravel(_concrete_bool_mask(a))
    return nonzero(flat, size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    from .shape_ops import stack
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


# -------------------------------------------------------------- .at updates

def _is_static_index(idx) -> bool:
    items = idx if isinstance(idx, tuple) else (idx,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer, np.ndarray, list))
               for i in items)


def _positions(shape, idx, clip: bool):
    """The flat positions ``x[idx]`` reads, out-of-bounds ones clamped into bounds (``clip``) or
    replaced by ``size`` (which the scatter drops): computed by numpy for static in-bounds
    indices, traced otherwise."""
    size = math.prod(shape)          # (symbolic for a symbolic shape)
    if _is_static_index(idx) and type(size) is int:
        try:
            return np.arange(size, dtype=dt.default_int_dtype()).reshape(shape)[idx]
        except IndexError:
            pass
    iota = lax.reshape(lax.iota(dt.default_int_dtype(), size), shape)
    if clip:
        return getitem(iota, idx, mode=lax.GatherScatterMode.CLIP)
    # dropped positions: past the end, or -1 when the size is symbolic (the scatter drops both)
    return getitem(iota, idx, mode=lax.GatherScatterMode.FILL_OR_DROP, fill_value=size if type(size) is int else -1)


def _is_integer_scalar(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return False
    if isinstance(i, (int, np.integer)):
        return True
    if isinstance(i, (slice, list, tuple)) or i is None or i is Ellipsis:
        return False
    try:
        a = aval_of(i)
    except TypeError:
        return False
    return a.ndim == 0 and dt.is_int(a.dtype)


def _leading_integers(ndim, idx):
    """The integers of an index made of leading integer scalars (static or traced) and then only
    whole dimensions (``:`` and at most one ``...``); None for any other index."""
    items = idx if isinstance(idx, tuple) else (idx,)
    k = 0
    while k < len(items) and _is_integer_scalar(items[k]):
        k += 1
    rest = items[k:]
    whole = all(r is Ellipsis or (isinstance(r, slice) and r == slice(None)) for r in rest)
    if not 0 < k <= ndim or not whole or sum(r is Ellipsis for r in rest) > 1:
        return None
    return items[:k]


def _window_scatter(x, aval, integers, values, scatter, mode):
    """Combine ``values`` into the window ``x[i0, ..., ik-1]``: one scatter of a whole window."""
    k = len(integers)
    parts = [_normalized_indices(i, aval.shape[d]) for d, i in enumerate(integers)]
    if all(is_constant(p) for p in parts):
        indices = np.array(parts, dt.default_int_dtype())
    else:
        from .shape_ops import stack
        indices = stack([convert(p, dt.default_int_dtype()) for p in parts])
    window = aval.shape[k:]
    values = broadcast_to_shape(convert(values, aval.dtype, aval.weak_type), window)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(len(window))),
                                        inserted_window_dims=tuple(range(k)),
                                        scatter_dims_to_operand_dims=tuple(range(k)),
                                        operand_batching_dims=(), scatter_indices_batching_dims=())
    return scatter(x, indices, values, dnums, indices_are_sorted=True, unique_indices=True, mode=mode)


def scatter_update(x, idx, values, scatter, mode=None):
    """``x`` with ``values`` combined by ``scatter`` (``lax.scatter``, ``lax.scatter_add``, ...)
    into the elements ``x[idx]`` selects, once per occurrence of a repeated index. Out-of-bounds
    indices are dropped, or with ``mode="clip"`` clamped into bounds, as in JAX."""
    x = as_array(x, "at")
    aval = aval_of(x)
    (promoted, values), dtype, _ = promote("at", x, values, broadcast=False)
    if dtype != aval.dtype:
        # as JAX: combined in the promoted dtype (a bool array's max with -0.5 keeps False), then
        # converted back to the array's dtype and weak type
        return convert(scatter_update(promoted, idx, values, scatter, mode), aval.dtype, aval.weak_type)
    clip = mode is not None and lax.GatherScatterMode.from_any(mode) == lax.GatherScatterMode.CLIP
    mode = lax.GatherScatterMode.CLIP if clip else lax.GatherScatterMode.FILL_OR_DROP
    integers = _leading_integers(aval.ndim, idx)
    if integers is not None:
        return _window_scatter(x, aval, integers, values, scatter, mode)
    pos = _positions(aval.shape, idx, clip)
    pos_shape = aval_of(pos).shape
    values = broadcast_to_shape(convert(values, aval.dtype, aval.weak_type), pos_shape)
    n = math.prod(pos_shape)
    flat_pos = np.reshape(pos, (n, 1)) if is_constant(pos) else lax.reshape(pos, (n, 1))
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),
                                        scatter_indices_batching_dims=())
    out = scatter(lax.reshape(x, (math.prod(aval.shape),)), flat_pos, lax.reshape(values, (n,)), dnums, mode=mode)
    return lax.reshape(out, aval.shape)


def _negatives_out_of_bounds(shape, idx):
    """``idx`` with each negative integer index ``i`` of a dimension of size ``n`` moved to
    ``i - n``: still negative after the usual wrap, so out of bounds (JAX's
    ``wrap_negative_indices=False``: clamped to 0 in "clip" mode, dropped or filled otherwise)."""
    from .selection import where
    from .ufuncs import less, subtract
    rebuilt = []
    for kind, dim, v in _parse_index(shape, idx):
        if kind == _INT and isinstance(v, int):
            v = v - shape[dim] if v < 0 else v
        elif kind in (_INT, _ARRAY):
            if is_constant(v):
                v = np.asarray(v)
                v = np.where(v < 0, v - shape[dim], v).astype(v.dtype)
            else:
                v = where(less(v, 0), subtract(v, shape[dim]), v)
        rebuilt.append(None if kind == _NONE else v)
    return tuple(rebuilt)


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates of the elements ``x[idx]`` selects. Each method takes
    ``wrap_negative_indices`` (default True: negative indices count from the end)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def _unwrapped(self, wrap_negative_indices) -> "_IndexUpdateRef":
        if wrap_negative_indices:
            return self
        array = as_array(self.array, "at")
        return _IndexUpdateRef(array, _negatives_out_of_bounds(aval_of(array).shape, self.index))

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    # indices_are_sorted / unique_indices are hints JAX passes to XLA; the results do not depend
    # on them, so they are accepted and not needed.
    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return getitem(ref.array, ref.index, mode, fill_value)

    def set(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return scatter_update(ref.array, ref.index, values, lax.scatter, mode)

    def add(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return scatter_update(ref.array, ref.index, values, lax.scatter_add, mode)

    def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return scatter_update(ref.array, ref.index, values, lax.scatter_mul, mode)

    mul = multiply

    def min(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return scatter_update(ref.array, ref.index, values, lax.scatter_min, mode)

    def max(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        return scatter_update(ref.array, ref.index, values, lax.scatter_max, mode)

    def subtract(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        from .ufuncs import negative
        return ref.add(negative(values), mode=mode)

    # divide and power combine the values of a repeated index first (x / (v1 * v2), x ** (v1 * v2)),
    # so each occurrence divides or raises once more, as numpy's ufunc.at and JAX do.
    def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        from .ufuncs import divide
        return divide(ref.array, ref._product_of_values(values, mode))

    def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        ref = self._unwrapped(wrap_negative_indices)
        from .ufuncs import power
        return power(ref.array, ref._product_of_values(values, mode))

    def _product_of_values(self, values, mode):
        from .creation import ones_like
        return scatter_update(ones_like(self.array), self.index, values, lax.scatter_mul, mode)

    def apply(self, func, *, mode=None, indices_are_sorted=False, unique_indices=False,
            wrap_negative_indices=True):
        """``func`` applied to each selected element once per occurrence of its index."""
        ref = self._unwrapped(wrap_negative_indices)
        def scatter_apply(x, indices, updates, dnums, **kwargs):
            return lax.scatter_apply(x, indices, func, dnums, update_shape=aval_of(updates).shape, **kwargs)
        zero = np.zeros((), aval_of(as_array(ref.array, "at")).dtype)     # no promotion of the array
        return scatter_update(ref.array, ref.index, zero, scatter_apply, mode)


class _IndexUpdateHelper:
    """``x.at``: index it to get an updater, ``x.at[idx].set(v)``."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        _refuse_list_index(index)
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"
