"""Cumulative (inclusive scan) ops along one axis: cumsum, cumprod, cummax, cummin, cumlogsumexp.

The result has the operand's type; ``reverse`` scans from the end of the axis.
"""
from __future__ import annotations

import functools

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Bool
from jaxprc.ir.sharding_type import unsplit_axis_rule
from .elementwise import ANY, IS_FLOAT, KIND_NAMES, NUM, _balanced_eq
from jaxprc.engine import dynamic_shapes
from jaxprc.engine.lowering import max_min as _max_min
from jaxprc.passes.jvp import aval_of

from .slicing import slice_in_dim
from jaxprc.passes.vmap import shift

from . import reductions
from .support.operands import aval, canonical_axis
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
    prim.def_sharding_rule(unsplit_axis_rule("reduced"))
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


def _cumlogsumexp_jvp(primals, tangents, *, axis, reverse):
    """Closed form: dy_i = exp(-y_i) sum_{j<=i} t_j exp(x_j)."""
    (x,), (t,) = primals, tangents
    ans = cumlogsumexp_p.bind(x, axis=axis, reverse=reverse)
    tangent = cumsum_p.bind(lax.mul(t, lax.exp(x)), axis=axis, reverse=reverse)
    return ans, lax.mul(tangent, lax.exp(lax.neg(ans)))


ad.primitive_jvps[cumlogsumexp_p] = _cumlogsumexp_jvp


def _interleave(even, odd, axis):
    """``even[0], odd[0], even[1], ...`` along ``axis`` (``even`` as long as ``odd`` or one longer),
    by padding each with zeros between its elements and adding."""
    n_even, n_odd = aval_of(even).shape[axis], aval_of(odd).shape[axis]
    def spread(v, low, high):
        config = [(0, 0, 0)] * aval_of(v).ndim
        config[axis] = (low, high, 1)
        return lax.pad(v, lax.full((), 0, aval_of(v).dtype), config)
    return lax.add(spread(even, 0, 1 if n_even == n_odd else 0), spread(odd, 1, 0 if n_even == n_odd else 1))


def _prefix_scan(combine, elems, axis):
    """Inclusive scan of the tuples ``elems`` (arrays of one length along ``axis``) under the
    associative ``combine``, by the odd/even recursion of log depth: combine adjacent pairs, scan
    those, then fill in the even positions from the odd results. The same tree of combines as
    jax.lax.associative_scan, so that rounding and the tie-splitting of max match JAX's jvp."""
    n = aval_of(elems[0]).shape[axis]
    if n < 2:
        return elems
    part = lambda e, start, stop, stride=1: slice_in_dim(e, start, stop, stride, axis)
    pairs = combine([part(e, 0, -1, 2) for e in elems], [part(e, 1, None, 2) for e in elems])
    odd = _prefix_scan(combine, pairs, axis)
    left = [part(o, 0, -1) for o in odd] if n % 2 == 0 else odd
    even = combine(left, [part(e, 2, None, 2) for e in elems])
    even = [lax.concatenate([part(e, 0, 1), r], axis) for e, r in zip(elems, even)]
    return [_interleave(e, o, axis) for e, o in zip(even, odd)]


def _product_with_tangent(a, b):
    (p1, d1), (p2, d2) = a, b
    return [lax.mul(p1, p2), lax.add(lax.mul(d1, p2), lax.mul(p1, d2))]


def _extremum_with_tangent(extremum):
    """The running extremum with its tangent: tied operands share it, 1/2 each (lax.max's jvp)."""
    def combine(a, b):
        (x, dx), (y, dy) = a, b
        ans = extremum(x, y)
        return [ans, lax.add(lax.mul(dx, _balanced_eq(x, ans, y)), lax.mul(dy, _balanced_eq(y, ans, x)))]
    return combine


def _scanned_jvp(prim, combine, primals, tangents, *, axis, reverse):
    """The tangent of the scan of (value, tangent) pairs, which is linear in the tangent and needs
    no division (exact where an operand is 0 or tied). The value stays the primitive's."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axis=axis, reverse=reverse)
    elems = [x, ad.instantiate_zeros(t)]
    if reverse:
        elems = [lax.rev(e, (axis,)) for e in elems]
    _, tangent = _prefix_scan(combine, elems, axis)
    if reverse:
        tangent = lax.rev(tangent, (axis,))
    return ans, tangent


ad.primitive_jvps[cumprod_p] = functools.partial(_scanned_jvp, cumprod_p, _product_with_tangent)
ad.primitive_jvps[cummax_p] = functools.partial(_scanned_jvp, cummax_p, _extremum_with_tangent(lax.max))
ad.primitive_jvps[cummin_p] = functools.partial(_scanned_jvp, cummin_p, _extremum_with_tangent(lax.min))


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
    if type(n) is not int:           # a symbolic axis (export): the window and padding are operands
        ones, padding = [1] * aval.ndim, [(0, 0)] * aval.ndim
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        return dynamic_shapes.reduce_window(
            ctx.module_context, [x], [mlir.full((), init, dtype)], [x.type], combine, window_dimensions=window,
            window_strides=ones, padding=padding, base_dilation=ones, window_dilation=ones)
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


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(cumsum_p)


def _cumulative_jet(prim, combine, primals_in, series_in, *, axis, reverse):
    """Through the parallel prefix scan, whose pieces have rules (as JAX's jet)."""
    _, series_out = jet.jet_call(
        lambda x: lax.associative_scan(combine, x, axis=axis, reverse=reverse), primals_in, series_in)
    return prim.bind(*primals_in, axis=axis, reverse=reverse), series_out


jet.jet_rules[cumprod_p] = lambda p, s, **kw: _cumulative_jet(cumprod_p, lax.mul, p, s, **kw)
jet.jet_rules[cummax_p] = lambda p, s, **kw: _cumulative_jet(cummax_p, lax.max, p, s, **kw)
jet.jet_rules[cummin_p] = lambda p, s, **kw: _cumulative_jet(cummin_p, lax.min, p, s, **kw)
