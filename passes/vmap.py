"""The vmap pass: a jaxpr over one example becomes a jaxpr over a batch of them.

The pass retraces. A new builder's inputs are the batched inputs; the
equations of the source jaxpr are replayed in order, each value carrying its
batch dimension (an int, or ``not_mapped`` when the value is the same for
every example). An equation whose inputs are all unbatched is re-emitted as
it is, so unbatched values stay unbatched; otherwise the primitive's rule in
``batch_rules`` emits the batched computation:

    rule(batched_args, batch_dims, **params) -> (out, out_dim)

(lists for primitives with multiple results), JAX's batching-rule signature.
Rules move batch dimensions (``transpose``) and materialise unbatched values
(``broadcast_in_dim``) only where the primitive needs it. Primitives holding
sub-jaxprs batch them recursively (``batch_jaxpr``, ``batch_eval``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, Primitive, ShapedArray
from jaxprc.ir.prims import elementwise as ew
from jaxprc.ir.prims import linalg, reductions
from jaxprc.ir.prims import structural as st
from jaxprc.ir.tracing import Tracer, get_aval, source_info_of, trace_to_jaxpr
from jaxprc.passes.registry import register_pass

from . import emit

__all__ = ["vmap_jaxpr", "batch_rules", "not_mapped", "batch_jaxpr", "batch_eval",
           "BatchSpecError", "moveaxis", "matchaxis", "bdim_at_front"]

not_mapped = None
batch_rules: dict[Primitive, Callable] = {}


class BatchSpecError(ValueError):
    """An output is batched but its out_axes entry is None (the API names the output)."""

    def __init__(self, leaf_idx: int, src: int, dst):
        self.leaf_idx, self.src, self.dst = leaf_idx, src, dst
        super().__init__(f"vmap out_axes[{leaf_idx}] is {dst} but output {leaf_idx} was batched "
                         f"on axis {src}")


# --------------------------------------------------------- emitting helpers

def aval_of(x) -> ShapedArray:
    """The type of a tracer, literal or constant."""
    return x.aval if isinstance(x, (Tracer, Literal)) else get_aval(x)


def batched_aval(aval: ShapedArray, d, size: int) -> ShapedArray:
    """``aval`` with a batch axis of ``size`` inserted at ``d`` (unchanged when ``d`` is None)."""
    if d is None:
        return aval
    return aval.update(shape=aval.shape[:d] + (size,) + aval.shape[d:])


def unbatched_aval(aval: ShapedArray, d) -> ShapedArray:
    """``aval`` without its batch axis ``d`` (one example's type)."""
    if d is None:
        return aval
    return aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])


def shift(axes, d) -> tuple:
    """Per-example axes as axes of the batched value whose batch dimension is ``d``."""
    return tuple(a + (a >= d) for a in axes)


def moveaxis(x, src: int, dst: int):
    """``x`` with axis ``src`` moved to position ``dst`` (one ``transpose``, none if equal)."""
    if src == dst:
        return x
    perm = [i for i in range(aval_of(x).ndim) if i != src]
    perm.insert(dst, src)
    return emit.transpose(x, perm)


def broadcast_batch(x, size: int, axis: int):
    """An unbatched ``x`` repeated ``size`` times along a new ``axis``."""
    shape = list(aval_of(x).shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return emit.broadcast_in_dim(x, shape, dims)


def matchaxis(x, src, dst, size: int):
    """``x`` batched at ``src`` (or unbatched) as a value batched at ``dst`` (or unbatched)."""
    if src == dst:
        return x
    if dst is None:
        raise ValueError("a batched value cannot be made unbatched")
    if src is None:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, d, size: int):
    return matchaxis(x, d, 0, size)


def axis_size_of(args, dims) -> int:
    """The batch size, read off the first batched operand."""
    return next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)


def scalar(value, dtype) -> Literal:
    """A scalar literal of ``dtype``."""
    return Literal(value, ShapedArray((), dtype))


def full(value, dtype, shape):
    """An array of ``shape`` filled with ``value`` (a broadcast literal)."""
    return emit.full(shape, value, dtype)


# ------------------------------------------------------------ interpreter

def batch_eval(jaxpr: Jaxpr, consts: Sequence, args: Sequence, dims: Sequence) -> tuple[list, list]:
    """Replay ``jaxpr`` in the current trace on batched ``args``; returns outputs and their batch dims.

    Emitted equations keep the source equation's location.
    """
    env: dict = {}

    def read(a):
        return (a, not_mapped) if type(a) is Literal else env[a]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, not_mapped)
    for v, x, d in zip(jaxpr.invars, args, dims):
        env[v] = (x, d)
    for eqn in jaxpr.eqns:
        vals, in_dims = zip(*map(read, eqn.invars)) if eqn.invars else ((), ())
        with source_info_of(eqn.source_info):
            if all(d is not_mapped for d in in_dims):
                outs = eqn.primitive.bind(*vals, **eqn.params)
                out_dims = [not_mapped] * len(eqn.outvars) if eqn.primitive.multiple_results else not_mapped
            else:
                rule = batch_rules.get(eqn.primitive)
                if rule is None:
                    raise NotImplementedError(f"Batching rule for '{eqn.primitive.name}' not implemented "
                                              "(the vmap pass has no rule for this primitive)")
                outs, out_dims = rule(list(vals), list(in_dims), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs, out_dims = [outs], [out_dims]
        for v, x, d in zip(eqn.outvars, outs, out_dims):
            env[v] = (x, d)
    outs, out_dims = zip(*map(read, jaxpr.outvars)) if jaxpr.outvars else ((), ())
    return list(outs), list(out_dims)


def batch_jaxpr(cj: ClosedJaxpr, size: int, in_dims: Sequence,
                force_out: Sequence[bool] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """Batch a sub-jaxpr (no consts) along ``size``: inputs batched at ``in_dims``.

    Batched outputs come out at axis 0; ``force_out[i]`` materialises output i
    even when it is unbatched, so loop carries and branches agree. Returns the
    batched jaxpr and which outputs are batched.
    """
    force_out = force_out or [False] * len(cj.out_avals)
    out_batched: list[bool] = []

    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_dims)
        out_batched[:] = [d is not None or f for d, f in zip(dims, force_out)]
        return [matchaxis(x, d, 0 if b else None, size) for x, d, b in zip(outs, dims, out_batched)]

    avals = [batched_aval(a, d, size) for a, d in zip(cj.in_avals, in_dims)]
    batched = trace_to_jaxpr(fun, avals, name="vmap")
    assert not batched.consts, "batching a sub-jaxpr created constants"
    return batched, out_batched


def _normalize_axes(axes, count: int, ranks: Sequence[int], what: str) -> tuple:
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,) * count
    if len(axes) != count:
        raise ValueError(f"vmap {what} has {len(axes)} entries for {count} values")
    out = []
    for a, r in zip(axes, ranks):
        if a is not None:
            if not -(r + 1) <= a <= r:
                raise ValueError(f"vmap {what} entry {a} is out of range for a value of rank {r} "
                                 f"(its batched rank is {r + 1})")
            a = a % (r + 1)
        out.append(a)
    return tuple(out)


def vmap_jaxpr(cj: ClosedJaxpr, in_axes=0, axis_size: int | None = None, out_axes=0) -> ClosedJaxpr:
    """The batched version of ``cj``.

    ``in_axes``/``out_axes``: an int or None for every input/output, or one
    per input/output; negative axes count from the end of the batched value.
    ``axis_size`` is the batch size. An output batched where its out axis is
    None raises ``BatchSpecError``; an unbatched output with an int out axis
    is broadcast.
    """
    if axis_size is None:
        raise ValueError("the vmap pass needs axis_size (the batch size)")
    in_axes = _normalize_axes(in_axes, len(cj.in_avals), [a.ndim for a in cj.in_avals], "in_axes")
    out_axes = _normalize_axes(out_axes, len(cj.out_avals), [a.ndim for a in cj.out_avals], "out_axes")

    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_axes)
        for i, (d, dst) in enumerate(zip(dims, out_axes)):
            if dst is None and d is not None:
                raise BatchSpecError(i, d, dst)
        return [matchaxis(x, d, dst, axis_size) for x, d, dst in zip(outs, dims, out_axes)]

    avals = [batched_aval(a, d, axis_size) for a, d in zip(cj.in_avals, in_axes)]
    return trace_to_jaxpr(fun, avals, name="vmap")


# ------------------------------------------------------------ elementwise

def align(args, dims, scalar_ok=frozenset()):
    """Operands of an elementwise-style primitive, all batched at one axis; returns (args, axis).

    Operands have the per-example shape of the result, or are per-example
    scalars; batched scalars are broadcast to the full shape. Unbatched
    operands at the positions in ``scalar_ok`` that are scalars stay as they
    are (the primitive accepts a scalar there); other unbatched operands are
    materialised.
    """
    d0 = dims[0]
    if d0 is not None and all(d == d0 for d in dims):      # the common case: already aligned
        ndim = aval_of(args[0]).ndim
        if all(aval_of(x).ndim == ndim for x in args):
            return list(args), d0
    size = axis_size_of(args, dims)
    ranks = [aval_of(x).ndim - (d is not None) for x, d in zip(args, dims)]
    rank = max(ranks)
    full = next(i for i, r in enumerate(ranks) if r == rank)
    out_dim = next((d for d, r in zip(dims, ranks) if d is not None and r == rank), 0)
    shape = list(unbatched_aval(aval_of(args[full]), dims[full]).shape)
    shape.insert(out_dim, size)
    aligned = []
    for i, (x, d, r) in enumerate(zip(args, dims, ranks)):
        if d is None and r == 0 and i in scalar_ok:
            aligned.append(x)
        elif r == rank:
            aligned.append(matchaxis(x, d, out_dim, size))
        else:   # a per-example scalar against arrays
            bdims = () if d is None else (out_dim,)
            aligned.append(emit.broadcast_in_dim(x, shape, bdims))
    return aligned, out_dim


def elementwise_rule(prim: Primitive, scalar_ok=frozenset()):
    """The batching rule of an elementwise-style ``prim`` (operands aligned by ``align``)."""
    def rule(args, dims, **params):
        args, d = align(args, dims, scalar_ok)
        return prim.bind(*args, **params), d
    return rule


for _prim in vars(ew).values():
    if isinstance(_prim, Primitive) and hasattr(_prim, "arity"):
        batch_rules[_prim] = elementwise_rule(_prim)
batch_rules[ew.convert_element_type_p] = elementwise_rule(ew.convert_element_type_p)
batch_rules[ew.clamp_p] = elementwise_rule(ew.clamp_p, scalar_ok={0, 2})
batch_rules[ew.select_n_p] = elementwise_rule(ew.select_n_p, scalar_ok={0})


def _bitcast_convert_type_rule(args, dims, *, new_dtype):
    (x,), (d,) = args, dims
    aval = aval_of(x)
    if aval.dtype.itemsize != np.dtype(new_dtype).itemsize and d == aval.ndim - 1:
        x, d = moveaxis(x, d, 0), 0     # the trailing axis is where elements split or merge
    return ew.bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


batch_rules[ew.bitcast_convert_type_p] = _bitcast_convert_type_rule


# ------------------------------------------------------------- structural

def _broadcast_in_dim_rule(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]
    x = moveaxis(x, d, 0)
    return st.broadcast_in_dim_p.bind(
        x, shape=(size, *shape), broadcast_dimensions=(0, *(b + 1 for b in broadcast_dimensions))), 0


def _reshape_rule(args, dims, *, new_sizes, dimensions):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]
    x = moveaxis(x, d, 0)
    return st.reshape_p.bind(x, new_sizes=(size, *new_sizes), dimensions=dimensions), 0


def _transpose_rule(args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d, *shift(permutation, d))
    return st.transpose_p.bind(x, permutation=perm), 0


def _squeeze_rule(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    dimensions = shift(dimensions, d)
    return st.squeeze_p.bind(x, dimensions=dimensions), d - sum(a < d for a in dimensions)


def _axes_rule(prim: Primitive, param: str):
    """Primitives acting along per-example axes named by ``param``; the batch axis stays put."""
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        params[param] = shift(params[param], d)
        return prim.bind(x, **params), d
    return rule


def _axis_rule(prim: Primitive):
    """Cumulative ops: one ``axis``; the batch axis stays put."""
    def rule(args, dims, *, axis, reverse):
        (x,), (d,) = args, dims
        return prim.bind(x, axis=shift((axis,), d)[0], reverse=reverse), d
    return rule


def _reduction_rule(prim: Primitive):
    """Reductions and argmax/argmin: the reduced axes disappear, the batch axis moves left past them."""
    def rule(args, dims, *, axes, **params):
        (x,), (d,) = args, dims
        axes = shift(axes, d)
        return prim.bind(x, axes=axes, **params), d - sum(a < d for a in axes)
    return rule


def _pad_rule(args, dims, *, padding_config):
    (x, padval), (xd, pd) = args, dims
    size = axis_size_of(args, dims)
    if pd is None:
        config = list(padding_config)
        config.insert(xd, (0, 0, 0))
        return st.pad_p.bind(x, padval, padding_config=tuple(config)), xd
    # A per-example padding value: pad with zeros, then select the padding positions.
    x = matchaxis(x, xd, 0, size)
    config = ((0, 0, 0), *padding_config)
    dtype = aval_of(x).dtype
    padded = st.pad_p.bind(x, scalar(0, dtype), padding_config=config)
    inside = st.pad_p.bind(full(True, dt.bool_, aval_of(x).shape), scalar(False, dt.bool_), padding_config=config)
    fill = st.broadcast_in_dim_p.bind(padval, shape=aval_of(padded).shape, broadcast_dimensions=(0,))
    return ew.select_n_p.bind(inside, fill, padded), 0


def _concatenate_rule(args, dims, *, dimension):
    args, d = align(args, dims)
    return st.concatenate_p.bind(*args, dimension=shift((dimension,), d)[0]), d


def _slice_rule(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    size = aval_of(x).shape[d]

    def insert(t, v):
        return None if t is None else (*t[:d], v, *t[d:])
    return st.slice_p.bind(x, start_indices=insert(start_indices, 0),
                           limit_indices=insert(limit_indices, size),
                           strides=insert(strides, 1)), d


def _stack_indices(indices, dims, size: int):
    """Per-example scalar start indices as one ``(size, len(indices))`` index array."""
    dtype = next(aval_of(i).dtype for i, d in zip(indices, dims) if d is not None)
    columns = []
    for i, d in zip(indices, dims):
        if aval_of(i).dtype != dtype:
            i = ew.convert_element_type_p.bind(i, new_dtype=dtype, weak_type=False)
        columns.append(st.broadcast_in_dim_p.bind(
            i, shape=(size, 1), broadcast_dimensions=() if d is None else (0,)))
    if len(columns) == 1:
        return columns[0]
    return st.concatenate_p.bind(*columns, dimension=1)


def _zero_index(indices):
    dtype = aval_of(indices[0]).dtype if indices else dt.int32
    return scalar(0, dtype)


def _dynamic_slice_rule(args, dims, *, slice_sizes):
    (x, *indices), (xd, *idims) = args, dims
    size = axis_size_of(args, dims)
    if all(d is None for d in idims):
        indices.insert(xd, _zero_index(indices))
        sizes = (*slice_sizes[:xd], size, *slice_sizes[xd:])
        return st.dynamic_slice_p.bind(x, *indices, slice_sizes=sizes), xd
    # Per-example start indices: a gather with one index vector per example (JAX does the same).
    index = _stack_indices(indices, idims, size)
    rank = len(slice_sizes)
    if xd is None:
        dnums = st.GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)), collapsed_slice_dims=(),
                                          start_index_map=tuple(range(rank)))
        sizes = tuple(slice_sizes)
    else:
        x = moveaxis(x, xd, 0)
        dnums = st.GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)), collapsed_slice_dims=(),
                                          start_index_map=tuple(range(1, rank + 1)),
                                          operand_batching_dims=(0,), start_indices_batching_dims=(0,))
        sizes = (1, *slice_sizes)
    return st.gather_p.bind(x, index, dimension_numbers=dnums, slice_sizes=sizes,
                            indices_are_sorted=False, unique_indices=False,
                            mode=st.GatherScatterMode.CLIP, fill_value=None), 0


def _dynamic_update_slice_rule(args, dims):
    (x, update, *indices), (xd, ud, *idims) = args, dims
    size = axis_size_of(args, dims)
    if all(d is None for d in idims):
        (x, update), d = align([x, update], [xd, ud])
        indices.insert(d, _zero_index(indices))
        return st.dynamic_update_slice_p.bind(x, update, *indices), d
    # Per-example start indices: a scatter with one window per example.
    index = _stack_indices(indices, idims, size)
    x, update = matchaxis(x, xd, 0, size), matchaxis(update, ud, 0, size)
    rank = len(indices)
    dnums = st.ScatterDimensionNumbers(update_window_dims=tuple(range(1, rank + 1)), inserted_window_dims=(),
                                       scatter_dims_to_operand_dims=tuple(range(1, rank + 1)),
                                       operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    return st.scatter_p.bind(x, index, update, dimension_numbers=dnums, indices_are_sorted=True,
                             unique_indices=True, mode=st.GatherScatterMode.CLIP), 0


def _plus1(axes) -> tuple:
    return tuple(a + 1 for a in axes)


def _gather_rule(args, dims, *, dimension_numbers, slice_sizes, **params):
    (x, index), (xd, id_) = args, dims
    dn = dimension_numbers
    if id_ is None:      # the batch axis of the operand becomes a leading offset (window) axis
        x = moveaxis(x, xd, 0)
        dn = st.GatherDimensionNumbers(
            offset_dims=(0, *_plus1(dn.offset_dims)), collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
            start_index_map=_plus1(dn.start_index_map), operand_batching_dims=_plus1(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        slice_sizes = (aval_of(x).shape[0], *slice_sizes)
    elif xd is None:     # a leading batch axis of the indices is a leading batch axis of the result
        index = moveaxis(index, id_, 0)
        dn = dn._replace(offset_dims=_plus1(dn.offset_dims),
                         start_indices_batching_dims=_plus1(dn.start_indices_batching_dims))
    else:                # both batched: a new pair of batching dims
        x, index = moveaxis(x, xd, 0), moveaxis(index, id_, 0)
        dn = st.GatherDimensionNumbers(
            offset_dims=_plus1(dn.offset_dims), collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
            start_index_map=_plus1(dn.start_index_map),
            operand_batching_dims=(0, *_plus1(dn.operand_batching_dims)),
            start_indices_batching_dims=(0, *_plus1(dn.start_indices_batching_dims)))
        slice_sizes = (1, *slice_sizes)
    return st.gather_p.bind(x, index, dimension_numbers=dn, slice_sizes=slice_sizes, **params), 0


def _scatter_rule(prim: Primitive):
    def rule(args, dims, *, dimension_numbers, **params):
        (x, index, updates), (xd, id_, ud) = args, dims
        size = axis_size_of(args, dims)
        dn = dimension_numbers
        x, updates = matchaxis(x, xd, 0, size), matchaxis(updates, ud, 0, size)
        if id_ is None:  # the batch axis is a leading window axis of the updates
            dn = st.ScatterDimensionNumbers(
                update_window_dims=(0, *_plus1(dn.update_window_dims)),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_plus1(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
        else:            # operand and indices batched together
            index = moveaxis(index, id_, 0)
            dn = st.ScatterDimensionNumbers(
                update_window_dims=_plus1(dn.update_window_dims),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0, *_plus1(dn.operand_batching_dims)),
                scatter_indices_batching_dims=(0, *_plus1(dn.scatter_indices_batching_dims)))
        return prim.bind(x, index, updates, dimension_numbers=dn, **params), 0
    return rule


def _sort_rule(args, dims, *, dimension, **params):
    args, d = align(args, dims)
    outs = st.sort_p.bind(*args, dimension=shift((dimension,), d)[0], **params)
    return outs, [d] * len(outs)


batch_rules.update({
    st.broadcast_in_dim_p: _broadcast_in_dim_rule,
    st.reshape_p: _reshape_rule,
    st.transpose_p: _transpose_rule,
    st.squeeze_p: _squeeze_rule,
    st.rev_p: _axes_rule(st.rev_p, "dimensions"),
    st.pad_p: _pad_rule,
    st.concatenate_p: _concatenate_rule,
    st.slice_p: _slice_rule,
    st.dynamic_slice_p: _dynamic_slice_rule,
    st.dynamic_update_slice_p: _dynamic_update_slice_rule,
    st.gather_p: _gather_rule,
    st.sort_p: _sort_rule,
    st.argmax_p: _reduction_rule(st.argmax_p),
    st.argmin_p: _reduction_rule(st.argmin_p),
})
for _prim in (st.scatter_p, st.scatter_add_p, st.scatter_mul_p, st.scatter_min_p, st.scatter_max_p):
    batch_rules[_prim] = _scatter_rule(_prim)
for _prim in (st.cumsum_p, st.cumprod_p, st.cummax_p, st.cummin_p, st.cumlogsumexp_p):
    batch_rules[_prim] = _axis_rule(_prim)
for _prim in (reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
              reductions.reduce_min_p, reductions.reduce_and_p, reductions.reduce_or_p,
              reductions.reduce_xor_p):
    batch_rules[_prim] = _reduction_rule(_prim)


# ---------------------------------------------------------------- linalg

def _dot_general_rule(args, dims, *, dimension_numbers, **params):
    (lhs, rhs), (ld, rd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if ld is not None and rd is not None:     # a new batch dimension, first in the result
        lc, lb, rc, rb = shift(lc, ld), (ld, *shift(lb, ld)), shift(rc, rd), (rd, *shift(rb, rd))
        out_dim = 0
    elif ld is not None:                      # a free lhs dimension
        lc, lb = shift(lc, ld), shift(lb, ld)
        free = [i for i in range(aval_of(lhs).ndim) if i not in lc and i not in lb]
        out_dim = len(lb) + free.index(ld)
    else:                                     # a free rhs dimension, after the lhs ones
        rc, rb = shift(rc, rd), shift(rb, rd)
        free = [i for i in range(aval_of(rhs).ndim) if i not in rc and i not in rb]
        lhs_free = aval_of(lhs).ndim - len(lc) - len(lb)
        out_dim = len(lb) + lhs_free + free.index(rd)
    out = linalg.dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)), **params)
    return out, out_dim


batch_rules[linalg.dot_general_p] = _dot_general_rule


register_pass("vmap", vmap_jaxpr)
