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
from jaxlib.mlir.dialects import stablehlo as hlo

from .ir import dtypes as dt
from .lowering import (BUILTIN_RULES_BY_NAME, aval_to_ir_type, dtype_to_ir_type, full, ir_constant,
                       param_name as _param_name, scalar_type as _scalar_type, compare_type as _compare_type,
                       compare, is_nan as _is_nan, add_region as _add_region,
                       reduce as _reduce, max_min as _max_min)


def _rule(*names):
    def register(fn):
        for name in names:
            BUILTIN_RULES_BY_NAME[name] = fn
        return fn
    return register


@_rule("name")
def _identity(ctx, x, **_):     # name[name] x: the identity, naming a value for remat policies
    return x


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


# -------------------------------------------------------------- control flow

@_rule("cond")
def _cond(ctx, index, *operands, branches, **_):
    """stablehlo.case on the index clamped into [0, len(branches)), as lax.switch does."""
    idx_aval = ctx.avals_in[0]
    i32 = _scalar_type(dt.int32)
    if idx_aval.dtype != dt.int32:
        index = hlo.convert(i32, index)
    index = hlo.clamp(full((), 0, dt.int32), index, full((), len(branches) - 1, dt.int32))
    out_types = [aval_to_ir_type(a) for a in ctx.avals_out]
    op = hlo.CaseOp(out_types, index, len(branches))
    for region, branch in zip(op.branches, branches):
        with ir.InsertionPoint(region.blocks.append()):
            hlo.return_(ctx.lower_jaxpr(branch, *operands))
    return list(op.results)


def _while_loop(init, cond_fn, body_fn):
    """stablehlo.while over ``init``; cond_fn/body_fn take the loop-carried values."""
    types = [v.type for v in init]
    op = hlo.WhileOp(types, list(init))
    _add_region(op.cond, types, cond_fn)
    _add_region(op.body, types, body_fn)
    return list(op.results)


@_rule("while")
def _while(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # Consts travel in the loop state, so the regions only use their own block arguments.
    split = cond_nconsts + body_nconsts

    def cond_fn(*state):
        (pred,) = ctx.lower_jaxpr(cond_jaxpr, *state[:cond_nconsts], *state[split:])
        return pred

    def body_fn(*state):
        new = ctx.lower_jaxpr(body_jaxpr, *state[cond_nconsts:split], *state[split:])
        return [*state[:split], *new]

    return _while_loop(args, cond_fn, body_fn)[split:]


def _index_tuple(idx, ndim):
    return [idx] + [full((), 0, dt.int32) for _ in range(ndim - 1)]


@_rule("scan")
def _scan(ctx, *args, jaxpr, length, reverse, num_consts, num_carry, **_):
    """A while loop over i in [0, length): slice xs[i], run the body, write ys[i] (i mirrored if reverse)."""
    consts, init, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    xs_avals = ctx.avals_in[num_consts + num_carry:]
    ys_avals = ctx.avals_out[num_carry:]
    if length == 0:
        return [*init, *[full(a.shape, 0, a.dtype) for a in ys_avals]]
    nc, nx = num_consts, len(xs)
    i32 = dt.int32

    def cond_fn(i, *_):
        return compare(i, full((), length, i32), "LT", i32)

    def body_fn(i, *state):
        c, x, carry, ys = (state[:nc], state[nc:nc + nx], state[nc + nx:nc + nx + num_carry],
                           state[nc + nx + num_carry:])
        at = hlo.subtract(full((), length - 1, i32), i) if reverse else i
        x_t = [hlo.reshape(aval_to_ir_type(a.update(shape=a.shape[1:])),
                           hlo.dynamic_slice(v, _index_tuple(at, a.ndim), [1, *a.shape[1:]]))
               for v, a in zip(x, xs_avals)]
        outs = ctx.lower_jaxpr(jaxpr, *c, *carry, *x_t)
        ys = [hlo.dynamic_update_slice(y, hlo.reshape(aval_to_ir_type(a.update(shape=(1, *a.shape[1:]))), y_t),
                                       _index_tuple(at, a.ndim))
              for y, y_t, a in zip(ys, outs[num_carry:], ys_avals)]
        return [hlo.add(i, full((), 1, i32)), *c, *x, *outs[:num_carry], *ys]

    init_state = [full((), 0, i32), *consts, *xs, *init, *[full(a.shape, 0, a.dtype) for a in ys_avals]]
    final = _while_loop(init_state, cond_fn, body_fn)
    return final[1 + nc + nx:]


@_rule("jit")
def _call(ctx, *args, jaxpr, name):
    return ctx.call(jaxpr, args, name)


@_rule("checkpoint")
def _checkpoint(ctx, *args, jaxpr, prevent_cse, policy):
    """Inlined behind an optimization barrier on its operands (with ``prevent_cse``): XLA can
    neither merge a recomputation with the forward computation it repeats (CSE) nor move it
    before its last operand exists -- in the backward pass that is a cotangent, which comes late."""
    if prevent_cse and args:
        if ctx.platform == "cpu":
            args = _depend_on_last(args, ctx.avals_in)
        args = list(hlo.OptimizationBarrierOp(list(args)).results)
    return ctx.lower_jaxpr(jaxpr, *args)


def _bits_type(aval, shape) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(shape, ir.IntegerType.get_unsigned(aval.dtype.itemsize * 8))


def _depend_on_last(args, avals):
    """XLA:CPU erases optimization barriers before its last CSE and its scheduling, so there the
    operands are also made to depend on the last one, exactly: a zero XLA cannot prove zero (the
    bits of the last operand's first element shifted right by their width) is OR-ed into the
    bits of each operand. Arguments of the enclosing function are left alone: they are live
    throughout anyway, and tying them would only copy them."""
    tieable = [i for i, a in enumerate(avals) if a.size and (dt.is_float(a.dtype) or dt.is_int(a.dtype))]
    if len(tieable) < 2:
        return args
    last, src = tieable[-1], avals[tieable[-1]]
    width = src.dtype.itemsize * 8
    first = hlo.slice(args[last], [0] * src.ndim, [1] * src.ndim, [1] * src.ndim)
    bits = hlo.bitcast_convert(_bits_type(src, (1,) * src.ndim), first)
    shift = hlo.constant(ir.DenseElementsAttr.get_splat(
        _bits_type(src, (1,) * src.ndim), ir.IntegerAttr.get(ir.IntegerType.get_unsigned(width), width)))
    zero = hlo.reshape(_bits_type(src, ()), hlo.shift_right_logical(bits, shift))
    out = list(args)
    for i in tieable[:-1]:
        if isinstance(args[i].owner, ir.Block):
            continue
        a = avals[i]
        z = hlo.broadcast_in_dim(_bits_type(a, a.shape), hlo.convert(_bits_type(a, ()), zero), [])
        bits = hlo.bitcast_convert(_bits_type(a, a.shape), args[i])
        out[i] = hlo.bitcast_convert(aval_to_ir_type(a), hlo.or_(bits, z))
    return out


@_rule("custom_jvp_call_jaxpr", "custom_vjp_call_jaxpr")
def _custom_call(ctx, *args, fun_jaxpr, **_):
    """Lowering ignores the custom rules and runs the primal function."""
    return ctx.lower_jaxpr(fun_jaxpr, *args)


@_rule("custom_lin")
def _custom_lin(ctx, *args, **_):
    raise NotImplementedError(
        "custom_lin has no lowering: it only exists inside linearized (tangent) jaxprs and must be "
        "transposed away (reverse mode calls the custom_vjp's bwd) before a program is lowered.")
