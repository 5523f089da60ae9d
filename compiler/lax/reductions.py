"""Reductions over a set of axes (sum, product, max, min, and, or, xor) and argmax/argmin.

The reduced dimensions disappear from the result. A reduction keeps the
operand's dtype and weak type, as in JAX; argmax/argmin reduce one axis to
the index of its extremum, of ``index_dtype``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, ShapedArray
from jaxprc.ir.params import DType
from jaxprc.ir import sharding_type as st
from .elementwise import ANY, BOOL_OR_INT, INTEGRAL, KIND_NAMES, NUM, ORDERED
from jaxprc.engine.lowering import iota as _iota, max_min as _max_min
from jaxprc.passes.jvp import aval_of
from jaxprc.passes.vmap import shift

from . import cumulative
from .support.operands import aval, canonical_axes, canonical_axis
from .shapes import DIMS, type_error as _type_error, check_axes as _check_axes

__all__ = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_xor",
           "argmax", "argmin",
           "reduce_sum_p", "reduce_prod_p", "reduce_max_p", "reduce_min_p", "reduce_and_p", "reduce_or_p",
           "reduce_xor_p", "argmax_p", "argmin_p"]


# ------------------------------------------------------------- primitives


def _reduction(name: str, accepts) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axes):
        _check_axes(name, x, axes)
        if not accepts(x.dtype):
            raise _type_error(name, [x], KIND_NAMES[accepts], axes=axes)
        return ShapedArray([s for i, s in enumerate(x.shape) if i not in axes], x.dtype, x.weak_type)

    prim.def_abstract_eval(rule)
    prim.def_sharding_rule(_reduced_sharding)
    prim.def_params(axes=DIMS)
    return prim


def _reduced_sharding(outs, x, *, axes, **_):
    """A reduction's result keeps the axes of the dimensions it does not reduce (XLA adds up the
    partial results over the others)."""
    return st.typed(st.common_mesh("reduction", [x]), [a for i, a in enumerate(st.dims(x)) if i not in axes])


reduce_sum_p = _reduction("reduce_sum", NUM)
reduce_prod_p = _reduction("reduce_prod", NUM)
reduce_max_p = _reduction("reduce_max", ANY)     # complex: by (real, imag), as in JAX
reduce_min_p = _reduction("reduce_min", ANY)
reduce_and_p = _reduction("reduce_and", BOOL_OR_INT)
reduce_or_p = _reduction("reduce_or", BOOL_OR_INT)
reduce_xor_p = _reduction("reduce_xor", BOOL_OR_INT)


def _arg_reduction(name: str) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axes, index_dtype):
        params = dict(axes=axes, index_dtype=np.dtype(index_dtype).name)
        if len(axes) != 1:
            raise _type_error(name, [x], "exactly one axis", **params)
        _check_axes(name, x, axes, index_dtype=params["index_dtype"])
        if x.shape[axes[0]] == 0:
            raise _type_error(name, [x], "a non-empty reduced axis", **params)
        if not ORDERED(x.dtype) or not INTEGRAL(index_dtype):
            raise _type_error(name, [x], f"{KIND_NAMES[ORDERED]} operand and an integer index_dtype",
                              **params)
        return ShapedArray([s for i, s in enumerate(x.shape) if i != axes[0]], index_dtype)

    prim.def_abstract_eval(rule)
    prim.def_sharding_rule(_reduced_sharding)
    prim.def_params(axes=DIMS, index_dtype=DType())
    return prim


argmax_p = _arg_reduction("argmax")
argmin_p = _arg_reduction("argmin")

_REDUCTIONS = (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
               reduce_xor_p)


# --------------------------------------------------------------- builders

def _reduction_op(prim):
    def op(operand, axes):
        return prim.bind(operand, axes=canonical_axes(axes, aval(operand).ndim))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"``{prim.name}`` over ``axes``."
    return op


reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and, reduce_or, reduce_xor = map(
    _reduction_op, _REDUCTIONS)


def _arg_op(prim):
    def op(operand, axis: int, index_dtype):
        axis = canonical_axis(axis, aval(operand).ndim)
        return prim.bind(operand, axes=(axis,), index_dtype=dt.canonicalize_dtype(index_dtype))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Index of the {prim.name[3:]}imum along ``axis`` (first one on ties)."
    return op


argmax, argmin = _arg_op(argmax_p), _arg_op(argmin_p)


# -------------------------------------------------------------------- jvp

ad.defjvp_linear(reduce_sum_p)
for _prim in (reduce_and_p, reduce_or_p, reduce_xor_p, argmax_p, argmin_p):
    ad.defjvp_zero(_prim)


def _extremum_jvp(prim, primals, tangents, *, axes):
    """The tangent at the extremum, averaged over ties (JAX's convention)."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axes=axes)
    shape = aval_of(x).shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    location = lax.convert_element_type(lax.eq(x, lax.broadcast_in_dim(ans, shape, kept)), aval_of(x).dtype)
    counts = reduce_sum_p.bind(location, axes=axes)
    return ans, lax.div(reduce_sum_p.bind(lax.mul(t, location), axes=axes), counts)


ad.primitive_jvps[reduce_max_p] = functools.partial(_extremum_jvp, reduce_max_p)
ad.primitive_jvps[reduce_min_p] = functools.partial(_extremum_jvp, reduce_min_p)


def _reduce_prod_jvp(primals, tangents, *, axes):
    """d prod(x) = sum_i t_i * prod_{j != i} x_j, with the products of the others computed by
    exclusive cumulative products from both ends (exact when some x_j are zero)."""
    (x,), (t,) = primals, tangents
    aval = aval_of(x)
    kept = [d for d in range(aval.ndim) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    kept_shape = tuple(aval.shape[d] for d in kept)
    n = math.prod(aval.shape[d] for d in axes)
    flat = lambda v: lax.reshape(lax.transpose(v, perm), kept_shape + (n,))
    xf, tf = flat(x), flat(ad.instantiate_zeros(t))
    last = len(kept_shape)
    ones_pad = lambda v, lo, hi: lax.pad(v, lax.full((), 1, aval.dtype), [(0, 0, 0)] * last + [(lo, hi, 0)])
    cum = lambda v, reverse: cumulative.cumprod_p.bind(v, axis=last, reverse=reverse)
    before = ones_pad(cum(xf, False), 1, -1)     # prod_{j<i}
    after = ones_pad(cum(xf, True), -1, 1)       # prod_{j>i}
    others = lax.mul(before, after)
    ans = reduce_prod_p.bind(x, axes=axes)
    return ans, reduce_sum_p.bind(lax.mul(tf, others), axes=(last,))


ad.primitive_jvps[reduce_prod_p] = _reduce_prod_jvp


# -------------------------------------------------------------- transpose

def _reduce_sum_transpose(ct, x, *, axes):
    shape = x.aval.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    return [ad.Zero(x.aval) if isinstance(ct, ad.Zero) else lax.broadcast_in_dim(ct, shape, kept)]


ad.primitive_transposes[reduce_sum_p] = _reduce_sum_transpose


# --------------------------------------------------------------- batching

def _reduction_batch_rule(prim: Primitive):
    """Reductions and argmax/argmin: the reduced axes disappear, the batch axis moves left past them."""
    def rule(args, dims, *, axes, **params):
        (x,), (d,) = args, dims
        axes = shift(axes, d)
        return prim.bind(x, axes=axes, **params), d - sum(a < d for a in axes)
    return rule


for _prim in (*_REDUCTIONS, argmax_p, argmin_p):
    batching.primitive_batchers[_prim] = _reduction_batch_rule(_prim)


# --------------------------------------------------------------- lowering

def _identity_value(kind: str, dtype):
    """The neutral element of a reduction: 'max' starts at the lowest value, 'min' at the highest."""
    if kind in ("max", "min"):
        if dtype == dt.bool_:
            return kind == "min"
        if dt.supports_inf(dtype):
            return -np.inf if kind == "max" else np.inf
        info = dt.finfo(dtype) if dt.is_float(dtype) else dt.iinfo(dtype)   # (no infinities: the extremes)
        return info.min if kind == "max" else info.max
    if kind == "and":
        return True if dtype == dt.bool_ else -1 if dt.is_signed(dtype) else dt.iinfo(dtype).max
    return {"sum": 0, "prod": 1, "or": 0, "xor": 0}[kind]


_REDUCERS = {"sum": hlo.add, "prod": hlo.multiply, "max": "max", "min": "min",
             "and": hlo.and_, "or": hlo.or_, "xor": hlo.xor}


def _reduce_lowering(kind, ctx, x, *, axes, **_):
    dtype = ctx.avals_in[0].dtype
    init = mlir.full((), _identity_value(kind, dtype), dtype)
    combine = _REDUCERS[kind]
    if isinstance(combine, str):
        combine = _max_min(combine, dtype)
    return mlir.reduce([x], [init], axes, [mlir.aval_to_ir_type(ctx.avals_out[0])], combine)


for _prim in _REDUCTIONS:
    mlir.register_lowering(_prim, functools.partial(_reduce_lowering, _prim.name[len("reduce_"):]))


def _argminmax_lowering(kind, ctx, x, *, axes, index_dtype):
    """(value, index) reduction: a NaN wins over numbers, the first index wins ties (numpy/JAX)."""
    (aval,), (out_aval,) = ctx.avals_in, ctx.avals_out
    axis = axes[0]
    dtype = aval.dtype
    index_dtype = np.dtype(index_dtype)
    iota = _iota(aval.update(dtype=index_dtype), axis)
    better = "GT" if kind == "max" else "LT"

    def combine(xv, xi, yv, yi):
        x_better = mlir.compare(xv, yv, better, dtype)
        tie = mlir.compare(xv, yv, "EQ", dtype)
        if dt.is_float(dtype):
            x_nan, y_nan = mlir.is_nan(xv, dtype), mlir.is_nan(yv, dtype)
            x_better = hlo.or_(x_better, hlo.and_(x_nan, hlo.not_(y_nan)))
            tie = hlo.or_(tie, hlo.and_(x_nan, y_nan))
        pick_x = hlo.or_(x_better, hlo.and_(tie, mlir.compare(xi, yi, "LT", index_dtype)))
        return [hlo.select(pick_x, xv, yv), hlo.select(pick_x, xi, yi)]

    op = hlo.ReduceOp([mlir.aval_to_ir_type(out_aval.update(dtype=dtype)), mlir.aval_to_ir_type(out_aval)],
                      [x, iota],
                      [mlir.full((), _identity_value(kind, dtype), dtype), mlir.full((), 0, index_dtype)], [axis])
    mlir.add_region(op.body, [mlir.scalar_type(dtype), mlir.scalar_type(index_dtype)] * 2, combine)
    return op.results[1]


mlir.register_lowering(argmax_p, functools.partial(_argminmax_lowering, "max"))
mlir.register_lowering(argmin_p, functools.partial(_argminmax_lowering, "min"))


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(reduce_sum_p)
jet.defzero(argmax_p)       # beyond JAX: integer results, as the comparisons
jet.defzero(argmin_p)


def _reduce_chooser_jet(prim, primals_in, series_in, *, axes):
    """The terms of the chosen elements, averaged over ties (as JAX's jet)."""
    x, = primals_in
    out = prim.bind(x, axes=axes)
    shape = aval_of(x).shape
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    dtype = aval_of(series_in[0][0]).dtype if series_in[0] else aval_of(x).dtype
    where = lax.convert_element_type(lax.eq(x, lax.reshape(out, kept)), dtype)
    counts = reduce_sum_p.bind(where, axes=axes)
    return out, [lax.div(reduce_sum_p.bind(lax.mul(t, where), axes=axes), counts) for t in series_in[0]]


def _reduce_prod_jet(primals_in, series_in, *, axes):
    """Beyond JAX: the last of the running products over the reduced axes (moved last)."""
    x, = primals_in
    out = reduce_prod_p.bind(x, axes=axes)
    shape = aval_of(x).shape
    keep = [d for d in range(len(shape)) if d not in axes]
    n = math.prod(shape[d] for d in axes)
    if n == 0:
        return out, [lax.full_like(out, 0) for _ in series_in[0]]

    def prod(x):
        y = lax.reshape(lax.transpose(x, keep + list(axes)), [shape[d] for d in keep] + [n])
        last = lax.slice_in_dim(lax.cumprod(y, axis=len(keep)), n - 1, n, axis=len(keep))
        return lax.squeeze(last, [len(keep)])
    return out, jet.jet_call(prod, primals_in, series_in)[1]


jet.jet_rules[reduce_max_p] = functools.partial(_reduce_chooser_jet, reduce_max_p)
jet.jet_rules[reduce_min_p] = functools.partial(_reduce_chooser_jet, reduce_min_p)
jet.jet_rules[reduce_prod_p] = _reduce_prod_jet
