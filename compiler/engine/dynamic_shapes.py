"""Dynamic shapes in the lowering: a polymorphic program as one StableHLO module.

A program with symbolic dimensions lowers (for ``export``; ``jit`` specialises
instead) to a module whose types have dynamic sizes (``tensor<?x4xf32>``), as
JAX's exported modules do. Its public ``main`` first computes each dimension
variable from an argument's size (``stablehlo.get_dimension_size``) and checks
with ``shape_assertion`` custom calls that the sizes are consistent (each
variable ``>= 1``, the constraints, every other symbolic dimension of the
arguments equal to its expression); the checks run when the caller's shape refinement (jaxlib's
``refine_polymorphic_shapes``) makes the sizes constants. While ``main``'s body
lowers, ``dim_value(d)`` computes a dimension from those values and
``shape_value(shape)`` the 1-d shape operand of ``dynamic_broadcast_in_dim``,
``dynamic_iota`` and ``dynamic_reshape``.

The private functions main calls take the values as leading arguments
(marked ``jax.global_constant``, as in JAX's modules); a function reached
otherwise (a composite's decomposition) does not see them, and a dimension
needed there is an error naming it.
"""
from __future__ import annotations

import contextvars

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo as hlo

from ..ir.shape_poly import DimExpr, InconclusiveDimensionOperation, parsed_constraints

__all__ = ["bind", "bind_dimension_variables", "dim_value", "dynamic_type", "has_dynamic_values", "hide", "reduce_window",
           "reset", "shape_value", "values"]

# While a polymorphic main lowers: dimension variable -> its value (tensor<i64>).
_DIM_VALUES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("jaxprc_dim_values", default=None)


def dynamic_type(shape, element_type) -> ir.RankedTensorType:
    """A tensor type with a dynamic size where ``shape`` has a symbolic dimension."""
    dyn = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([d if type(d) is int else dyn for d in shape], element_type)


def has_dynamic_values() -> bool:
    return _DIM_VALUES.get() is not None


def _i64(value: int) -> ir.Value:
    i64 = ir.IntegerType.get_signless(64)
    scalar = ir.RankedTensorType.get((), i64)
    return hlo.constant(ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(i64, value)))


def dim_value(d) -> ir.Value:
    """The value (``tensor<i64>``) of dimension ``d`` in the function being lowered."""
    if type(d) is not DimExpr:
        return _i64(int(d))
    env = _DIM_VALUES.get()
    if env is None:
        raise InconclusiveDimensionOperation(
            f"the value of dimension '{d}' is needed where dimension variables are not known (a "
            "function called from a polymorphic main; dynamic lowering computes them in main only)")
    total = None
    for mono, coeff in d._terms:
        term = None if mono and coeff == 1 else _i64(coeff)
        for atom, power in mono:
            a = _atom_value(atom, env)
            for _ in range(power):
                term = a if term is None else hlo.multiply(term, a)
        total = term if total is None else hlo.add(total, term)
    return total


def _atom_value(atom, env) -> ir.Value:
    if atom[0] == "var":
        return env[atom[1]]
    a, b = dim_value(atom[1]), dim_value(atom[2])
    if atom[0] == "max":
        return hlo.maximum(a, b)
    if atom[0] == "min":
        return hlo.minimum(a, b)
    zero = _i64(0)
    rem = hlo.remainder(a, b)             # truncated: toward zero, as C
    # floor semantics (Python's //, %): adjust when the remainder is nonzero and its sign differs from b's
    adjust = hlo.and_(_cmp(rem, zero, "NE"), _cmp(_cmp(rem, zero, "LT"), _cmp(b, zero, "LT"), "NE"))
    if atom[0] == "mod":
        return hlo.select(adjust, hlo.add(rem, b), rem)
    quot = hlo.divide(a, b)
    return hlo.select(adjust, hlo.subtract(quot, _i64(1)), quot)


def _cmp(a, b, direction: str) -> ir.Value:
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction))


def shape_value(shape) -> ir.Value:
    """The 1-d ``tensor<rank x i64>`` of the sizes of ``shape``."""
    i64 = ir.IntegerType.get_signless(64)
    one = ir.RankedTensorType.get((1,), i64)
    parts = [hlo.reshape(one, dim_value(d)) for d in shape]
    if not parts:
        return hlo.constant(ir.DenseElementsAttr.get(np.zeros(0, np.int64), type=i64))
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, 0)


def reduce_window(mctx, operands, inits, result_types, combine, *, window_dimensions, window_strides, padding,
                  base_dilation, window_dilation) -> list:
    """A windowed reduction whose window, strides, dilations or padding hold symbolic dimensions:
    StableHLO's ``stablehlo.dynamic_reduce_window`` (a custom call taking them as operands and its
    reducer as a private function), which shape refinement turns into ``reduce_window``."""
    scalars = [ir.RankedTensorType.get((), ir.RankedTensorType(v.type).element_type) for v in operands]
    pad_pair = ir.RankedTensorType.get((1, 2), ir.IntegerType.get_signless(64))
    pads = [hlo.reshape(pad_pair, shape_value(pair)) for pair in padding]
    pads = pads[0] if len(pads) == 1 else hlo.concatenate(pads, 0)
    shape_operands = [shape_value(v) for v in (window_dimensions, window_strides, base_dilation, window_dilation)]
    name = mctx.unique_symbol("dynamic_reduce_window_reducer")
    with ir.InsertionPoint(mctx.module.body):
        reducer = func.FuncOp(name, ir.FunctionType.get(scalars * 2, scalars))
        reducer.sym_visibility = ir.StringAttr.get("private")
        with ir.InsertionPoint(reducer.add_entry_block()):
            out = combine(*reducer.arguments)
            func.return_(list(out) if isinstance(out, (list, tuple)) else [out])
    op = hlo.CustomCallOp(list(result_types), [*operands, *inits, *shape_operands, pads],
                          call_target_name="stablehlo.dynamic_reduce_window",
                          called_computations=ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(name)]),
                          api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1))
    return list(op.results)


def bind_dimension_variables(in_avals, args) -> contextvars.Token:
    """At the entry of a polymorphic main: compute each dimension variable from an argument
    dimension that is that variable alone, emit the shape assertions, and make the values
    visible to ``dim_value`` (until ``_DIM_VALUES.reset(token)``)."""
    i64 = ir.RankedTensorType.get((), ir.IntegerType.get_signless(64))
    env: dict[str, ir.Value] = {}
    where: dict[str, str] = {}
    for i, (aval, arg) in enumerate(zip(in_avals, args)):
        for axis, d in enumerate(aval.shape):
            if type(d) is DimExpr and str(d) in d.free_vars() and str(d) not in env:
                env[str(d)] = hlo.convert(i64, hlo.get_dimension_size(arg, axis))
                where[str(d)] = f"args[{i}].shape[{axis}]"
    needed = set().union(*(d.free_vars() for a in in_avals for d in a.shape if type(d) is DimExpr))
    missing = sorted(needed - env.keys())
    if missing:
        raise NotImplementedError(
            f"dynamic lowering: dimension variable(s) {', '.join(missing)} appear in no argument "
            "dimension on their own (as in f32[b, 4]), so they cannot be read from the arguments' sizes")
    token = _DIM_VALUES.set(env)
    for name, value in env.items():
        _emit_assertion(_cmp(value, _i64(1), "GE"),
                        f"Input shapes do not match the polymorphic shapes specification. Expected value "
                        f">= 1 for dimension variable '{name}' (from {where[name]}), but found {{0}}.", value)
    scope = next((d.scope for a in in_avals for d in a.shape if type(d) is DimExpr), None)
    for text, lhs, op, rhs in parsed_constraints(scope) if scope is not None else ():
        left, right = dim_value(lhs), dim_value(rhs)
        _emit_assertion(_cmp(left, right, {">=": "GE", "<=": "LE", "==": "EQ"}[op]),
                        f"Input shapes do not match the symbolic shape constraint {text}. Expected "
                        f"'{lhs}' {op} '{rhs}', but found {{0}} and {{1}}.", left, right)
    for i, (aval, arg) in enumerate(zip(in_avals, args)):
        for axis, d in enumerate(aval.shape):
            if type(d) is DimExpr and where.get(str(d)) != f"args[{i}].shape[{axis}]":
                actual = hlo.convert(i64, hlo.get_dimension_size(arg, axis))
                _emit_assertion(_cmp(actual, dim_value(d), "EQ"),
                                f"Input shapes do not match the polymorphic shapes specification. Expected "
                                f"args[{i}].shape[{axis}] to be '{d}' = {{1}}, but found {{0}}.",
                                actual, dim_value(d))
    return token


def _emit_assertion(ok: ir.Value, message: str, *values: ir.Value) -> None:
    op = hlo.CustomCallOp([], [ok, *values], call_target_name="shape_assertion", has_side_effect=True,
                          api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2))
    op.attributes["error_message"] = ir.StringAttr.get(message)


def values() -> dict | None:
    """The values of the dimension variables where they are known (main's body, and the private
    functions it calls, which take them as arguments)."""
    return _DIM_VALUES.get()


def bind(env: dict) -> contextvars.Token:
    """Inside a private function taking the dimension variables: their values, its arguments."""
    return _DIM_VALUES.set(env)


def reset(token: contextvars.Token) -> None:
    _DIM_VALUES.reset(token)


def hide() -> contextvars.Token:
    """Inside a private function: the dimension values of main are out of reach."""
    return _DIM_VALUES.set(None)
