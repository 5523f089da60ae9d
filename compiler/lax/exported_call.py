"""Calling a serialized StableHLO module: ``call_exported`` (JAX's ``call_exported_p``).

An ``Exported`` that was deserialized (from JAX or from jaxprc) has no jaxpr,
only its module and its calling convention. ``call_exported[exported=...]``
takes the module's array arguments and gives its results; its type comes from
the Exported's avals, with the dimension variables solved from the operands'
shapes. The lowering copies the module's functions into the caller's module
under fresh private names and calls its ``main``, passing it the current ordered-effects token
once per ordered effect of the module (JAX's calling convention) and continuing with the tokens
it returns. A module with dynamic shapes
(``tensor<?x4xf32>``, a symbolic dimension when it was exported) is called with
its arguments converted to those types; the lowering then marks the module for
shape refinement (jaxlib's ``refine_polymorphic_shapes``, run in
``engine.lowering`` before XLA sees it), which makes every shape static again
and checks the module's shape assertions.
"""
from __future__ import annotations

import functools

from jaxlib import _jax
from jaxlib.mlir.dialects import func

from jaxprc.engine import dispatch
from jaxprc.interpreters import ad, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Checker
from jaxprc.ir.shape_poly import evaluate, is_constant_shape, shape_scope, solve_dim_vars

__all__ = ["call_exported_p"]


class _ExportedParam(Checker):
    def problem(self, value):
        return None if hasattr(type(value), "mlir_module_serialized") else "not an Exported"

    def __str__(self):
        return "an Exported (jaxprc.export.deserialize)"


call_exported_p = Primitive("call_exported")
call_exported_p.multiple_results = True
call_exported_p.def_params(exported=_ExportedParam())
# (asked before the params are checked: a malformed param has none; the verifier then names it)
call_exported_p.def_effects(lambda exported: {*getattr(exported, "ordered_effects", ()),
                                              *getattr(exported, "unordered_effects", ())})


@call_exported_p.def_abstract_eval
def _call_exported_abstract_eval(*avals, exported):
    name = exported.fun_name
    if len(avals) != len(exported.in_avals):
        raise TypeError(f"call_exported of '{name}': {len(avals)} operands, but it was exported "
                        f"for {len(exported.in_avals)}")
    for i, (a, e) in enumerate(zip(avals, exported.in_avals)):
        if a.dtype != e.dtype or len(a.shape) != len(e.shape):
            raise TypeError(f"call_exported of '{name}': operand {i} is {a.str_short()}, but it was "
                            f"exported for {e.str_short()}")
    scope = next((s for s in (shape_scope(e.shape) for e in exported.in_avals) if s is not None), None)
    env = solve_dim_vars([(e.shape, a.shape) for a, e in zip(avals, exported.in_avals)], scope)
    return [o if is_constant_shape(o.shape) else o.update(shape=tuple(evaluate(d, env) for d in o.shape))
            for o in exported.out_avals]


call_exported_p.def_impl(functools.partial(dispatch.apply_primitive, call_exported_p))


def _merge_module(mctx, exported) -> str:
    """Copy the Exported's functions into the caller's module (once per module) under fresh
    private names; the symbol of its ``main``."""
    key = ("call_exported", id(exported))
    entry = mctx.callees.get(key)
    if entry is not None:
        return entry[0]
    sub = _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized, mctx.module.context)
    prefix = mctx.unique_symbol(f"call_exported_{exported.fun_name}")
    renames = {}
    for op in sub.body.operations:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        renames[old] = prefix if old == "main" else mctx.unique_symbol(f"{prefix}_{old}")
    for old, new in renames.items():
        ir.SymbolTable.replace_all_symbol_uses(old, new, sub.operation)
    for op in list(sub.body.operations):
        op.attributes["sym_name"] = ir.StringAttr.get(renames[ir.StringAttr(op.attributes["sym_name"]).value])
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        mctx.module.body.append(op)
    mctx.callees[key] = (prefix, exported)
    return prefix


def _convert(x: ir.Value, to: ir.Type) -> ir.Value:
    return x if x.type == to else hlo.convert(to, x)


def _call_exported_lowering(ctx, *args, exported):
    mctx = ctx.module_context
    if mctx.platform in exported.platforms:
        platform_index = exported.platforms.index(mctx.platform)
    elif any(str(c) == "platform" for c in exported.disabled_safety_checks):
        platform_index = 0               # the check disabled: the first platform's lowering, as JAX
    else:
        raise ValueError(f"Function '{exported.fun_name}' was exported for platforms "
                         f"'{exported.platforms}' but it is used on '{(mctx.platform,)}'.")
    symbol = _merge_module(mctx, exported)
    callee = ir.SymbolTable(mctx.module.operation)[symbol]
    callee_type = ir.FunctionType(ir.TypeAttr(callee.attributes["function_type"]).value)
    operands = []
    if len(exported.platforms) > 1:      # the module's first argument picks its platform
        operands.append(mlir.ir_constant(platform_index, "int32"))
    # one token per ordered effect (the calling convention), all the current one: the module's
    # effects follow the caller's earlier ones, and the caller's later ones follow all of its
    n_tokens = len(exported.ordered_effects)
    operands += [ctx.get_token()] * n_tokens
    array_types = callee_type.inputs[len(operands):]
    operands += [args[i] for i in exported.module_kept_var_idx]
    operands = [_convert(x, t) for x, t in zip(operands, callee_type.inputs)]
    call = func.CallOp(list(callee_type.results), ir.FlatSymbolRefAttr.get(symbol), operands)
    if any(not ir.RankedTensorType(t).has_static_shape for t in array_types):
        mctx.needs_shape_refinement = True
    tokens, results = list(call.results[:n_tokens]), call.results[n_tokens:]
    if tokens:
        ctx.set_token(tokens[0] if len(tokens) == 1 else hlo.after_all(tokens))
    return [_convert(r, mctx.ir_type(a)) for r, a in zip(results, ctx.avals_out)]


mlir.register_lowering(call_exported_p, _call_exported_lowering)


def _no_vjp(primals, tangents, *, exported):
    # Reached only for a module serialized without its vjp: one with a vjp is wrapped in a
    # custom_vjp rule that calls it (export._module_caller).
    exported.vjp()      # raises JAX's "No VJP is available" error


ad.primitive_jvps[call_exported_p] = _no_vjp
