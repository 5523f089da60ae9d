"""The StableHLO lowering rule of every built-in primitive (docs/primitives.md).

Rules are registered by primitive name (``_rule("gather")``) because some
primitives are defined by other modules; ``lowering._rule_for`` installs a rule
into ``LOWERING_RULES`` the first time its primitive is lowered. Semantics
follow JAX's lowerings wherever XLA's own differ (NaN ordering in sort and
argmax, out-of-bounds gathers, clamped switch indices).
"""
from __future__ import annotations

from enum import Enum

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo
from jaxlib.mlir.dialects import stablehlo as hlo

from .ir import dtypes as dt
from .lowering import (BUILTIN_RULES_BY_NAME, aval_to_ir_type, dtype_to_ir_type, full, ir_constant,
                       param_name as _param_name, scalar_type as _scalar_type, compare_type as _compare_type,
                       compare, zeros as _zeros, is_nan as _is_nan, add_region as _add_region,
                       reduce as _reduce)


def _rule(*names):
    def register(fn):
        for name in names:
            BUILTIN_RULES_BY_NAME[name] = fn
        return fn
    return register


# ------------------------------------------------------------ elementwise

def _unary(op):
    return lambda ctx, x, **_: op(x)


def _binary(op):
    return lambda ctx, x, y, **_: op(x, y)


for _names, _op in [
    ("neg", hlo.negate), ("floor", hlo.floor), ("ceil", hlo.ceil), ("is_finite", hlo.is_finite),
    ("exp", hlo.exponential), ("log", hlo.log), ("log1p", hlo.log_plus_one),
    ("expm1", hlo.exponential_minus_one), ("tanh", hlo.tanh), ("logistic", hlo.logistic),
    ("sin", hlo.sine), ("cos", hlo.cosine), ("tan", hlo.tan), ("asin", chlo.asin), ("acos", chlo.acos),
    ("atan", chlo.atan), ("sinh", chlo.sinh), ("cosh", chlo.cosh), ("asinh", chlo.asinh),
    ("acosh", chlo.acosh), ("atanh", chlo.atanh), ("sqrt", hlo.sqrt), ("rsqrt", hlo.rsqrt),
    ("cbrt", hlo.cbrt), ("erf", chlo.erf), ("erfc", chlo.erfc), ("erf_inv", chlo.erf_inv),
    ("lgamma", chlo.lgamma), ("digamma", chlo.digamma), ("real", hlo.real), ("imag", hlo.imag),
    ("not", hlo.not_), ("population_count", hlo.popcnt), ("clz", hlo.count_leading_zeros),
]:
    _rule(_names)(_unary(_op))

for _names, _op in [
    ("add", hlo.add), ("sub", hlo.subtract), ("mul", hlo.multiply), ("div", hlo.divide),
    ("rem", hlo.remainder), ("pow", hlo.power), ("atan2", hlo.atan2), ("nextafter", chlo.next_after),
    ("complex", hlo.complex),
    ("and", hlo.and_), ("or", hlo.or_), ("xor", hlo.xor), ("shift_left", hlo.shift_left),
    ("shift_right_arithmetic", hlo.shift_right_arithmetic),
    ("shift_right_logical", hlo.shift_right_logical),
]:
    _rule(_names)(_binary(_op))


def _max_min(kind: str, dtype):
    """The binary max or min of ``dtype`` values. Complex numbers compare lexicographically by
    (real, imag), as in JAX (XLA's own maximum is not defined on them)."""
    op = hlo.maximum if kind == "max" else hlo.minimum
    if not dt.is_complex(dtype):
        return op
    direction = "GT" if kind == "max" else "LT"

    def lexicographic(x, y):
        rx, ry, ix, iy = hlo.real(x), hlo.real(y), hlo.imag(x), hlo.imag(y)
        pick_x = hlo.select(compare(rx, ry, "EQ", dt.float32), compare(ix, iy, direction, dt.float32),
                            compare(rx, ry, direction, dt.float32))
        return hlo.select(pick_x, x, y)
    return lexicographic


@_rule("max", "min")
def _max_min_rule(ctx, x, y):
    return _max_min(ctx.primitive.name, ctx.avals_in[0].dtype)(x, y)


for _name, _direction in [("eq", "EQ"), ("ne", "NE"), ("lt", "LT"), ("le", "LE"), ("gt", "GT"), ("ge", "GE")]:
    _rule(_name)(lambda ctx, x, y, _d=_direction: compare(x, y, _d, ctx.avals_in[0].dtype))


@_rule("stop_gradient", "copy")
def _identity(ctx, x, **_):
    return x


@_rule("sign")
def _sign(ctx, x):
    aval = ctx.avals_in[0]
    if dt.is_unsigned(aval.dtype):    # stablehlo.sign is for signed and floating types
        return hlo.select(compare(x, _zeros(aval), "EQ", aval.dtype), x, full(aval.shape, 1, aval.dtype))
    return hlo.sign(x)


@_rule("abs")
def _abs(ctx, x):
    return x if dt.is_unsigned(ctx.avals_in[0].dtype) else hlo.abs(x)


@_rule("square")
def _square(ctx, x):
    return hlo.multiply(x, x)


@_rule("exp2")
def _exp2(ctx, x):
    aval = ctx.avals_in[0]
    return hlo.exponential(hlo.multiply(full(aval.shape, np.log(2), aval.dtype), x))


@_rule("round")
def _round(ctx, x, *, rounding_method=0):
    to_even = _param_name(rounding_method) in ("1", "TO_NEAREST_EVEN")
    return hlo.round_nearest_even(x) if to_even else hlo.round_nearest_afz(x)


@_rule("integer_pow")
def _integer_pow(ctx, x, *, y):
    """Exponentiation by squaring; a negative exponent takes the reciprocal, as in JAX."""
    aval = ctx.avals_in[0]
    acc, base, n = None, x, abs(int(y))
    while n:
        if n & 1:
            acc = base if acc is None else hlo.multiply(acc, base)
        n >>= 1
        if n:
            base = hlo.multiply(base, base)
    if acc is not None and y > 0:       # no constant 1: it would be a dead op in the module
        return acc
    one = full(aval.shape, 1, aval.dtype)
    return one if acc is None else hlo.divide(one, acc)


@_rule("conj")
def _conj(ctx, x):
    return hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))


@_rule("convert_element_type")
def _convert_element_type(ctx, x, *, new_dtype, weak_type=False, **_):
    (aval_in,), (aval_out,) = ctx.avals_in, ctx.avals_out
    if dt.is_complex(aval_in.dtype) and not dt.is_complex(aval_out.dtype):
        x = hlo.real(x)                        # JAX drops the imaginary part
        aval_in = aval_in.update(dtype=dt.float32 if aval_in.dtype == dt.complex64 else dt.float64)
    if aval_in.dtype == aval_out.dtype:
        return x
    if aval_out.dtype == dt.bool_:             # nonzero -> True (a plain convert would truncate)
        return compare(x, _zeros(aval_in), "NE", aval_in.dtype)
    return hlo.convert(aval_to_ir_type(aval_out), x)


@_rule("bitcast_convert_type")
def _bitcast_convert_type(ctx, x, *, new_dtype):
    return hlo.bitcast_convert(aval_to_ir_type(ctx.avals_out[0]), x)


@_rule("clamp")
def _clamp(ctx, lo, x, hi):
    return hlo.clamp(lo, x, hi)


@_rule("select_n")
def _select_n(ctx, which, *cases):
    """Case i where which == i: a balanced tree of two-way selects on the selector."""
    which_aval = ctx.avals_in[0]
    if len(cases) == 1:
        return cases[0]
    if which_aval.dtype == dt.bool_:
        return hlo.select(which, cases[1], cases[0])

    def pick(lo, hi):              # cases[lo:hi]
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        below = compare(which, full(which_aval.shape, mid, which_aval.dtype), "LT", which_aval.dtype)
        return hlo.select(below, pick(lo, mid), pick(mid, hi))
    return pick(0, len(cases))


# ------------------------------------------------------------- structural

@_rule("broadcast_in_dim")
def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions, **_):
    return hlo.broadcast_in_dim(aval_to_ir_type(ctx.avals_out[0]), x, list(broadcast_dimensions))


@_rule("reshape", "squeeze")
def _reshape(ctx, x, **_):
    return hlo.reshape(aval_to_ir_type(ctx.avals_out[0]), x)


@_rule("transpose")
def _transpose(ctx, x, *, permutation):
    return hlo.transpose(x, list(permutation))


@_rule("rev")
def _rev(ctx, x, *, dimensions):
    return hlo.reverse(x, list(dimensions))


@_rule("pad")
def _pad(ctx, x, padval, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return hlo.pad(x, padval, list(lo), list(hi), list(interior))


@_rule("concatenate")
def _concatenate(ctx, *xs, dimension):
    return hlo.concatenate(list(xs), dimension)


@_rule("slice")
def _slice(ctx, x, *, start_indices, limit_indices, strides=None):
    strides = list(strides) if strides is not None else [1] * len(start_indices)
    return hlo.slice(x, list(start_indices), list(limit_indices), strides)


def _index_scalars(idxs, avals):
    """Start indices of one common type (stablehlo requires it); int32 unless one needs 64 bits."""
    wide = any(a.dtype.itemsize > 4 for a in avals)
    target = dt.int64 if wide else dt.int32
    return [i if a.dtype == target else hlo.convert(_scalar_type(target), i) for i, a in zip(idxs, avals)]


@_rule("dynamic_slice")
def _dynamic_slice(ctx, x, *idxs, slice_sizes):
    return hlo.dynamic_slice(x, _index_scalars(idxs, ctx.avals_in[1:]), list(slice_sizes))


@_rule("dynamic_update_slice")
def _dynamic_update_slice(ctx, x, update, *idxs):
    return hlo.dynamic_update_slice(x, update, _index_scalars(idxs, ctx.avals_in[2:]))


@_rule("iota")
def _iota(ctx, *, dtype, shape, dimension, **_):
    return hlo.iota(aval_to_ir_type(ctx.avals_out[0]), dimension)


def _gather_dnums(dnums, index_vector_dim):
    return hlo.GatherDimensionNumbers.get(
        offset_dims=list(dnums.offset_dims), collapsed_slice_dims=list(dnums.collapsed_slice_dims),
        operand_batching_dims=list(dnums.operand_batching_dims),
        start_indices_batching_dims=list(dnums.start_indices_batching_dims),
        start_index_map=list(dnums.start_index_map), index_vector_dim=index_vector_dim)


def default_fill_value(dtype):
    """JAX's fill for out-of-bounds FILL_OR_DROP gathers: NaN, the minimum (signed), the maximum (unsigned), True."""
    if dt.is_inexact(dtype):
        return np.nan
    if dt.is_signed(dtype):
        return np.iinfo(dtype).min
    if dt.is_unsigned(dtype):
        return np.iinfo(dtype).max
    return True


@_rule("gather")
def _gather(ctx, operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None,
            indices_are_sorted=False, unique_indices=False):
    """XLA clamps start indices (CLIP, PROMISE_IN_BOUNDS); FILL_OR_DROP masks windows that do not fit."""
    op_aval, idx_aval = ctx.avals_in
    out_aval = ctx.avals_out[0]
    batch_ndim = idx_aval.ndim - 1
    out = hlo.gather(operand, indices, _gather_dnums(dimension_numbers, batch_ndim), list(slice_sizes),
                     indices_are_sorted=bool(indices_are_sorted))
    if _param_name(mode) != "FILL_OR_DROP":
        return out
    # Signed 64-bit indices, so large unsigned ones compare correctly.
    idx_dtype = dt.int64
    idx = indices if idx_aval.dtype == idx_dtype else hlo.convert(
        aval_to_ir_type(idx_aval.update(dtype=idx_dtype)), indices)
    upper = np.array([op_aval.shape[d] - slice_sizes[d] for d in dimension_numbers.start_index_map], idx_dtype)
    upper = hlo.broadcast_in_dim(aval_to_ir_type(idx_aval.update(dtype=idx_dtype)), ir_constant(upper),
                                 [batch_ndim])
    in_bounds = hlo.and_(compare(idx, full(idx_aval.shape, 0, idx_dtype), "GE", idx_dtype),
                         compare(idx, upper, "LE", idx_dtype))
    mask_t = ir.RankedTensorType.get(idx_aval.shape[:-1], dtype_to_ir_type(dt.bool_))
    (mask,) = _reduce([in_bounds], [ir_constant(True)], [batch_ndim], [mask_t], hlo.and_)
    batch_dims_in_out = [d for d in range(out_aval.ndim) if d not in dimension_numbers.offset_dims]
    mask = hlo.broadcast_in_dim(aval_to_ir_type(out_aval.update(dtype=dt.bool_)), mask, batch_dims_in_out)
    fill = default_fill_value(out_aval.dtype) if fill_value is None else fill_value
    return hlo.select(mask, out, ir_constant(np.full(out_aval.shape, fill, out_aval.dtype)))


_SCATTER_COMBINERS = {"scatter": lambda old, new: new, "scatter-add": hlo.add, "scatter-mul": hlo.multiply,
                      "scatter-min": "min", "scatter-max": "max"}


def _clamp_scatter_indices(indices, idx_aval, op_aval, upd_aval, dnums):
    """CLIP mode: clamp each index so its whole update window lies inside the operand (as JAX)."""
    window = iter(dnums.update_window_dims)
    sizes = [1 if d in dnums.inserted_window_dims or d in dnums.operand_batching_dims
             else upd_aval.shape[next(window)] for d in range(op_aval.ndim)]
    upper = np.array([op_aval.shape[d] - sizes[d] for d in dnums.scatter_dims_to_operand_dims])
    upper = np.minimum(upper, np.iinfo(idx_aval.dtype).max).astype(idx_aval.dtype)
    upper = hlo.broadcast_in_dim(aval_to_ir_type(idx_aval), ir_constant(upper), [idx_aval.ndim - 1])
    return hlo.clamp(full(idx_aval.shape, 0, idx_aval.dtype), indices, upper)


@_rule(*_SCATTER_COMBINERS)
def _scatter(ctx, operand, indices, updates, *, dimension_numbers, mode, indices_are_sorted=False,
             unique_indices=False, **_):
    """XLA drops out-of-bounds updates (FILL_OR_DROP, PROMISE_IN_BOUNDS); CLIP clamps first."""
    op_aval, idx_aval, upd_aval = ctx.avals_in
    dnums = dimension_numbers
    if _param_name(mode) == "CLIP":
        indices = _clamp_scatter_indices(indices, idx_aval, op_aval, upd_aval, dnums)
    sdn = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(dnums.update_window_dims), inserted_window_dims=list(dnums.inserted_window_dims),
        input_batching_dims=list(dnums.operand_batching_dims),
        scatter_indices_batching_dims=list(dnums.scatter_indices_batching_dims),
        scattered_dims_to_operand_dims=list(dnums.scatter_dims_to_operand_dims),
        index_vector_dim=idx_aval.ndim - 1)
    op = hlo.ScatterOp([operand.type], [operand], indices, [updates], sdn,
                       indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))
    combine = _SCATTER_COMBINERS[ctx.primitive.name]
    if isinstance(combine, str):
        combine = _max_min(combine, op_aval.dtype)
    if op_aval.dtype == dt.bool_ and ctx.primitive.name == "scatter-add":
        combine = hlo.or_
    scalar = _scalar_type(op_aval.dtype)
    _add_region(op.update_computation, [scalar, scalar], combine)
    return op.result


# ------------------------------------------------------------------- sort

def _sort_key(x, dtype):
    """JAX's float canonicalisation for sorting: -0.0 -> 0.0 and every NaN -> +NaN."""
    if not dt.is_float(dtype):
        return x
    x = hlo.select(compare(x, full((), 0, dtype), "EQ", dtype), full((), 0, dtype), x)
    return hlo.select(_is_nan(x, dtype), full((), np.nan, dtype), x)


def _lexicographic_less(keys_lhs, keys_rhs, dtypes):
    """lhs < rhs in the total order (NaNs last), lexicographically over the keys."""
    parts = []                 # complex keys compare as (real, imag), as in JAX
    for a, b, dtype in zip(keys_lhs, keys_rhs, dtypes):
        if dt.is_complex(dtype):
            parts += [(hlo.real(a), hlo.real(b), dt.float32), (hlo.imag(a), hlo.imag(b), dt.float32)]
        else:
            parts.append((a, b, dtype))
    result = None
    for a, b, dtype in reversed(parts):
        kind = "TOTALORDER" if dt.is_float(dtype) else None
        a, b = _sort_key(a, dtype), _sort_key(b, dtype)
        lt = compare(a, b, "LT", dtype, kind)
        result = lt if result is None else hlo.or_(lt, hlo.and_(compare(a, b, "EQ", dtype, kind), result))
    return result


@_rule("sort")
def _sort(ctx, *operands, dimension, is_stable=True, num_keys=1):
    op = hlo.SortOp([v.type for v in operands], list(operands), dimension=dimension, is_stable=bool(is_stable))
    dtypes = [a.dtype for a in ctx.avals_in]
    arg_types = [t for a in ctx.avals_in for t in (_scalar_type(a.dtype),) * 2]

    def comparator(*args):
        lhs, rhs = args[0::2], args[1::2]
        return _lexicographic_less(lhs[:num_keys], rhs[:num_keys], dtypes[:num_keys])
    _add_region(op.comparator, arg_types, comparator)
    return list(op.results)


# ---------------------------------------------------------- reductions

def _identity_value(kind: str, dtype):
    """The neutral element of a reduction: 'max' starts at the lowest value, 'min' at the highest."""
    if kind in ("max", "min"):
        if dtype == dt.bool_:
            return kind == "min"
        if dt.is_inexact(dtype):
            return -np.inf if kind == "max" else np.inf
        info = np.iinfo(dtype)
        return info.min if kind == "max" else info.max
    if kind == "and":
        return True if dtype == dt.bool_ else -1 if dt.is_signed(dtype) else np.iinfo(dtype).max
    return {"sum": 0, "prod": 1, "or": 0, "xor": 0}[kind]


_REDUCERS = {"sum": hlo.add, "prod": hlo.multiply, "max": "max", "min": "min",
             "and": hlo.and_, "or": hlo.or_, "xor": hlo.xor}


@_rule(*[f"reduce_{k}" for k in _REDUCERS])
def _reduce_rule(ctx, x, *, axes, **_):
    kind = ctx.primitive.name[len("reduce_"):]
    dtype = ctx.avals_in[0].dtype
    init = full((), _identity_value(kind, dtype), dtype)
    combine = _REDUCERS[kind]
    if isinstance(combine, str):
        combine = _max_min(combine, dtype)
    return _reduce([x], [init], axes, [aval_to_ir_type(ctx.avals_out[0])], combine)


@_rule("argmax", "argmin")
def _argminmax(ctx, x, *, axes, index_dtype):
    """(value, index) reduction: a NaN wins over numbers, the first index wins ties (numpy/JAX)."""
    (aval,), (out_aval,) = ctx.avals_in, ctx.avals_out
    kind = ctx.primitive.name[3:]
    axis = axes[0]
    dtype = aval.dtype
    index_dtype = np.dtype(index_dtype)
    iota = hlo.iota(aval_to_ir_type(aval.update(dtype=index_dtype)), axis)
    better = "GT" if kind == "max" else "LT"

    def combine(xv, xi, yv, yi):
        x_better = compare(xv, yv, better, dtype)
        tie = compare(xv, yv, "EQ", dtype)
        if dt.is_float(dtype):
            x_nan, y_nan = _is_nan(xv, dtype), _is_nan(yv, dtype)
            x_better = hlo.or_(x_better, hlo.and_(x_nan, hlo.not_(y_nan)))
            tie = hlo.or_(tie, hlo.and_(x_nan, y_nan))
        pick_x = hlo.or_(x_better, hlo.and_(tie, compare(xi, yi, "LT", index_dtype)))
        return [hlo.select(pick_x, xv, yv), hlo.select(pick_x, xi, yi)]

    op = hlo.ReduceOp([aval_to_ir_type(out_aval.update(dtype=dtype)), aval_to_ir_type(out_aval)], [x, iota],
                      [full((), _identity_value(kind, dtype), dtype), full((), 0, index_dtype)], [axis])
    _add_region(op.body, [_scalar_type(dtype), _scalar_type(index_dtype)] * 2, combine)
    return op.results[1]


def _logaddexp(a, b, dtype):
    """log(exp(a) + exp(b)) without overflow; equal infinities give themselves (JAX's formula)."""
    amax = hlo.maximum(a, b)
    delta = hlo.subtract(a, b)
    stable = hlo.add(amax, hlo.log_plus_one(hlo.exponential(hlo.negate(hlo.abs(delta)))))
    return hlo.select(_is_nan(delta, dtype), hlo.add(a, b), stable)


_CUMULATIVE = {"cumsum": ("sum", hlo.add), "cumprod": ("prod", hlo.multiply),
               "cummax": ("max", None), "cummin": ("min", None),
               "cumlogsumexp": ("logsumexp", None)}


@_rule(*_CUMULATIVE)
def _cumulative(ctx, x, *, axis, reverse=False):
    """A reduce_window whose window covers each element's prefix, as JAX lowers it; XLA rewrites
    this form into an efficient scan (and the summation order matches JAX's)."""
    (aval,) = ctx.avals_in
    n = aval.shape[axis]
    if n == 0:
        return x
    kind, combine = _CUMULATIVE[ctx.primitive.name]
    dtype = aval.dtype
    if kind == "logsumexp":
        init, combine = -np.inf, lambda a, b: _logaddexp(a, b, dtype)
    elif kind in ("max", "min"):
        init, combine = _identity_value(kind, dtype), _max_min(kind, dtype)
    else:
        init = _identity_value(kind, dtype)
    window = [1] * aval.ndim
    window[axis] = n
    padding = np.zeros((aval.ndim, 2), np.int64)
    padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
    pad_attr = ir.DenseIntElementsAttr.get(padding, type=ir.IntegerType.get_signless(64), shape=padding.shape)
    op = hlo.ReduceWindowOp([x.type], [x], [full((), init, dtype)], window, padding=pad_attr)
    scalar = _scalar_type(dtype)
    _add_region(op.body, [scalar, scalar], combine)
    return op.results[0]


# ----------------------------------------------------------- linear algebra

def _precision_attr(precision):
    if precision is None:
        return None
    pair = precision if isinstance(precision, tuple) else (precision, precision)
    return ir.ArrayAttr.get([hlo.PrecisionAttr.get(_param_name(p).split(".")[-1]) for p in pair])


@_rule("dot_general")
def _dot_general(ctx, lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None, **_):
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    dnums = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contract), rhs_contracting_dimensions=list(rhs_contract))
    out_aval = ctx.avals_out[0]
    lhs_aval, rhs_aval = ctx.avals_in
    if out_aval.dtype == dt.bool_:         # XLA has no boolean dot: compute in int32, then test nonzero
        i32 = lambda v, a: hlo.convert(aval_to_ir_type(a.update(dtype=dt.int32)), v)
        prod = hlo.dot_general(aval_to_ir_type(out_aval.update(dtype=dt.int32)), i32(lhs, lhs_aval),
                               i32(rhs, rhs_aval), dnums)
        return compare(prod, full(out_aval.shape, 0, dt.int32), "NE", dt.int32)
    return hlo.dot_general(aval_to_ir_type(out_aval), lhs, rhs, dnums,
                           precision_config=_precision_attr(precision))
