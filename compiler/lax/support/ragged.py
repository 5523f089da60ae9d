"""``ragged_dot`` / ``ragged_dot_general``: matrix products over groups of consecutive rows.

``group_sizes[g]`` rows of the lhs ragged dimension belong to group ``g`` (in
order; rows past their sum belong to none). As in JAX's lowering for CPU and
GPU, each group's rows are selected with a mask and the groups become one more
dimension of a ``dot_general``, so derivatives and batching are those of the
pieces. The three modes of ``ragged_dot_general`` are JAX's: the ragged
dimension is a free lhs dimension (the rhs has a group dimension), a
contracting dimension (the result gets a leading group dimension), or a batch
dimension (a plain product: the groups only partition the batch, as in JAX).
``group_sizes`` is 1-D here.
"""
from __future__ import annotations

import dataclasses

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from . import operands as ops

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """Dot dimension numbers plus the lhs ragged dimension and the rhs group dimension."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def _group_mask(group_sizes, size: int):
    """bool[g, size]: row ``i`` is in group ``g`` (groups are consecutive runs of rows)."""
    ends = lax.cumsum(group_sizes)
    starts = lax.sub(ends, group_sizes)
    pos = lax.broadcasted_iota(ops.aval(group_sizes).dtype, (ops.aval(group_sizes).shape[0], size), 1)
    return lax.bitwise_and(lax.le(lax.broadcast_in_dim(starts, ops.aval(pos).shape, (0,)), pos),
                           lax.lt(pos, lax.broadcast_in_dim(ends, ops.aval(pos).shape, (0,))))


def _expand(x, dim: int, group_sizes):
    """[g, *x.shape]: ``x`` with the rows of ``dim`` outside group ``g`` zeroed, per group."""
    aval = ops.aval(x)
    g = ops.aval(group_sizes).shape[0]
    shape = (g,) + aval.shape
    mask = lax.broadcast_in_dim(_group_mask(group_sizes, aval.shape[dim]), shape, (0, dim + 1))
    return lax.select(mask, lax.broadcast_in_dim(x, shape, tuple(range(1, len(shape)))), lax.full(shape, 0, aval.dtype))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """The product of ``lhs`` and ``rhs`` grouped along the lhs ragged dimension (see the module doc)."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is not supported (as in JAX off TPU)")
    if out_sharding is not None:
        raise NotImplementedError("ragged_dot_general: jaxprc has no shardings (out_sharding must be None)")
    gs_aval = ops.aval(group_sizes)
    if gs_aval.ndim != 1 or not dt.is_int(gs_aval.dtype):
        raise ValueError(f"ragged_dot_general: group_sizes must be a 1-D integer array here, got "
                         f"{gs_aval.str_short()}")
    dn = ragged_dot_dimension_numbers
    (l_contract, r_contract), (l_batch, r_batch) = dn.dot_dimension_numbers
    if len(dn.lhs_ragged_dimensions) != 1:
        raise ValueError("ragged_dot_general: exactly one lhs ragged dimension is required")
    ragged = ops.canonical_axis(dn.lhs_ragged_dimensions[0], ops.aval(lhs).ndim)
    plus1 = lambda dims: tuple(d + 1 for d in dims)       # noqa: E731 (lhs dims after the group dim)
    dot = lambda a, b, dims: lax.dot_general(a, b, dims, precision=precision,     # noqa: E731
                                             preferred_element_type=preferred_element_type)
    if ragged in l_contract:          # ragged contraction: one product per group, groups leading
        expanded, g = _expand(lhs, ragged, group_sizes), gs_aval.shape[0]
        rhs_g = lax.broadcast_in_dim(rhs, (g,) + ops.aval(rhs).shape, tuple(range(1, ops.aval(rhs).ndim + 1)))
        return dot(expanded, rhs_g, ((plus1(l_contract), plus1(r_contract)),
                                     ((0,) + plus1(l_batch), (0,) + plus1(r_batch))))
    if ragged in l_batch:             # ragged batch: the groups only partition the batch (JAX's plain dot)
        return dot(lhs, rhs, ((l_contract, r_contract), (l_batch, r_batch)))
    if len(dn.rhs_group_dimensions) != 1:
        raise ValueError("ragged_dot_general: a ragged non-contracting lhs dimension needs one rhs group dimension")
    r_group = ops.canonical_axis(dn.rhs_group_dimensions[0], ops.aval(rhs).ndim)
    return dot(_expand(lhs, ragged, group_sizes), rhs, ((plus1(l_contract) + (0,), tuple(r_contract) + (r_group,)),
                               (plus1(l_batch), r_batch)))


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None,
               out_sharding=None):
    """``lhs[m, k]`` times ``rhs[g, k, n]``: row ``i`` of lhs uses ``rhs[g]`` of its group -> [m, n]."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision, preferred_element_type, group_offset,
                              out_sharding)


