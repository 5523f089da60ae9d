"""Top-k: ``top_k`` (the ``k`` largest entries along an axis, and their indices) and JAX's
``approx_max_k`` / ``approx_min_k``.

``top_k`` orders as XLA's ``chlo.top_k`` does (JAX's lowering): a total order in
which NaN is largest and 0.0 ranks above -0.0, ties kept in index order. Its
derivative moves the tangent by the selected indices.

The approximate versions are exact here: on CPU and GPU JAX's ``approx_top_k``
also falls back to a sort and a slice, so for inputs without NaN the results are
JAX's (with NaNs JAX's CPU fallback, comparing with a plain ``>``, gives an
unspecified order; here NaNs rank as in ``top_k``). With
``aggregate_to_topk=False`` the result keeps as many entries as JAX's would
(XLA's ``approx_top_k_reduction_output_size``), the best first.
"""
from __future__ import annotations

import operator

from jaxlib.mlir.dialects import chlo

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprValueError, Primitive, ShapedArray
from jaxprc.ir.params import Int
from jaxprc.passes.jvp import aval_of

from .support.operands import aval, canonical_axis
from .shapes import DIM, type_error as _type_error

__all__ = ["top_k", "approx_max_k", "approx_min_k", "top_k_p"]


top_k_p = Primitive("top_k")
top_k_p.multiple_results = True
top_k_p.def_params(k=Int(min=0), axis=DIM)


@top_k_p.def_abstract_eval
def _top_k_abstract_eval(x, *, k, axis):
    if dt.is_complex(x.dtype):
        raise _type_error("top_k", [x], "a real or integer dtype (top_k is not compatible with complex inputs)")
    if x.ndim == 0:
        raise _type_error("top_k", [x], "an operand of rank >= 1")
    if not 0 <= axis < x.ndim:
        raise _type_error("top_k", [x], f"axis in [0, {x.ndim})", axis=axis)
    if x.shape[axis] < k:
        raise _type_error("top_k", [x], f"k no larger than the size {x.shape[axis]} of axis {axis}",
                          JaxprValueError, k=k)
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, dt.int32)]


def top_k(operand, k: int, *, axis: int = -1):
    """``(values, indices)``: the ``k`` largest entries along ``axis``, largest first, and their int32
    positions (ties in index order)."""
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"top_k: k must be a Python int (static), got {k!r}") from None
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    ndim = aval(operand).ndim
    if ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {aval(operand).shape}")
    return top_k_p.bind(operand, k=k, axis=canonical_axis(axis, ndim))


def _select_along(t, idx, axis):
    """``t[..., idx[..., j, ...], ...]`` along ``axis``: a gather batched over the other dimensions."""
    ndim = aval_of(t).ndim
    batch = tuple(d for d in range(ndim) if d != axis)
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                       operand_batching_dims=batch, start_indices_batching_dims=batch)
    return lax.gather(t, lax.expand_dims(idx, (ndim,)), dnums, (1,) * ndim, unique_indices=True,
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _top_k_jvp(primals, tangents, *, k, axis):
    values, idx = top_k_p.bind(*primals, k=k, axis=axis)
    (t,) = tangents
    t_out = ad.Zero(aval_of(values)) if isinstance(t, ad.Zero) else _select_along(t, idx, axis)
    return [values, idx], [t_out, ad.Zero(aval_of(idx))]


ad.primitive_jvps[top_k_p] = _top_k_jvp


def _top_k_batch(args, dims, *, k, axis):
    (x,), (d,) = args, dims
    outs = top_k_p.bind(x, k=k, axis=axis + (d <= axis))
    return outs, [d, d]


batching.primitive_batchers[top_k_p] = _top_k_batch


def _top_k_lowering(ctx, x, *, k, axis):
    ndim = ctx.avals_in[0].ndim
    perm = list(range(ndim))
    perm[axis], perm[-1] = perm[-1], perm[axis]       # chlo.top_k works on the last dimension
    if axis != ndim - 1:
        x = hlo.transpose(x, perm)
    results = list(chlo.top_k(x, ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)))
    if axis != ndim - 1:
        results = [hlo.transpose(r, perm) for r in results]
    return results


mlir.register_lowering(top_k_p, _top_k_lowering)


def _approx_k(name: str, is_max: bool, operand, k, reduction_dimension, recall_target,
              reduction_input_size_override, aggregate_to_topk):
    a = aval(operand)
    k = int(k)
    if k <= 0:
        raise ValueError(f"{name}: k must be positive, got {k}")
    if a.ndim == 0:
        raise TypeError(f"{name}: operand must have >= 1 dimension, got {a.shape}")
    axis = canonical_axis(reduction_dimension, a.ndim)
    if a.shape[axis] < k:
        raise ValueError(f"{name}: k must be smaller than the size of reduction_dim {a.shape[axis]}, got {k}")
    if not dt.is_float(a.dtype):
        raise ValueError(f"{name}: operand must be a floating type, got {a.str_short()}")
    size = k
    if not aggregate_to_topk:
        from jaxlib import _jax
        size = _jax.approx_top_k_reduction_output_size(a.shape[axis], a.ndim, k, float(recall_target), False,
                                                       int(reduction_input_size_override))[0]
    if is_max:
        return top_k(operand, size, axis=axis)
    values, idx = top_k(lax.neg(operand), size, axis=axis)      # the smallest: the largest of -x
    return [lax.neg(values), idx]


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` largest entries along ``reduction_dimension`` and their indices (exact here)."""
    return _approx_k("approx_max_k", True, operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` smallest entries along ``reduction_dimension`` and their indices (exact here)."""
    return _approx_k("approx_min_k", False, operand, k, reduction_dimension, recall_target,
                     reduction_input_size_override, aggregate_to_topk)

