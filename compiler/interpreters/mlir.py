"""Lowering rules for user primitives, as in ``jax.interpreters.mlir``.

``register_lowering(prim, rule, platform=None)`` puts ``rule`` in the
lowering table. The rule is called as ``rule(ctx, *operands, **params)``
with ``ctx.avals_in`` / ``ctx.avals_out`` (ShapedArrays) and one MLIR
``ir.Value`` per operand, at an insertion point inside the module being
built; it returns the result values, built with ``hlo`` (jaxlib's
``stablehlo`` dialect) ops.
"""
from jaxlib.mlir import ir  # noqa: F401
from jaxlib.mlir.dialects import stablehlo as hlo  # noqa: F401

from ..ir.tracing import trace_to_jaxpr
from ..engine.lowering import (LOWERING_RULES, PLATFORM_LOWERING_RULES, LoweringRuleContext, add_region,
                               aval_to_ir_type, compare, dtype_to_ir_type, full, has_lowering, ir_constant,
                               is_nan, max_min, reduce, register_lowering, scalar_type, zeros)

__all__ = ["register_lowering", "has_lowering", "lower_fun", "LoweringRuleContext", "aval_to_ir_type",
           "dtype_to_ir_type", "ir_constant", "full", "zeros", "compare", "is_nan", "add_region", "reduce",
           "scalar_type", "max_min", "ir", "hlo"]


def lower_fun(fun, multiple_results: bool = True):
    """A lowering rule from a traceable Python function of the operands (JAX's ``mlir.lower_fun``).

    ``fun`` is traced on the equation's input types and its jaxpr is emitted in place.
    """
    def rule(ctx: LoweringRuleContext, *args, **params):
        jaxpr = trace_to_jaxpr(lambda *xs: fun(*xs, **params) if multiple_results else [fun(*xs, **params)],
                               ctx.avals_in, name="lower_fun")
        return ctx.lower_jaxpr(jaxpr, *args)
    return rule
