"""Windowed reductions (XLA's ReduceWindow) and the primitives behind pooling gradients.

``reduce_window_sum/max/min`` are the monoid fast paths; ``reduce_window`` takes any reducer
(a jaxpr on scalars) over several operands at once. The derivative of a max/min pool is
``select_and_gather_add`` (gather, per window, the tangent at the chosen element); its transpose
is ``select_and_scatter_add`` (scatter each cotangent to the chosen element) and the two are each
other's transposes, so derivatives of every order exist.

Window params, one entry per operand dimension: ``window_dimensions``, ``window_strides``,
``padding`` ((low, high) pairs, applied after base dilation), ``base_dilation`` (holes between
operand elements) and ``window_dilation`` (holes between window taps).
"""
from __future__ import annotations

import functools

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import Primitive, ShapedArray
from jaxprc.ir.params import ClosedJaxprParam, Int, Str, Tuple
from jaxprc.ir.tracing import Tracer, eval_jaxpr, trace_to_jaxpr
from jaxprc.engine.lowering import max_min as _max_min
from jaxprc.passes.jvp import aval_of, is_differentiable, jvp_jaxpr
from jaxprc.passes.vmap import bdim_at_front

from . import reductions
from .convolution import _dilate, _stride_dim, _vjp_lhs_padding, padtype_to_pads
from .elementwise import NUM, ORDERED
from .support.operands import aval, ints, is_py_scalar, scalar_of_dtype
from .shapes import type_error as _type_error

__all__ = ["reduce_window", "reduce_window_shape_tuple", "reduce_window_p", "reduce_window_sum_p",
           "reduce_window_max_p", "reduce_window_min_p", "select_and_scatter_add_p", "select_and_gather_add_p"]


# ------------------------------------------------------------------ shapes

def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None):
    """The result shape of a windowed reduction."""
    if base_dilation is not None:
        operand_shape = _dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate(window_dimensions, window_dilation)
    return tuple(_stride_dim(d + int(lo) + int(hi), int(w), int(s))     # (d may be symbolic)
                 for d, (lo, hi), w, s in zip(operand_shape, padding, window_dimensions, window_strides))


_POSITIVE = Tuple(Int(min=1))
_PADDING = Tuple(Tuple(Int(), length=2))
_WINDOW = dict(window_dimensions=_POSITIVE, window_strides=_POSITIVE, padding=_PADDING,
               base_dilation=_POSITIVE, window_dilation=_POSITIVE)


def _window_shape(name, avals, x, *, window_dimensions, window_strides, padding, base_dilation=None,
                  window_dilation=None):
    """Check the window params against the operand ``x``; the result shape."""
    params = dict(window_dimensions=window_dimensions, window_strides=window_strides, padding=padding)
    for what, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("padding", padding), ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if v is not None and len(v) != x.ndim:
            raise _type_error(name, avals, f"{what} with one entry per operand dimension ({x.ndim})", **params)
        if v is not None and what != "padding" and any(d < 1 for d in v):
            raise _type_error(name, avals, f"positive {what}, got {v}", **params)
    dilated = _dilate(x.shape, base_dilation or (1,) * x.ndim)
    if any(d + lo + hi < 0 for d, (lo, hi) in zip(dilated, padding)):
        raise _type_error(name, avals, "padding no more negative than the (dilated) operand is long", **params)
    return reduce_window_shape_tuple(x.shape, window_dimensions, window_strides, padding, base_dilation,
                                     window_dilation)


# -------------------------------------------------------------- primitives

def _monoid_window(name: str, accepts) -> Primitive:
    prim = Primitive(name)
    prim.def_params(**_WINDOW)

    def rule(x, **params):
        if not accepts(x.dtype):
            raise _type_error(name, [x], "a numeric operand" if accepts is NUM else "an ordered operand")
        return ShapedArray(_window_shape(name, [x], x, **params), x.dtype, x.weak_type)
    prim.def_abstract_eval(rule)
    return prim


reduce_window_sum_p = _monoid_window("reduce_window_sum", NUM)
reduce_window_max_p = _monoid_window("reduce_window_max", ORDERED)
reduce_window_min_p = _monoid_window("reduce_window_min", ORDERED)
_MONOIDS = {reduce_window_sum_p: "sum", reduce_window_max_p: "max", reduce_window_min_p: "min"}

reduce_window_p = Primitive("reduce_window")
reduce_window_p.multiple_results = True
reduce_window_p.def_params(jaxpr=ClosedJaxprParam(), **_WINDOW)


@reduce_window_p.def_abstract_eval
def _reduce_window_abstract_eval(*args, jaxpr, **params):
    n = len(args) // 2
    operands, inits = args[:n], args[n:]
    name = "reduce_window"
    if len(args) % 2 or not n:
        raise _type_error(name, args, "operands followed by one scalar init value each")
    if any(o.shape != operands[0].shape for o in operands):
        raise _type_error(name, args, "operands of one shape")
    if any(i.shape != () or i.dtype != o.dtype for o, i in zip(operands, inits)):
        raise _type_error(name, args, "scalar init values of the operands' dtypes")
    scalars = [ShapedArray((), o.dtype) for o in operands]
    sig_in = [(a.shape, a.dtype) for a in jaxpr.in_avals]
    sig_out = [(a.shape, a.dtype) for a in jaxpr.out_avals]
    if sig_in != [((), o.dtype) for o in scalars * 2] or sig_out != [((), o.dtype) for o in scalars]:
        raise _type_error(name, args, f"a reducer taking two sets of {n} scalars of the operands' dtypes and "
                          f"returning one, got {jaxpr.in_avals} -> {jaxpr.out_avals}")
    shape = _window_shape(name, args, operands[0], **params)
    return [ShapedArray(shape, o.dtype, o.weak_type) for o in operands]


_SELECT = {"ge": "GE", "le": "LE"}


def _check_select(name, avals, select_prim):
    if select_prim not in _SELECT:
        raise _type_error(name, avals, f"select_prim 'ge' or 'le', got {select_prim!r}")


select_and_gather_add_p = Primitive("select_and_gather_add")
select_and_gather_add_p.def_params(select_prim=Str(), **_WINDOW)


@select_and_gather_add_p.def_abstract_eval
def _select_and_gather_add_abstract_eval(tangents, operand, *, select_prim, **params):
    name = "select_and_gather_add"
    _check_select(name, [tangents, operand], select_prim)
    if tangents.shape != operand.shape or tangents.dtype != operand.dtype or not ORDERED(operand.dtype):
        raise _type_error(name, [tangents, operand], "tangents and operand of one real type")
    return ShapedArray(_window_shape(name, [tangents, operand], operand, **params), tangents.dtype,
                       tangents.weak_type)


select_and_scatter_add_p = Primitive("select_and_scatter_add")
select_and_scatter_add_p.def_params(select_prim=Str(), window_dimensions=_POSITIVE, window_strides=_POSITIVE,
                                    padding=_PADDING)


@select_and_scatter_add_p.def_abstract_eval
def _select_and_scatter_add_abstract_eval(source, operand, *, select_prim, **params):
    name = "select_and_scatter_add"
    avals = [source, operand]
    _check_select(name, avals, select_prim)
    if source.dtype != operand.dtype or not ORDERED(operand.dtype):
        raise _type_error(name, avals, "source and operand of one real dtype")
    if source.shape != _window_shape(name, avals, operand, **params):
        raise _type_error(name, avals, "a source of the windowed operand's shape", **params)
    return ShapedArray(operand.shape, source.dtype, source.weak_type)


# --------------------------------------------------------------- builders

def _ones(n):
    return (1,) * n


def _window_params(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    n = len(shape)
    window_dimensions = ints(window_dimensions)
    window_strides = _ones(n) if window_strides is None else ints(window_strides)
    base_dilation = _ones(n) if base_dilation is None else ints(base_dilation)
    window_dilation = _ones(n) if window_dilation is None else ints(window_dilation)
    if isinstance(padding, str):
        padding = padtype_to_pads(shape, _dilate(window_dimensions, window_dilation), window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    return dict(window_dimensions=window_dimensions, window_strides=window_strides, padding=padding,
                base_dilation=base_dilation, window_dilation=window_dilation)


def _monoid(computation, init):
    """The fast-path primitive when ``computation`` is lax.add/max/min with its identity as the
    (concrete, scalar) init value, as JAX detects it."""
    kind = {lax.add: "sum", lax.max: "max", lax.min: "min"}.get(computation)
    if kind is None or isinstance(init, Tracer) or np.shape(init) != ():
        return None
    value = np.asarray(init)
    dtype = value.dtype if not hasattr(init, "aval") else init.aval.dtype
    if value != reductions._identity_value(kind, dtype):
        return None
    return {"sum": reduce_window_sum_p, "max": reduce_window_max_p, "min": reduce_window_min_p}[kind]


def _init_like(init, operand):
    """A Python scalar init value takes the operand's dtype."""
    if is_py_scalar(init):
        return scalar_of_dtype(init, aval(operand).dtype, weak=False)
    return init


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None, padding="VALID",
                  base_dilation=None, window_dilation=None):
    """Reduce every window of ``operand`` (a pytree of arrays of one shape) with ``computation``
    from ``init_value`` (a matching pytree of scalars)."""
    operands, tree = tu.tree_flatten(operand)
    inits, init_tree = tu.tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: {tree} vs. {init_tree}")
    if len(operands) != len(inits):
        raise ValueError(f"Must have same total number of operands as init_values: {len(operands)} vs. {len(inits)}")
    if not operands:
        raise ValueError("reduce_window must have at least one operand.")
    params = _window_params(aval(operands[0]).shape, window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    if len(operands) == 1:
        prim = _monoid(computation, inits[0])
        if prim is not None:
            return prim.bind(operands[0], **params)
    inits = [_init_like(i, o) for i, o in zip(inits, operands)]
    n = len(operands)
    scalars = [ShapedArray((), aval(o).dtype) for o in operands]

    def reducer(*args):
        out = computation(tu.tree_unflatten(tree, list(args[:n])), tu.tree_unflatten(tree, list(args[n:])))
        leaves, out_tree = tu.tree_flatten(out)
        if out_tree != tree:
            raise ValueError(f"reduce_window output must have the same tree structure as the operands "
                             f"{tree} vs. {out_tree}")
        return leaves
    jaxpr = trace_to_jaxpr(reducer, scalars * 2, name="reduce_window")
    if jaxpr.consts:
        raise TypeError("reduce_window: the reducer closes over arrays or traced values; it must compute "
                        "from its two arguments only (constants as Python scalars)")
    outs = reduce_window_p.bind(*operands, *inits, jaxpr=jaxpr, **params)
    return tu.tree_unflatten(tree, outs)


def _select_and_gather_add(t, x, select_prim, **params):
    return select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)


def _select_and_scatter_add(s, x, select_prim, *, window_dimensions, window_strides, padding):
    return select_and_scatter_add_p.bind(s, x, select_prim=select_prim, window_dimensions=window_dimensions,
                                         window_strides=window_strides, padding=padding)


# -------------------------------------------------------------------- jvp

ad.defjvp_linear(reduce_window_sum_p)


def _chooser_jvp(select_prim, prim, primals, tangents, **params):
    """The tangent at the element each window chose (the first of ties, as in JAX)."""
    (x,), (t,) = primals, tangents
    out = prim.bind(x, **params)
    if isinstance(t, ad.Zero):
        return out, ad.Zero.from_primal_value(out)
    return out, _select_and_gather_add(t, x, select_prim, **params)


ad.primitive_jvps[reduce_window_max_p] = functools.partial(_chooser_jvp, "ge", reduce_window_max_p)
ad.primitive_jvps[reduce_window_min_p] = functools.partial(_chooser_jvp, "le", reduce_window_min_p)


def _linear_in_first_jvp(prim, primals, tangents, **params):
    """Linear in the first operand; the second only selects, so its tangent does not matter."""
    out = prim.bind(*primals, **params)
    if isinstance(tangents[0], ad.Zero):
        return out, ad.Zero.from_primal_value(out)
    return out, prim.bind(tangents[0], primals[1], **params)


for _prim in (select_and_gather_add_p, select_and_scatter_add_p):
    ad.primitive_jvps[_prim] = functools.partial(_linear_in_first_jvp, _prim)


def _reduce_window_jvp(primals, tangents, *, jaxpr, **params):
    """A reduce_window over (values, tangents) with the reducer's jvp; the init values' tangents
    must be zero (as in JAX). The values are also reduced on their own, so that they do not
    depend on the tangents (reverse mode then fails in transposition, naming the primitive, as
    in JAX: a general reducer has no transpose)."""
    n = len(primals) // 2
    if not all(isinstance(t, ad.Zero) for t in tangents[n:]):
        raise TypeError("reduce_window jvp does not support non-zero init_value_tangent.")
    operands, inits = primals[:n], primals[n:]
    diff = [is_differentiable(a) for a in jaxpr.out_avals]
    jvp, out_nz = jvp_jaxpr(jaxpr, diff * 2, instantiate=diff)
    k = sum(diff)

    def reducer(*args):
        (pl, tl), (pr, tr) = (args[:n], args[n:n + k]), (args[n + k:2 * n + k], args[2 * n + k:])
        return eval_jaxpr(jvp.jaxpr, jvp.consts, *pl, *pr, *tl, *tr)
    t_avals = [ShapedArray((), a.dtype) for a, d in zip(jaxpr.out_avals, diff) if d]
    p_avals = list(jaxpr.out_avals)
    wrapped = trace_to_jaxpr(reducer, (p_avals + t_avals) * 2, name="reduce_window_jvp")
    t_in = [ad.instantiate_zeros(t) for t, d in zip(tangents[:n], diff) if d]
    t_init = [np.zeros((), a.dtype) for a in t_avals]
    primal_out = reduce_window_p.bind(*primals, jaxpr=jaxpr, **params)
    outs = reduce_window_p.bind(*operands, *t_in, *inits, *t_init, jaxpr=wrapped, **params)
    it = iter(outs[n:])
    return primal_out, [next(it) if d else ad.Zero.from_primal_value(o) for o, d in zip(primal_out, diff)]


ad.primitive_jvps[reduce_window_p] = _reduce_window_jvp


# -------------------------------------------------------------- transpose

def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                                 window_dilation):
    """The cotangent spread back over each window: ct dilated by the strides and padded, then
    summed over the (dilated) windows with the base dilation as stride."""
    if isinstance(ct, ad.Zero):
        return [ad.Zero(x.aval)]
    shape = x.aval.shape
    pads = _vjp_lhs_padding(shape, window_dimensions, window_strides, aval_of(ct).shape, padding, base_dilation,
                            window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = lax.pad(ct, lax.full((), 0, aval_of(ct).dtype), config)
    out = reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions, window_strides=base_dilation,
                                   padding=((0, 0),) * len(shape), base_dilation=_ones(len(shape)),
                                   window_dilation=window_dilation)
    return [out]


ad.primitive_transposes[reduce_window_sum_p] = _reduce_window_sum_transpose


def _select_and_gather_add_transpose(ct, t, x, *, select_prim, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation):
    if ad.is_undefined_primal(x):
        raise ValueError("transpose of select_and_gather_add: the operand selects, it is not linear")
    if any(d != 1 for d in window_dilation):
        raise NotImplementedError(f"VJP not implemented for select_and_gather (MaxPool) with window dilation, "
                                  f"got window_dilation={window_dilation}.")
    if isinstance(ct, ad.Zero):
        return [ad.Zero(t.aval), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:   # holes never win the selection
        fill = reductions._identity_value("max" if select_prim == "ge" else "min", aval_of(x).dtype)
        x = lax.pad(x, lax.full((), fill, aval_of(x).dtype), [(0, 0, d - 1) for d in base_dilation])
    out = _select_and_scatter_add(ct, x, select_prim, window_dimensions=window_dimensions,
                                  window_strides=window_strides, padding=padding)
    if dilated:
        out = lax.slice(out, (0,) * len(base_dilation), aval_of(out).shape, base_dilation)
    return [out, None]


def _select_and_scatter_add_transpose(ct, s, x, *, select_prim, window_dimensions, window_strides, padding):
    if ad.is_undefined_primal(x):
        raise ValueError("transpose of select_and_scatter_add: the operand selects, it is not linear")
    if isinstance(ct, ad.Zero):
        return [ad.Zero(s.aval), None]
    ones = _ones(len(window_dimensions))
    return [_select_and_gather_add(ct, x, select_prim, window_dimensions=window_dimensions,
                                   window_strides=window_strides, padding=padding, base_dilation=ones,
                                   window_dilation=ones), None]


ad.primitive_transposes[select_and_gather_add_p] = _select_and_gather_add_transpose
ad.primitive_transposes[select_and_scatter_add_p] = _select_and_scatter_add_transpose


# --------------------------------------------------------------- batching

def _with_unit_window_at(params, d):
    """The window params with a size-1, unstrided, unpadded window dimension inserted at ``d``."""
    extra = {"padding": (0, 0)}
    return {k: v[:d] + (extra.get(k, 1),) + v[d:] if k in _WINDOW else v for k, v in params.items()}


def _monoid_batch_rule(prim):
    def rule(args, dims, **params):
        (x,), (d,) = args, dims
        return prim.bind(x, **_with_unit_window_at(params, d)), d
    return rule


for _prim in _MONOIDS:
    batching.primitive_batchers[_prim] = _monoid_batch_rule(_prim)


def _front_batch_rule(prim):
    """Both operands batched at the front (broadcast if one is not), one more window dimension."""
    def rule(args, dims, **params):
        size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
        return prim.bind(*[bdim_at_front(a, d, size) for a, d in zip(args, dims)],
                         **_with_unit_window_at(params, 0)), 0
    return rule


batching.primitive_batchers[select_and_gather_add_p] = _front_batch_rule(select_and_gather_add_p)
batching.primitive_batchers[select_and_scatter_add_p] = _front_batch_rule(select_and_scatter_add_p)


def _reduce_window_batch_rule(args, dims, **params):
    n = len(args) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError("reduce_window batching is not implemented for initial values")
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    operands = [bdim_at_front(a, d, size) for a, d in zip(args[:n], dims[:n])]
    outs = reduce_window_p.bind(*operands, *args[n:], **_with_unit_window_at(params, 0))
    return outs, [0] * n


batching.primitive_batchers[reduce_window_p] = _reduce_window_batch_rule


# --------------------------------------------------------------- lowering

def _i64_elements(pairs):
    arr = np.asarray(pairs, np.int64).reshape(len(pairs), 2)
    return ir.DenseIntElementsAttr.get(arr, type=ir.IntegerType.get_signless(64), shape=arr.shape)


def _reduce_window_op(operands, inits, out_types, combine, *, window_dimensions, window_strides, padding,
                      base_dilation, window_dilation):
    op = hlo.ReduceWindowOp(out_types, list(operands), list(inits), list(window_dimensions),
                            window_strides=list(window_strides), base_dilations=list(base_dilation),
                            window_dilations=list(window_dilation), padding=_i64_elements(padding))
    scalars = [ir.RankedTensorType.get((), ir.RankedTensorType(v.type).element_type) for v in operands]
    mlir.add_region(op.body, scalars * 2, combine)
    return list(op.results)


def _monoid_lowering(kind, ctx, x, **params):
    dtype = ctx.avals_in[0].dtype
    combine = hlo.add if kind == "sum" else _max_min(kind, dtype)
    init = mlir.full((), reductions._identity_value(kind, dtype), dtype)
    return _reduce_window_op([x], [init], [mlir.aval_to_ir_type(ctx.avals_out[0])], combine, **params)


for _prim, _kind in _MONOIDS.items():
    mlir.register_lowering(_prim, functools.partial(_monoid_lowering, _kind))


def _reduce_window_lowering(ctx, *args, jaxpr, **params):
    n = len(args) // 2
    return _reduce_window_op(args[:n], args[n:], [mlir.aval_to_ir_type(a) for a in ctx.avals_out],
                             lambda *xs: ctx.lower_jaxpr(jaxpr, *xs), **params)


mlir.register_lowering(reduce_window_p, _reduce_window_lowering)


def _select_and_gather_add_lowering(ctx, t, x, *, select_prim, **params):
    """A pair reduction over (operand, tangent): each window keeps the pair whose operand the
    comparison selects (XLA's variadic ReduceWindow)."""
    dtype = ctx.avals_in[1].dtype
    kind = "max" if select_prim == "ge" else "min"
    inits = [mlir.full((), reductions._identity_value(kind, dtype), dtype), mlir.full((), 0, dtype)]

    def combine(kx, vx, ky, vy):
        pick = mlir.compare(kx, ky, _SELECT[select_prim], dtype)
        return [hlo.select(pick, kx, ky), hlo.select(pick, vx, vy)]
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    return _reduce_window_op([x, t], inits, [out_type, out_type], combine, **params)[1]


mlir.register_lowering(select_and_gather_add_p, _select_and_gather_add_lowering)


def _select_and_scatter_add_lowering(ctx, source, x, *, select_prim, window_dimensions, window_strides,
                                     padding):
    """XLA's SelectAndScatter with an add scatter. The operand is padded with the selection's
    identity up front (padding never wins), then the result is sliced back, as JAX does on CPU."""
    dtype = ctx.avals_in[1].dtype
    x_aval = ctx.avals_in[1]
    fill = reductions._identity_value("max" if select_prim == "ge" else "min", dtype)
    lows, highs = [lo for lo, _ in padding], [hi for _, hi in padding]
    padded_shape = tuple(d + lo + hi for d, lo, hi in zip(x_aval.shape, lows, highs))
    padded = hlo.pad(x, mlir.full((), fill, dtype), lows, highs, [0] * len(lows))
    out_type = mlir.aval_to_ir_type(x_aval.update(shape=padded_shape))
    op = hlo.SelectAndScatterOp(out_type, padded, source, mlir.full((), 0, dtype),
                                window_dimensions=list(window_dimensions), window_strides=list(window_strides),
                                padding=_i64_elements([(0, 0)] * len(lows)))
    scalar = mlir.scalar_type(dtype)
    mlir.add_region(op.select, [scalar, scalar], lambda a, b: mlir.compare(a, b, _SELECT[select_prim], dtype))
    mlir.add_region(op.scatter, [scalar, scalar], hlo.add)
    starts = list(lows)
    limits = [lo + d for lo, d in zip(lows, x_aval.shape)]
    return hlo.slice(op.result, starts, limits, [1] * len(lows))


mlir.register_lowering(select_and_scatter_add_p, _select_and_scatter_add_lowering)


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(reduce_window_sum_p)
