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
(``broadcast_in_dim``) only where the primitive needs it. Control flow and
calls batch their sub-jaxprs recursively; a ``cond`` whose predicate is
batched becomes a ``select_n`` over the branches' results, a ``while`` whose
condition is batched runs until no example wants another step, freezing the
carry of the examples that are done.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, Primitive, ShapedArray, Thunk
from jaxprc.ir.prims import control_flow as cf
from jaxprc.ir.prims import custom as cst
from jaxprc.ir.prims import elementwise as ew
from jaxprc.ir.prims import linalg, reductions
from jaxprc.ir.prims import structural as st
from jaxprc.ir.tracing import Tracer, get_aval, source_info_of, trace_to_jaxpr
from jaxprc.passes.jvp import instantiate_zeros
from jaxprc.passes.registry import register_pass

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
    return st.transpose_p.bind(x, permutation=tuple(perm))


def broadcast_batch(x, size: int, axis: int):
    """An unbatched ``x`` repeated ``size`` times along a new ``axis``."""
    shape = list(aval_of(x).shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return st.broadcast_in_dim_p.bind(x, shape=tuple(shape), broadcast_dimensions=dims)


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
    return st.broadcast_in_dim_p.bind(scalar(value, dtype), shape=tuple(shape), broadcast_dimensions=())


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
    if isinstance(axis_size, bool) or not isinstance(axis_size, (int, np.integer)) or axis_size < 0:
        raise ValueError(f"the vmap pass's axis_size (the batch size) must be a non-negative "
                         f"integer, got {axis_size!r}")
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
            aligned.append(st.broadcast_in_dim_p.bind(x, shape=tuple(shape), broadcast_dimensions=bdims))
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


# ---------------------------------------------------------- control flow

def _front_dims(batched) -> list:
    """Batch dims of values that are batched at axis 0 or not at all."""
    return [0 if b else None for b in batched]


def _cond_rule(args, dims, *, branches):
    (index, *ops), (index_dim, *op_dims) = args, dims
    size = axis_size_of(args, dims)
    if index_dim is not None:
        return _cond_as_select(index, index_dim, ops, op_dims, branches, size)
    out_batched = [False] * len(branches[0].out_avals)
    while True:   # the branches must agree on which outputs are batched
        found = [batch_jaxpr(b, size, op_dims, out_batched)[1] for b in branches]
        joined = [any(bs) for bs in zip(out_batched, *found)]
        if joined == out_batched:
            break
        out_batched = joined
    new_branches = tuple(batch_jaxpr(b, size, op_dims, out_batched)[0] for b in branches)
    outs = cf.cond_p.bind(index, *ops, branches=new_branches)
    return outs, _front_dims(out_batched)


def _cond_as_select(index, index_dim, ops, op_dims, branches, size):
    """A per-example branch choice: run every branch, then select each example's results."""
    index = moveaxis(index, index_dim, 0)
    if aval_of(index).dtype != dt.int32:
        index = ew.convert_element_type_p.bind(index, new_dtype=dt.int32, weak_type=False)
    # cond clamps an out-of-range index to the first/last branch; select_n needs it in range.
    index = ew.clamp_p.bind(scalar(0, dt.int32), index, scalar(len(branches) - 1, dt.int32))
    # An example must get no gradient through a branch it does not take: that branch's zero
    # cotangent times an infinite local derivative would be NaN. So each branch sees
    # stop_gradient(x) for the examples that skip it (JAX does the same).
    inexact = [dt.is_inexact(aval_of(x).dtype) for x in ops]
    ops = [matchaxis(x, d, 0, size) if g else x for x, d, g in zip(ops, op_dims, inexact)]
    op_dims = [0 if g else d for d, g in zip(op_dims, inexact)]
    stopped = [ew.stop_gradient_p.bind(x) if g else None for x, g in zip(ops, inexact)]
    results = []
    for i, branch in enumerate(branches):
        taken = ew.eq_p.bind(index, full(i, dt.int32, (size,)))
        guarded = [ew.select_n_p.bind(*align([taken, s, x], [0, 0, 0])[0]) if g else x
                   for x, s, g in zip(ops, stopped, inexact)]
        results.append(batch_eval(branch.jaxpr, branch.consts, guarded, op_dims))
    outs = []
    for per_branch in zip(*(zip(*r) for r in results)):
        cases = [matchaxis(x, d, 0, size) for x, d in per_branch]
        outs.append(ew.select_n_p.bind(*align([index, *cases], [0] * (len(cases) + 1))[0]))
    return outs, [0] * len(outs)


def _carry_fixpoint(body: ClosedJaxpr, size: int, carry_batched: list[bool],
                    in_dims_for: Callable[[list[bool]], list], num_ys: int = 0) -> list[bool]:
    """Which loop carries end up batched: those batched on entry, and those an iteration batches."""
    while True:
        force = [*carry_batched, *[False] * num_ys]
        _, out_batched = batch_jaxpr(body, size, in_dims_for(carry_batched), force)
        joined = [a or b for a, b in zip(carry_batched, out_batched)]
        if joined == carry_batched:
            return carry_batched
        carry_batched = joined


def _while_rule(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = axis_size_of(args, dims)
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, init = args[:nc], args[nc:nc + nb], args[nc + nb:]
    cdims, bdims, idims = dims[:nc], dims[nc:nc + nb], dims[nc + nb:]
    carry_b = _carry_fixpoint(body_jaxpr, size, [d is not None for d in idims],
                              lambda cb: [*bdims, *_front_dims(cb)])
    carry_dims = _front_dims(carry_b)
    _, (pred_batched,) = batch_jaxpr(cond_jaxpr, size, [*cdims, *carry_dims])
    if pred_batched:
        return _while_batched_pred(cconsts, cdims, bconsts, bdims, init, idims, size,
                                   cond_jaxpr, body_jaxpr)
    new_cond, _ = batch_jaxpr(cond_jaxpr, size, [*cdims, *carry_dims])
    new_body, _ = batch_jaxpr(body_jaxpr, size, [*bdims, *carry_dims], carry_b)
    init = [matchaxis(x, d, cd, size) for x, d, cd in zip(init, idims, carry_dims)]
    outs = cf.while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=new_cond, body_jaxpr=new_body,
                           cond_nconsts=nc, body_nconsts=nb)
    return outs, carry_dims


def _while_batched_pred(cconsts, cdims, bconsts, bdims, init, idims, size, cond_jaxpr, body_jaxpr):
    """Examples stop at different steps: loop while any continues; the others keep their carry."""
    nc, nb, n = len(cconsts), len(bconsts), len(init)
    carry_dims = [0] * n
    cond_avals = [batched_aval(a, d, size) for a, d in zip(cond_jaxpr.in_avals, [*cdims, *carry_dims])]
    body_avals = [batched_aval(a, d, size) for a, d in zip(body_jaxpr.in_avals, [*bdims, *carry_dims])]

    def predicate(consts, carry):
        (pred,), (d,) = batch_eval(cond_jaxpr.jaxpr, (), [*consts, *carry], [*cdims, *carry_dims])
        return matchaxis(pred, d, 0, size)

    def new_cond(*args):
        return [reductions.reduce_or_p.bind(predicate(args[:nc], args[nc:]), axes=(0,))]

    def new_body(*args):
        cc, bc, carry = args[:nc], args[nc:nc + nb], args[nc + nb:]
        pred = predicate(cc, carry)
        stepped, dims = batch_eval(body_jaxpr.jaxpr, (), [*bc, *carry], [*bdims, *carry_dims])
        outs = []
        for old, new, d in zip(carry, stepped, dims):
            which, old, new = align([pred, old, matchaxis(new, d, 0, size)], [0, 0, 0])[0]
            outs.append(ew.select_n_p.bind(which, old, new))
        return outs

    cond_j = trace_to_jaxpr(new_cond, cond_avals, name="vmap")
    body_j = trace_to_jaxpr(new_body, [*cond_avals[:nc], *body_avals], name="vmap")
    init = [matchaxis(x, d, 0, size) for x, d in zip(init, idims)]
    # The body evaluates the predicate too, so it gets the cond consts ahead of its own.
    outs = cf.while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=cond_j, body_jaxpr=body_j,
                           cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, carry_dims


def _scan_rule(args, dims, *, jaxpr, num_consts, num_carry, **params):
    size = axis_size_of(args, dims)
    nc, nk = num_consts, num_carry
    consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    cdims, idims, xdims = dims[:nc], dims[nc:nc + nk], dims[nc + nk:]
    # The scanned axis is 0, so batched xs carry their batch axis at 1 (0 in the body's slices).
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xdims)]
    slice_dims = [None if d is None else 0 for d in xdims]
    ny = len(jaxpr.out_avals) - nk
    in_dims_for = lambda cb: [*cdims, *_front_dims(cb), *slice_dims]
    carry_b = _carry_fixpoint(jaxpr, size, [d is not None for d in idims], in_dims_for, ny)
    new_jaxpr, out_b = batch_jaxpr(jaxpr, size, in_dims_for(carry_b), [*carry_b, *[False] * ny])
    carry_dims = _front_dims(carry_b)
    init = [matchaxis(x, d, cd, size) for x, d, cd in zip(init, idims, carry_dims)]
    outs = cf.scan_p.bind(*consts, *init, *xs, jaxpr=new_jaxpr, num_consts=nc, num_carry=nk, **params)
    return outs, [*carry_dims, *(1 if b else None for b in out_b[nk:])]


def _call_rule(prim: Primitive):
    """Calls (nested jit, checkpoint): batch the callee."""
    def rule(args, dims, *, jaxpr, **params):
        new_jaxpr, out_b = batch_jaxpr(jaxpr, axis_size_of(args, dims), dims)
        outs = prim.bind(*args, jaxpr=new_jaxpr, **params)
        return outs, _front_dims(out_b)
    return rule


batch_rules.update({
    cf.cond_p: _cond_rule,
    cf.while_p: _while_rule,
    cf.scan_p: _scan_rule,
    cf.jit_p: _call_rule(cf.jit_p),
    cf.checkpoint_p: _call_rule(cf.checkpoint_p),
})


register_pass("vmap", vmap_jaxpr)


# ------------------------------------------------------- custom derivatives
# vmap(custom_jvp_call(f, f_jvp)) == custom_jvp_call(vmap(f), vmap(f_jvp)), likewise fwd and bwd:
# the rules stay attached, so differentiating the batched program still uses them. Rule jaxprs
# are batched lazily (thunks), memoized per (rule, batch dims) so that a rule calling its own
# function batches into a rule referring to itself.

_BATCHED_RULES: dict = {}     # (id(rule), size, dims, ...) -> (rule, its batched thunk)
_MAX_BATCHED_RULES = 4096


def _batch_all_at_front(cj: ClosedJaxpr, size: int, in_dims: Sequence) -> ClosedJaxpr:
    """Batch a rule jaxpr (consts allowed); every output comes out batched at axis 0."""
    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_dims)
        return [matchaxis(x, d, 0, size) for x, d in zip(outs, dims)]
    return trace_to_jaxpr(fun, [batched_aval(a, d, size) for a, d in zip(cj.in_avals, in_dims)],
                          name="vmap")


def _rule_dims(dims, num_consts: int, arg_avals, with_tangents: bool):
    """``dims_of(rule)``: batch dims of a rule jaxpr's inputs: its own consts, the arguments,
    (their tangents)."""
    arg_dims = list(dims[num_consts:])
    tangent_dims = [d for d, a in zip(arg_dims, arg_avals) if dt.is_inexact(a.dtype)] if with_tangents else []

    def dims_of(rule: ClosedJaxpr):
        n_rule_consts = len(rule.in_avals) - len(arg_dims) - len(tangent_dims)
        return list(dims[:n_rule_consts]) + arg_dims + tangent_dims
    return dims_of


def _memo_batched(rule: Thunk, size: int, dims, num_consts, arg_avals, with_tangents) -> Thunk:
    """A thunk of ``rule`` batched like the node's operands ``dims``, memoized."""
    key = (id(rule), size, tuple(dims), num_consts, with_tangents)
    hit = _BATCHED_RULES.get(key)
    if hit is None:
        dims_of = _rule_dims(dims, num_consts, arg_avals, with_tangents)
        batched = Thunk(lambda: _batch_all_at_front(rule(), size, dims_of(rule())), name=rule.name)
        if len(_BATCHED_RULES) >= _MAX_BATCHED_RULES:
            del _BATCHED_RULES[next(iter(_BATCHED_RULES))]
        hit = _BATCHED_RULES[key] = (rule, batched)
    return hit[1]


def _custom_jvp_call_rule(args, dims, *, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    size = axis_size_of(args, dims)
    n_out = len(fun_jaxpr.out_avals)
    fun, _ = batch_jaxpr(fun_jaxpr, size, dims, [True] * n_out)
    rule = _memo_batched(jvp_jaxpr_thunk, size, dims, num_consts, fun_jaxpr.in_avals[num_consts:], True)
    outs = cst.custom_jvp_call_jaxpr_p.bind(*args, fun_jaxpr=fun, jvp_jaxpr_thunk=rule,
                                            num_consts=num_consts, symbolic_zeros=symbolic_zeros)
    return outs, [0] * n_out


class BatchedBwd(Thunk):
    """A custom_vjp ``bwd`` mapped over a batch: ``call`` takes residuals and cotangents batched
    at axis 0 and batches the unbatched bwd's jaxpr inline; as a thunk, its batched jaxpr."""

    def __init__(self, bwd: Thunk, size: int):
        super().__init__(self._trace, bwd.name)
        self.bwd, self.size = bwd, size

    def call(self, *args):
        j = self.bwd()
        outs, dims = batch_eval(j.jaxpr, j.consts, [instantiate_zeros(a) for a in args], [0] * len(args))
        return [matchaxis(x, d, 0, self.size) for x, d in zip(outs, dims)]

    def _trace(self) -> ClosedJaxpr:
        avals = [batched_aval(a, 0, self.size) for a in self.bwd().in_avals]
        return trace_to_jaxpr(self.call, avals, name="vmap")


def _custom_vjp_call_rule(args, dims, *, fun_jaxpr, fwd_jaxpr_thunk, bwd, num_consts, out_trees,
                          symbolic_zeros):
    size = axis_size_of(args, dims)
    n_out = len(fun_jaxpr.out_avals)
    fun, _ = batch_jaxpr(fun_jaxpr, size, dims, [True] * n_out)
    fwd = _memo_batched(fwd_jaxpr_thunk, size, dims, num_consts, fun_jaxpr.in_avals[num_consts:], False)
    outs = cst.custom_vjp_call_jaxpr_p.bind(*args, fun_jaxpr=fun, fwd_jaxpr_thunk=fwd,
                                            bwd=BatchedBwd(bwd, size), num_consts=num_consts,
                                            out_trees=out_trees, symbolic_zeros=symbolic_zeros)
    return outs, [0] * n_out


def _custom_lin_rule(args, dims, *, num_res, bwd, out_avals, symbolic_zeros):
    """A linearized custom_vjp call on a batch: residuals and tangents at axis 0, bwd mapped."""
    size = axis_size_of(args, dims)
    args = [matchaxis(x, d, 0, size) for x, d in zip(args, dims)]
    outs = cst.custom_lin_p.bind(*args, num_res=num_res, bwd=BatchedBwd(bwd, size),
                                 out_avals=tuple(batched_aval(a, 0, size) for a in out_avals),
                                 symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(out_avals)


batch_rules.update({
    cst.custom_jvp_call_jaxpr_p: _custom_jvp_call_rule,
    cst.custom_vjp_call_jaxpr_p: _custom_vjp_call_rule,
    cst.custom_lin_p: _custom_lin_rule,
})
