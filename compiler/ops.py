"""jaxprc.ops: JAX's segment reductions (``segment_sum/prod/max/min``).

A segment reduction is one scatter of ``data``'s rows into an array of
``num_segments`` rows filled with the reduction's identity, so its derivative
and batching are the scatter's. Out-of-range segment ids are dropped (JAX's
default ``FILL_OR_DROP``). With ``bucket_size`` the rows are first reduced
in buckets of that many consecutive rows, then across buckets, as JAX does for
accuracy.
"""
from __future__ import annotations

import numpy as np

from . import lax
from .ir import dtypes as dt
from .ir.tracing import ConcretizationTypeError, get_aval
from .numpy import asarray, max as _reduce_max, min as _reduce_min, prod as _reduce_prod, sum as _reduce_sum

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(kind: str, dtype):
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dt.is_bool(dtype):
        return kind == "min"
    if dt.is_int(dtype):
        info = np.iinfo(dtype)
        return int(info.max if kind == "min" else info.min)
    return np.inf if kind == "min" else -np.inf


_SCATTERS = {"add": (lax.scatter_add, _reduce_sum), "mul": (lax.scatter_mul, _reduce_prod),
             "max": (lax.scatter_max, _reduce_max), "min": (lax.scatter_min, _reduce_min)}


def _segment_reduce(name, kind, data, segment_ids, num_segments, indices_are_sorted, unique_indices,
                    bucket_size, mode):
    data, segment_ids = asarray(data), asarray(segment_ids)
    data_aval, ids_aval = get_aval(data), get_aval(segment_ids)
    if not dt.is_int(ids_aval.dtype):
        raise TypeError(f"{name}: segment_ids must be integers, got {ids_aval.str_short()}")
    if ids_aval.ndim != 1 or data_aval.ndim < 1 or ids_aval.shape[0] != data_aval.shape[0]:
        raise ValueError(f"{name}: segment_ids must be 1-D with one id per row of data, got data "
                         f"{data_aval.str_short()} and segment_ids {ids_aval.str_short()}")
    if num_segments is None:
        try:
            ids = np.asarray(segment_ids)
        except ConcretizationTypeError as e:
            raise ConcretizationTypeError(
                f"{name}: num_segments=None needs concrete segment_ids (the result's shape depends on "
                f"their maximum); pass num_segments= under jit. ({e})") from None
        num_segments = int(ids.max()) + 1 if ids.size else 0
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    mode = lax.GatherScatterMode.FILL_OR_DROP if mode is None else lax.GatherScatterMode.from_any(mode)
    scatter, reduce = _SCATTERS[kind]
    dtype, rest = data_aval.dtype, data_aval.shape[1:]
    n = data_aval.shape[0]
    ids = lax.expand_dims(segment_ids, (1,))
    lead = (num_segments,)
    if bucket_size is not None:      # (bucket, segment) pairs: row i lands in bucket i // bucket_size
        buckets = -(-n // int(bucket_size))
        bucket_of = lax.div(lax.iota(ids_aval.dtype, n), np.array(int(bucket_size), ids_aval.dtype))
        ids = lax.concatenate([lax.expand_dims(bucket_of, (1,)), ids], 1)
        lead = (buckets, num_segments)
    k = len(lead)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(1, 1 + len(rest))),
                                        inserted_window_dims=tuple(range(k)),
                                        scatter_dims_to_operand_dims=tuple(range(k)),
                                        operand_batching_dims=(), scatter_indices_batching_dims=())
    init = lax.full(lead + rest, _identity(kind, dtype), dtype)
    out = scatter(init, ids, data, dnums, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    if bucket_size is not None:
        out = lax.convert_element_type(reduce(out, axis=0), dtype)
    return out


def _segment_op(name: str, kind: str, what: str):
    def op(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
           bucket_size=None, mode=None):
        return _segment_reduce(name, kind, data, segment_ids, num_segments, indices_are_sorted,
                               unique_indices, bucket_size, mode)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"The {what} of the rows of ``data`` in each segment: ``out[s]`` combines the rows ``i`` "
                  f"with ``segment_ids[i] == s`` (the identity for an empty segment).")
    return op


segment_sum = _segment_op("segment_sum", "add", "sum")
segment_prod = _segment_op("segment_prod", "mul", "product")
segment_max = _segment_op("segment_max", "max", "maximum")
segment_min = _segment_op("segment_min", "min", "minimum")
