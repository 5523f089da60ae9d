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
from .lowering import (BUILTIN_RULES_BY_NAME, aval_to_ir_type, full,
                       param_name as _param_name, scalar_type as _scalar_type, compare_type as _compare_type,
                       compare, zeros as _zeros, add_region as _add_region,
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


@_rule("stop_gradient", "copy", "name")
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
