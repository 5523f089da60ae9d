"""Sorting: ``sort`` orders one or more arrays of equal shape along one dimension,
lexicographically by the first ``num_keys`` of them (the others are permuted alike).

Floats sort in JAX's total order: -0.0 equals 0.0 and NaNs go last; complex
numbers sort by (real, imag).
"""
from __future__ import annotations


import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive
from jaxprc.ir.params import Bool, Int
from jaxprc.ir import sharding_type as st

from jaxprc.passes.jvp import aval_of

from .slicing import take_along_axis
from jaxprc.passes.vmap import align, shift

from .support.operands import aval, canonical_axis
from .shapes import DIM, type_error as _type_error

__all__ = ["sort", "sort_key_val", "sort_p"]


# -------------------------------------------------------------- primitive


sort_p = Primitive("sort")
sort_p.multiple_results = True
sort_p.def_params(dimension=DIM, is_stable=Bool(), num_keys=Int(min=1))


@sort_p.def_abstract_eval
def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise JaxprTypeError("sort requires at least one operand")
    shape = operands[0].shape
    if any(x.shape != shape for x in operands):
        raise _type_error("sort", operands, "operands of equal shapes", dimension=dimension)
    if not 0 <= dimension < len(shape):
        raise _type_error("sort", operands, f"dimension in [0, {len(shape)})", dimension=dimension)
    if not 1 <= num_keys <= len(operands):
        raise _type_error("sort", operands, f"1 <= num_keys <= {len(operands)}", num_keys=num_keys)
    return list(operands)


@sort_p.def_sharding_rule
def _sort_sharding(outs, *operands, dimension, **_):
    """Each result keeps its operand's sharding; the sorted dimension must be whole on each device."""
    for x in operands:
        if x.sharding_in_type is not None and st.dims(x)[dimension]:
            raise st.ShardingTypeError("Arguments to sort must be unsharded over the sorting dimension. Got arg "
                                       f"sharding={x.sharding_in_type!r} and sorting dimension={dimension}")
    return [x.sharding_in_type for x in operands]


# --------------------------------------------------------------- builders

def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort one array, or a tuple of arrays lexicographically by the first ``num_keys``."""
    single = not isinstance(operand, (tuple, list))
    operands = [operand] if single else list(operand)
    dimension = canonical_axis(dimension, aval(operands[0]).ndim)
    outs = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable), num_keys=int(num_keys))
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """``keys`` sorted, and ``values`` permuted alike."""
    return sort((keys, values), dimension, is_stable, 1)


# -------------------------------------------------------------------- jvp

def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Sort a position iota along, then move each tangent by that permutation."""
    aval = aval_of(primals[0])
    iota = lax.broadcasted_iota(np.int32, aval.shape, dimension)
    *outs, perm = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return outs, [t if isinstance(t, ad.Zero) else take_along_axis(t, perm, dimension, permutation=True)
                  for t in tangents]


ad.primitive_jvps[sort_p] = _sort_jvp


# --------------------------------------------------------------- batching

def _sort_batch_rule(args, dims, *, dimension, **params):
    args, d = align(args, dims)
    outs = sort_p.bind(*args, dimension=shift((dimension,), d)[0], **params)
    return outs, [d] * len(outs)


batching.primitive_batchers[sort_p] = _sort_batch_rule


# --------------------------------------------------------------- lowering

def _sort_key(x, dtype):
    """JAX's float canonicalisation for sorting: -0.0 -> 0.0 and every NaN -> +NaN."""
    if not dt.is_float(dtype):
        return x
    x = hlo.select(mlir.compare(x, mlir.full((), 0, dtype), "EQ", dtype), mlir.full((), 0, dtype), x)
    return hlo.select(mlir.is_nan(x, dtype), mlir.full((), np.nan, dtype), x)


def _lexicographic_less(keys_lhs, keys_rhs, dtypes):
    """lhs < rhs in the total order (NaNs last), lexicographically over the keys."""
    parts = []                 # complex keys compare as (real, imag), as in JAX
    for a, b, dtype in zip(keys_lhs, keys_rhs, dtypes):
        if dt.is_complex(dtype):
            part = np.finfo(dtype).dtype      # float32 for complex64, float64 for complex128
            parts += [(hlo.real(a), hlo.real(b), part), (hlo.imag(a), hlo.imag(b), part)]
        else:
            parts.append((a, b, dtype))
    result = None
    for a, b, dtype in reversed(parts):
        kind = "TOTALORDER" if dt.is_float(dtype) else None
        a, b = _sort_key(a, dtype), _sort_key(b, dtype)
        lt = mlir.compare(a, b, "LT", dtype, kind)
        result = lt if result is None else hlo.or_(lt, hlo.and_(mlir.compare(a, b, "EQ", dtype, kind), result))
    return result


def _sort_lowering(ctx, *operands, dimension, is_stable=True, num_keys=1):
    op = hlo.SortOp([v.type for v in operands], list(operands), dimension=dimension, is_stable=bool(is_stable))
    dtypes = [a.dtype for a in ctx.avals_in]
    arg_types = [t for a in ctx.avals_in for t in (mlir.scalar_type(a.dtype),) * 2]

    def comparator(*args):
        lhs, rhs = args[0::2], args[1::2]
        return _lexicographic_less(lhs[:num_keys], rhs[:num_keys], dtypes[:num_keys])
    mlir.add_region(op.comparator, arg_types, comparator)
    return list(op.results)


mlir.register_lowering(sort_p, _sort_lowering)


# ---------------------------------------------------------- jet (Taylor series)
def _sort_jet(primals_in, series_in, *, dimension, is_stable, num_keys):
    """Beyond JAX: sort a position iota along; every term moves by that permutation."""
    iota = lax.broadcasted_iota(np.int32, aval_of(primals_in[0]).shape, dimension)
    *outs, perm = sort_p.bind(*primals_in, iota, dimension=dimension, is_stable=is_stable,
                              num_keys=num_keys)
    return outs, [[take_along_axis(t, perm, dimension, permutation=True) for t in terms]
                  for terms in series_in]


jet.jet_rules[sort_p] = _sort_jet
