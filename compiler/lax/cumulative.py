"""Cumulative (inclusive scan) ops along one axis: cumsum, cumprod, cummax, cummin, cumlogsumexp.

The result has the operand's type; ``reverse`` scans from the end of the axis.
"""
from __future__ import annotations

import functools

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Bool
from .elementwise import ANY, IS_FLOAT, KIND_NAMES, NUM
from jaxprc.lowering import max_min as _max_min
from jaxprc.passes.jvp import aval_of

from .slicing import take_along_axis
from jaxprc.passes.vmap import shift

from . import reductions
from .operands import aval, canonical_axis
from .shapes import DIM, type_error as _type_error

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
           "cumsum_p", "cumprod_p", "cummax_p", "cummin_p", "cumlogsumexp_p"]


# ------------------------------------------------------------- primitives


def _cumulative(name: str, accepts) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise _type_error(name, [x], f"axis in [0, {x.ndim})", axis=axis)
        if not accepts(x.dtype):
            raise _type_error(name, [x], KIND_NAMES[accepts])
        return x

    prim.def_abstract_eval(rule)
    prim.def_params(axis=DIM, reverse=Bool())
    return prim


cumsum_p = _cumulative("cumsum", NUM)
cumprod_p = _cumulative("cumprod", NUM)
cummax_p = _cumulative("cummax", ANY)     # complex: by (real, imag), as in JAX
cummin_p = _cumulative("cummin", ANY)
cumlogsumexp_p = _cumulative("cumlogsumexp", IS_FLOAT)

_CUMULATIVES = (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p)


# --------------------------------------------------------------- builders

def _cumulative_op(prim):
    def op(operand, axis: int = 0, reverse: bool = False):
        axis = canonical_axis(axis, aval(operand).ndim)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"Inclusive ``{prim.name}`` along ``axis`` (from the end when ``reverse``)."
    return op


cumsum, cumprod, cummax, cummin, cumlogsumexp = map(_cumulative_op, _CUMULATIVES)


# -------------------------------------------------------------------- jvp

ad.defjvp_linear(cumsum_p)


def _cumulative_jvp(prim, primals, tangents, *, axis, reverse):
    """Closed forms: for cumlogsumexp dy_i = exp(-y_i) sum_{j<=i} t_j exp(x_j); for cumprod
    dy_i = y_i sum_{j<=i} t_j / x_j (nonzero x)."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axis=axis, reverse=reverse)
    cumsum = lambda v: cumsum_p.bind(v, axis=axis, reverse=reverse)
    if prim is cumlogsumexp_p:
        return ans, lax.mul(cumsum(lax.mul(t, lax.exp(x))), lax.exp(lax.neg(ans)))
    return ans, lax.mul(cumsum(lax.div(t, x)), ans)


ad.primitive_jvps[cumlogsumexp_p] = functools.partial(_cumulative_jvp, cumlogsumexp_p)
ad.primitive_jvps[cumprod_p] = functools.partial(_cumulative_jvp, cumprod_p)


def _cumulative_extremum_jvp(prim, primals, tangents, *, axis, reverse):
    """Each output is one of the inputs: the running extremum, last attained at a position p where
    x[p] equals the output at p (the running extremum only changes there). The tangent is t[p].
    On ties this picks the latest position in scan order; JAX's rule (an associative scan of
    max's jvp) mixes the tied tangents instead."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axis=axis, reverse=reverse)
    aval = aval_of(x)
    iota = lax.broadcasted_iota(np.int32, aval.shape, axis)
    attained = lax.eq(x, ans)
    if reverse:     # the nearest attaining position at or after i
        never = lax.full(aval.shape, aval.shape[axis] - 1, np.int32)
        pos = cummin(lax.select_n(attained, never, iota), axis, reverse=True)
    else:           # the nearest attaining position at or before i
        pos = cummax(lax.select_n(attained, lax.full(aval.shape, 0, np.int32), iota), axis)
    return ans, take_along_axis(ad.instantiate_zeros(t), pos, axis)


ad.primitive_jvps[cummax_p] = functools.partial(_cumulative_extremum_jvp, cummax_p)
ad.primitive_jvps[cummin_p] = functools.partial(_cumulative_extremum_jvp, cummin_p)


# -------------------------------------------------------------- transpose

def _cumsum_transpose(ct, x, *, axis, reverse):
    return [ad.Zero(x.aval) if isinstance(ct, ad.Zero) else cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


ad.primitive_transposes[cumsum_p] = _cumsum_transpose


# --------------------------------------------------------------- batching

def _cumulative_batch_rule(prim: Primitive):
    """One ``axis``; the batch axis stays put."""
    def rule(args, dims, *, axis, reverse):
        (x,), (d,) = args, dims
        return prim.bind(x, axis=shift((axis,), d)[0], reverse=reverse), d
    return rule


for _prim in _CUMULATIVES:
    batching.primitive_batchers[_prim] = _cumulative_batch_rule(_prim)


# --------------------------------------------------------------- lowering

def _logaddexp(a, b, dtype):
    """log(exp(a) + exp(b)) without overflow; equal infinities give themselves (JAX's formula)."""
    amax = hlo.maximum(a, b)
    delta = hlo.subtract(a, b)
    stable = hlo.add(amax, hlo.log_plus_one(hlo.exponential(hlo.negate(hlo.abs(delta)))))
    return hlo.select(mlir.is_nan(delta, dtype), hlo.add(a, b), stable)


def _cumulative_lowering(kind, combine, ctx, x, *, axis, reverse=False):
    """A reduce_window whose window covers each element's prefix, as JAX lowers it; XLA rewrites
    this form into an efficient scan (and the summation order matches JAX's)."""
    (aval,) = ctx.avals_in
    n = aval.shape[axis]
    if n == 0:
        return x
    dtype = aval.dtype
    if kind == "logsumexp":
        init, combine = -np.inf, lambda a, b: _logaddexp(a, b, dtype)
    elif kind in ("max", "min"):
        init, combine = reductions._identity_value(kind, dtype), _max_min(kind, dtype)
    else:
        init = reductions._identity_value(kind, dtype)
    window = [1] * aval.ndim
    window[axis] = n
    padding = np.zeros((aval.ndim, 2), np.int64)
    padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
    pad_attr = ir.DenseIntElementsAttr.get(padding, type=ir.IntegerType.get_signless(64), shape=padding.shape)
    op = hlo.ReduceWindowOp([x.type], [x], [mlir.full((), init, dtype)], window, padding=pad_attr)
    scalar = mlir.scalar_type(dtype)
    mlir.add_region(op.body, [scalar, scalar], combine)
    return op.results[0]


for _prim, _kind, _combine in [(cumsum_p, "sum", hlo.add), (cumprod_p, "prod", hlo.multiply),
                               (cummax_p, "max", None), (cummin_p, "min", None),
                               (cumlogsumexp_p, "logsumexp", None)]:
    mlir.register_lowering(_prim, functools.partial(_cumulative_lowering, _kind, _combine))
