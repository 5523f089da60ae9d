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
from .lowering import (BUILTIN_RULES_BY_NAME, aval_to_ir_type, full,
                       param_name as _param_name, scalar_type as _scalar_type, compare_type as _compare_type,
                       compare, add_region as _add_region, reduce as _reduce, max_min as _max_min)


def _rule(*names):
    def register(fn):
        for name in names:
            BUILTIN_RULES_BY_NAME[name] = fn
        return fn
    return register


@_rule("name")
def _identity(ctx, x, **_):     # name[name] x: the identity, naming a value for remat policies
    return x


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
