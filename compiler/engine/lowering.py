"""Lowering: a ClosedJaxpr becomes a StableHLO module, built with jaxlib's MLIR bindings.

Each lowering gets a fresh ``ir.Context`` (attributes such as constants are
uniqued in a context and live as long as it does). The module has one public
``main``; call-like primitives become private functions, emitted once per
structurally identical callee. Every equation's ops carry an MLIR location
``name(primitive)(file:line)`` from the equation's source info.

Rules live in one table, ``LOWERING_RULES[prim] = rule``, with per-platform
overrides registered by ``register_lowering(prim, rule, platform="cpu")``.
A rule has JAX's signature: ``rule(ctx, *operand_values, **params)``, where
``ctx.avals_in`` / ``ctx.avals_out`` are the equation's ShapedArrays, and
returns one ``ir.Value`` per result (a bare Value for a single result).
The built-in rules live with their primitives in the family modules of ``jaxprc.lax``.
"""
from __future__ import annotations

import contextvars
import io
import re
from enum import Enum
import warnings
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # before jaxlib.mlir loads libjax_common

from typing import Callable, Sequence

import numpy as np
from jaxlib import _jax
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo, func, sdy
from jaxlib.mlir.dialects import stablehlo as hlo

from .. import runtime
from ..ir import dtypes as dt
from ..ir.deep import deep_entry
from ..ir.dtypes import config
from ..passes.canonicalize import canonicalize
from ..ir.effects import has_ordered_effects
from ..ir.core import ClosedJaxpr, Jaxpr, Literal, PRIMITIVES, Primitive, ShapedArray
from ..ir.shape_poly import is_constant_shape
from . import dynamic_shapes

__all__ = ["lower_jaxpr", "Lowered", "LoweringRuleContext", "register_lowering", "has_lowering", "LOWERING_RULES",
           "PLATFORM_LOWERING_RULES", "aval_to_ir_type", "dtype_to_ir_type", "ir_constant"]

PLATFORMS = ("cpu", "cuda", "rocm")


def canonical_platform(platform: str) -> str:
    """The platform name rules are registered under ("gpu" is an alias of "cuda", as in JAX)."""
    return "cuda" if platform == "gpu" else platform

# prim -> rule used on every platform; platform -> {prim -> rule} overrides.
LOWERING_RULES: dict[Primitive, Callable] = {}
PLATFORM_LOWERING_RULES: dict[str, dict[Primitive, Callable]] = {p: {} for p in PLATFORMS}


def register_lowering(prim: Primitive, rule: Callable, platform: str | None = None) -> Callable:
    """Register ``rule`` as the lowering of ``prim`` (on every platform, or only on ``platform``)."""
    if platform is None:
        LOWERING_RULES[prim] = rule
    else:
        platform = canonical_platform(platform)
        if platform not in PLATFORM_LOWERING_RULES:
            raise ValueError(f"register_lowering: unknown platform {platform!r} for primitive "
                             f"'{prim.name}'; expected None or one of {PLATFORMS}")
        PLATFORM_LOWERING_RULES[platform][prim] = rule
    return rule


def find_lowering_rule(prim: Primitive, platform: str) -> Callable | None:
    """The rule lowering ``prim`` on ``platform`` (a platform override first), or None."""
    return PLATFORM_LOWERING_RULES.get(platform, {}).get(prim) or LOWERING_RULES.get(prim)


def has_lowering(prim: Primitive, platform: str = "cpu") -> bool:
    """Whether ``prim`` has a lowering rule on ``platform``."""
    return find_lowering_rule(prim, canonical_platform(platform)) is not None


def _rule_for(prim: Primitive, platform: str) -> Callable:
    rule = find_lowering_rule(prim, platform)
    if rule is None:
        raise NotImplementedError(
            f"MLIR lowering rule for primitive '{prim.name}' not found for platform {platform}: "
            f"register one with jaxprc.interpreters.mlir.register_lowering({prim.name}_p, rule"
            f"{'' if platform == 'cpu' else f', platform={platform!r}'}).")
    return rule


# ------------------------------------------------------------------ context

_REGISTRY = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(_REGISTRY)


def make_context() -> ir.Context:
    """A fresh MLIR context with func, stablehlo, chlo and sdy (Shardy) loaded (printed in pretty form)."""
    ctx = ir.Context()
    ctx.append_dialect_registry(_REGISTRY)
    ctx.dialects["func"]            # loads the dialect (the registry only makes it available)
    hlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    sdy.register_dialect(ctx)
    return ctx


# -------------------------------------------------------------------- types

_IR_ELEMENT_TYPES = {
    dt.bool_: lambda: ir.IntegerType.get_signless(1),
    dt.int8: lambda: ir.IntegerType.get_signless(8),
    dt.int16: lambda: ir.IntegerType.get_signless(16),
    dt.int32: lambda: ir.IntegerType.get_signless(32),
    dt.int64: lambda: ir.IntegerType.get_signless(64),
    dt.uint8: lambda: ir.IntegerType.get_unsigned(8),
    dt.uint16: lambda: ir.IntegerType.get_unsigned(16),
    dt.uint32: lambda: ir.IntegerType.get_unsigned(32),
    dt.uint64: lambda: ir.IntegerType.get_unsigned(64),
    dt.float16: ir.F16Type.get,
    dt.bfloat16: ir.BF16Type.get,
    dt.float32: ir.F32Type.get,
    dt.float64: ir.F64Type.get,
    dt.complex64: lambda: ir.ComplexType.get(ir.F32Type.get()),
    dt.complex128: lambda: ir.ComplexType.get(ir.F64Type.get()),
    dt.float0: lambda: ir.IntegerType.get_signless(1),   # float0 values are all-false booleans, as in JAX
    dt.token: lambda: ir.IntegerType.get_signless(1),    # (at a program's boundary: _emit_function)
    # float8_e4m3fn -> f8E4M3FN..., int4 -> i4, uint4 -> ui4
    **{d: getattr(ir, "Float" + d.name[5:].replace("_", "").upper() + "Type").get for d in dt.NARROW_FLOATS},
    **{d: (lambda b=int(d.name[3:]): ir.IntegerType.get_signless(b)) for d in dt.NARROW_INTS[1:]},
    **{d: (lambda b=int(d.name[4:]): ir.IntegerType.get_unsigned(b)) for d in dt.NARROW_UINTS[1:]},
}
# StableHLO's 1-bit integer is the boolean, and it has no unsigned one: int1/uint1 have no element type.
_NO_ELEMENT_TYPE = {d: f"StableHLO has no 1-bit integers but the boolean i1: use bool or {d.name[:-1]}8"
                    for d in (dt.NARROW_INTS[0], dt.NARROW_UINTS[0])}


def dtype_to_ir_type(dtype) -> ir.Type:
    """The MLIR element type of a numpy dtype (in the current context)."""
    try:
        return _IR_ELEMENT_TYPES[np.dtype(dtype)]()
    except KeyError:
        why = _NO_ELEMENT_TYPE.get(np.dtype(dtype))
        raise TypeError(f"lowering: dtype {np.dtype(dtype)} has no StableHLO element type"
                        + (f" ({why})" if why else "")) from None


def aval_to_ir_type(aval: ShapedArray) -> ir.Type:
    """The MLIR tensor type of a ShapedArray (``!stablehlo.token`` for a token)."""
    if aval.dtype == dt.token:
        return hlo.TokenType.get()
    if not is_constant_shape(aval.shape):       # (only a dynamic lowering gets here)
        return dynamic_shapes.dynamic_type(aval.shape, dtype_to_ir_type(aval.dtype))
    return ir.RankedTensorType.get(aval.shape, dtype_to_ir_type(aval.dtype))


def _boundary_type(aval: ShapedArray) -> ir.Type:
    """The type of a public function's argument or result: tokens travel as booleans (jaxlib
    moves no token values between executions), everything else as itself."""
    if not is_constant_shape(aval.shape):
        return dynamic_shapes.dynamic_type(aval.shape, dtype_to_ir_type(aval.dtype))
    return ir.RankedTensorType.get(aval.shape, dtype_to_ir_type(aval.dtype))


# ---------------------------------------------------------------- constants

# While a module is lowered: (block, attribute) -> the constant already emitted in that block.
# Attributes are uniqued by type and bits in the context, so equal constants share one op.
_CONSTANTS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("jaxprc_constants", default=None)
# While a module is lowered: ops a fold bypassed (in order, as dict keys), erased at the end
# if nothing else uses them.
_BYPASSED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("jaxprc_bypassed", default=None)


def constant(attr: ir.Attribute) -> ir.Value:
    """A ``stablehlo.constant`` of ``attr``, one per distinct value and type per block."""
    cache = _CONSTANTS.get()
    if cache is None:
        return hlo.constant(attr)
    ip = ir.InsertionPoint.current
    if ip.ref_operation is not None:      # inserting before an op: the cached one may come after it
        return hlo.constant(attr)
    key = (ip.block, attr)
    value = cache.get(key)
    if value is None:
        value = cache[key] = hlo.constant(attr)
    return value


def ir_constant(value, dtype=None) -> ir.Value:
    """A ``stablehlo.constant`` holding ``value`` (an array or scalar) with the given dtype."""
    x = np.asarray(value, dtype)
    if x.dtype == dt.float0:
        x = np.zeros(x.shape, dt.bool_)
        dtype = dt.float0
    shape = x.shape                      # before ascontiguousarray, which makes 0-d arrays 1-d
    attr = ir.DenseElementsAttr.get(np.ascontiguousarray(x), type=dtype_to_ir_type(dtype or x.dtype),
                                    shape=shape)
    return constant(attr)


def iota(aval: ShapedArray, dimension: int) -> ir.Value:
    """Counting along ``dimension`` in an array of ``aval``'s type (its sizes may be symbolic)."""
    if not is_constant_shape(aval.shape):
        return hlo.dynamic_iota(aval_to_ir_type(aval), dynamic_shapes.shape_value(aval.shape), dimension)
    return hlo.iota(aval_to_ir_type(aval), dimension)


def broadcast_to_aval(x: ir.Value, aval: ShapedArray, dims) -> ir.Value:
    """``x`` broadcast to ``aval``'s type, its axes at ``dims`` (the sizes may be symbolic)."""
    if not is_constant_shape(aval.shape):
        return hlo.dynamic_broadcast_in_dim(aval_to_ir_type(aval), x, dynamic_shapes.shape_value(aval.shape),
                                            list(dims))
    return broadcast_in_dim(aval_to_ir_type(aval), x, dims)


def full(shape, value, dtype) -> ir.Value:
    """A splat constant: ``value`` everywhere (no host buffer)."""
    dtype = np.dtype(dtype)
    elt = dtype_to_ir_type(dtype)
    if not is_constant_shape(shape):      # a scalar broadcast to sizes known when the module runs
        return hlo.dynamic_broadcast_in_dim(dynamic_shapes.dynamic_type(shape, elt), full((), value, dtype),
                                            dynamic_shapes.shape_value(shape), [])
    if dt.is_float(dtype):
        attr = ir.FloatAttr.get(elt, float(value))
    elif dt.is_complex(dtype):
        return ir_constant(np.full(shape, value, dtype), dtype)
    else:
        attr = ir.IntegerAttr.get(elt, int(value))
    return constant(ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get(tuple(shape), elt), attr))


def broadcast_in_dim(out_type: ir.RankedTensorType, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    """``stablehlo.broadcast_in_dim`` of ``x`` to ``out_type``, folded: a broadcast of a splat
    constant is a splat constant of ``out_type``; a broadcast of a broadcast is one broadcast
    of the inner operand (operand dim i lands at ``dims[inner_dims[i]]``). A splat constant is
    one op here; XLA's export turns it back into a scalar and a broadcast, never a big literal."""
    op = getattr(x.owner, "operation", None)        # None for a block argument
    name = op.name if op is not None else None
    # (complex dense attributes cannot be read back through the Python bindings)
    if name == "stablehlo.constant" and not isinstance(ir.RankedTensorType(x.type).element_type, ir.ComplexType):
        attr = op.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr) and attr.is_splat:
            _bypass(op)
            return constant(ir.DenseElementsAttr.get_splat(out_type, attr.get_splat_value()))
    elif name == "stablehlo.broadcast_in_dim":
        inner_dims = ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])
        _bypass(op)
        return hlo.broadcast_in_dim(out_type, op.operands[0], [dims[d] for d in inner_dims])
    return hlo.broadcast_in_dim(out_type, x, list(dims))


def _bypass(op) -> None:
    bypassed = _BYPASSED.get()
    if bypassed is not None:
        bypassed[op] = None


def _erase_unused(ops) -> None:
    """Erase the ops (latest first, so chains of them go) whose results nothing uses."""
    for op in reversed(list(ops)):
        if all(next(iter(r.uses), None) is None for r in op.results):
            op.erase()


# ------------------------------------------------- helpers for lowering rules

def param_name(x) -> str:
    """Enum params may be Enums, their names or (for rounding) ints."""
    return x.name if isinstance(x, Enum) else str(x)


def scalar_type(dtype) -> ir.RankedTensorType:
    return ir.RankedTensorType.get((), dtype_to_ir_type(dtype))


def compare_type(dtype) -> str:
    if dt.is_float(dtype) or dt.is_complex(dtype):
        return "FLOAT"
    return "SIGNED" if dt.is_signed(dtype) else "UNSIGNED"


def compare(a, b, direction: str, dtype, kind: str | None = None) -> ir.Value:
    """``stablehlo.compare`` of two ``dtype`` values; ``kind`` overrides the comparison type."""
    return hlo.compare(a, b, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get(kind or compare_type(dtype)))


def zeros(aval):
    return full(aval.shape, 0, aval.dtype)


def is_nan(x, dtype):
    return compare(x, x, "NE", dtype)


def max_min(kind: str, dtype):
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


def add_region(region, arg_types, body):
    """Fill a region with one block of scalar-tensor args whose terminator returns ``body(*args)``."""
    block = region.blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        out = body(*block.arguments)
        hlo.return_(list(out) if isinstance(out, (list, tuple)) else [out])


def reduce(operands, inits, axes, out_types, combine):
    op = hlo.ReduceOp(out_types, list(operands), list(inits), list(axes))
    scalars = [ir.RankedTensorType.get((), ir.RankedTensorType(v.type).element_type) for v in operands]
    add_region(op.body, scalars + scalars, combine)
    return list(op.results)


# ------------------------------------------------------------------ lowering

class ModuleContext:
    """State shared by the whole module: platform, private callees, used symbol names."""

    def __init__(self, module: ir.Module, platform: str):
        self.module = module
        self.platform = platform
        self.callees: dict = {}          # (callee, axis context) -> (symbol name, the callee kept alive)
        self.symbols: set[str] = {"main"}
        self._ir_types: dict = {}        # ShapedArray -> its MLIR type (types live in a context)
        self._locations: dict = {}       # (primitive, file, line, scope) -> MLIR location
        self._rules: dict = {}           # primitive -> its lowering rule on this platform
        self.host_callbacks: list = []   # Python functions the module calls, by index
        self.token: ir.Value | None = None   # the ordered-effects token at the insertion point
        self.devices: tuple | None = None    # ids of the devices a program over several runs on
        self.needs_shape_refinement = False  # a called module has dynamic shapes (call_exported)
        self.dynamic = False                 # symbolic dimensions lower to dynamic sizes (export)

    def ir_type(self, aval: ShapedArray) -> ir.Type:
        t = self._ir_types.get(aval)
        if t is None:
            t = self._ir_types[aval] = aval_to_ir_type(aval)
        return t

    def location(self, eqn) -> ir.Location:
        # Keyed by what the location says, not by the SourceInfo object (one per equation):
        # the equations of a loop body share their locations.
        si = eqn.source_info
        key = (eqn.primitive, None) if si is None else (eqn.primitive, si.file, si.line, si.column, si.scope)
        loc = self._locations.get(key)
        if loc is None:
            loc = self._locations[key] = _location(eqn)
        return loc

    def rule(self, prim: Primitive) -> Callable:
        rule = self._rules.get(prim)
        if rule is None:
            rule = self._rules[prim] = _rule_for(prim, self.platform)
        return rule

    def unique_symbol(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "fn"
        name, k = base, 0
        while name in self.symbols:
            k += 1
            name = f"{base}_{k}"
        self.symbols.add(name)
        return name


class LoweringRuleContext:
    """What a lowering rule sees besides its operands: types, platform, sub-jaxpr helpers."""

    __slots__ = ("module_context", "primitive", "avals_in", "avals_out")

    def __init__(self, module_context: ModuleContext, primitive: Primitive | None,
                 avals_in: Sequence[ShapedArray], avals_out: Sequence[ShapedArray]):
        self.module_context = module_context
        self.primitive = primitive
        self.avals_in = avals_in if type(avals_in) is list else list(avals_in)
        self.avals_out = avals_out if type(avals_out) is list else list(avals_out)

    @property
    def platform(self) -> str:
        return self.module_context.platform

    def add_host_callback(self, fn) -> int:
        """Register a Python function the module calls; its index for the custom call."""
        self.module_context.host_callbacks.append(fn)
        return len(self.module_context.host_callbacks) - 1

    # Ordered effects run in program order: each ordered op takes the token the previous one
    # produced. Rules of ops holding regions (loops, conditionals) thread it through them.
    def get_token(self) -> ir.Value:
        """The current ordered-effects token (created at the first use)."""
        mctx = self.module_context
        if mctx.token is None:
            mctx.token = hlo.create_token()
        return mctx.token

    def set_token(self, token: ir.Value) -> None:
        self.module_context.token = token

    def lower_jaxpr(self, closed_jaxpr: ClosedJaxpr | Jaxpr, *args: ir.Value) -> list[ir.Value]:
        """Inline a sub-jaxpr at the current insertion point; returns its results."""
        return lower_closed_jaxpr_inline(self.module_context, closed_jaxpr, args)

    def call(self, closed_jaxpr: ClosedJaxpr | Jaxpr, args: Sequence[ir.Value], name: str) -> list[ir.Value]:
        """Call a sub-jaxpr emitted as a private function (identical callees emitted once)."""
        return call_jaxpr(self.module_context, closed_jaxpr, args, name)


def lower_closed_jaxpr_inline(mctx: ModuleContext, cj: ClosedJaxpr | Jaxpr, args) -> list[ir.Value]:
    """Emit ``cj``'s ops at the current insertion point, its consts as constants; returns its results."""
    if isinstance(cj, Jaxpr):
        cj = ClosedJaxpr(cj, [])
    consts = [ir_constant(c, v.aval.dtype) for v, c in zip(cj.jaxpr.constvars, cj.consts)]
    return jaxpr_subcomp(mctx, cj.jaxpr, consts, list(args))


def _emit_function(mctx: ModuleContext, symbol: str, cj: ClosedJaxpr, visibility: str,
                   arg_attrs: list[dict] | None = None, runtime_token: bool = False,
                   effect_tokens: int = 0, dim_vars: Sequence[str] = ()) -> None:
    """Append ``func.func @symbol`` computing ``cj`` to the module. With ``runtime_token`` it
    takes and returns a leading ``bool[0]`` array (RUNTIME_TOKEN): the runtime passes each
    execution the one the previous execution with ordered effects returned, so XLA starts it
    only when that one is done. With ``effect_tokens`` (an exported module's calling convention,
    one per ordered effect) it takes and returns that many leading ``!stablehlo.token``s marked
    ``jax.token``: the ordered effects start after all of them, and every returned token
    follows them all. With ``dim_vars`` (a private function of a polymorphic module) it takes
    the values of those dimension variables first (``tensor<i64>``, marked
    ``jax.global_constant`` as in JAX's modules)."""
    public = visibility == "public"
    to_type = _boundary_type if public else aval_to_ir_type
    in_types, out_types = [to_type(a) for a in cj.in_avals], [to_type(a) for a in cj.out_avals]
    lead, token_type, result_attrs = 0, None, None
    if runtime_token:
        lead, token_type = 1, aval_to_ir_type(RUNTIME_TOKEN)
        arg_attrs = None if arg_attrs is None else [{}] + arg_attrs
    elif effect_tokens:
        lead, token_type = effect_tokens, hlo.TokenType.get()
        marked = {"jax.token": ir.BoolAttr.get(True)}
        result_attrs = [marked] * lead + [{}] * len(out_types)
        arg_attrs = [marked] * lead + (arg_attrs or [{}] * len(in_types))
    in_types, out_types = [token_type] * lead + in_types, [token_type] * lead + out_types
    if dim_vars:
        lead, i64 = len(dim_vars), ir.RankedTensorType.get((), ir.IntegerType.get_signless(64))
        in_types = [i64] * lead + in_types
        arg_attrs = ([{"jax.global_constant": ir.StringAttr.get(v)} for v in dim_vars]
                     + (arg_attrs or [{}] * len(cj.in_avals)))
    with ir.InsertionPoint(mctx.module.body), ir.Location.unknown():
        fn = func.FuncOp(symbol, ir.FunctionType.get(in_types, out_types))
        fn.sym_visibility = ir.StringAttr.get(visibility)
        if arg_attrs is not None:
            fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in arg_attrs])
        if result_attrs is not None:
            fn.result_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in result_attrs])
        with ir.InsertionPoint(fn.add_entry_block()):
            args = list(fn.arguments)
            if effect_tokens:
                tokens = args[:lead]
                mctx.token = tokens[0] if lead == 1 else hlo.after_all(tokens)
            args = args[lead:]
            if public:                  # tokens in: fresh ones; tokens out: booleans
                args = [hlo.create_token() if a.dtype == dt.token else v for a, v in zip(cj.in_avals, args)]
            # dimension variables: computed at main's entry, passed to the private functions it calls
            if dim_vars:
                dims = dynamic_shapes.bind(dict(zip(dim_vars, fn.arguments[:lead])))
            elif public and mctx.dynamic:
                dims = dynamic_shapes.bind_dimension_variables(cj.in_avals, args)
            else:
                dims = dynamic_shapes.hide() if dynamic_shapes.has_dynamic_values() else None
            try:
                outs = lower_closed_jaxpr_inline(mctx, cj, args)
            finally:
                if dims is not None:
                    dynamic_shapes.reset(dims)
            if public:
                outs = [full((), False, dt.bool_) if a.dtype == dt.token else v for a, v in zip(cj.out_avals, outs)]
            if runtime_token:
                outs = [full((0,), False, dt.bool_)] + outs
            elif effect_tokens:
                outs = [mctx.token] * lead + outs
            func.return_(outs)


# The array standing for a runtime token: the first argument and result of a module with
# ordered effects (jaxlib moves no token values between executions; an empty array it does).
RUNTIME_TOKEN = ShapedArray((0,), dt.bool_)


def call_jaxpr(mctx: ModuleContext, cj: ClosedJaxpr | Jaxpr, args, name: str) -> list[ir.Value]:
    """A ``func.call`` of ``cj`` emitted as a private function; structurally equal callees
    (``ClosedJaxpr.__eq__``/``__hash__``) share one function."""
    if isinstance(cj, Jaxpr):
        cj = ClosedJaxpr(cj, [])
    out_types = [aval_to_ir_type(a) for a in cj.out_avals]
    dim_vars, dim_values = dimension_arguments()
    symbol = function_symbol(mctx, cj, name, dim_vars)
    call = func.CallOp(out_types, ir.FlatSymbolRefAttr.get(symbol), [*dim_values, *args])
    return list(call.results)


def dimension_arguments() -> tuple[tuple[str, ...], list[ir.Value]]:
    """The dimension variables a private function called from here takes first, and their values:
    none outside a polymorphic module, else all of them (sorted), so callees need not know which."""
    dims = dynamic_shapes.values()
    dim_vars = tuple(sorted(dims)) if dims else ()
    return dim_vars, [dims[v] for v in dim_vars]


def function_symbol(mctx: ModuleContext, cj: ClosedJaxpr, name: str, dim_vars: tuple = ()) -> str:
    """The symbol of the private function computing ``cj`` (emitted on first use), taking the
    values of ``dim_vars`` first. Inside and outside shard_map bodies one jaxpr lowers
    differently (collectives, host callbacks' shardings)."""
    key = (cj, getattr(mctx, "axis_env", None), getattr(mctx, "manual_axes", None), dim_vars)
    entry = mctx.callees.get(key)
    if entry is None:
        symbol = mctx.unique_symbol(name)
        _emit_function(mctx, symbol, cj, "private", dim_vars=dim_vars)
        entry = mctx.callees[key] = (symbol, cj)
    return entry[0]


def _location(eqn) -> ir.Location:
    si = eqn.source_info
    name = eqn.primitive.name
    if si is not None and si.scope:          # named_scope: "outer/inner/prim", as in JAX's op names
        name = f"{si.scope}/{name}"
    if si is None or not si.file:
        return ir.Location.name(name)
    return ir.Location.name(name, childLoc=ir.Location.file(si.file, int(si.line), int(si.column)))


def jaxpr_subcomp(mctx: ModuleContext, jaxpr: Jaxpr, consts: Sequence[ir.Value],
                  args: Sequence[ir.Value]) -> list[ir.Value]:
    """Emit the ops of ``jaxpr`` at the current insertion point, given values for its vars."""
    env: dict = {}

    def read(atom):
        if type(atom) is Literal:
            return ir_constant(atom.val, atom.aval.dtype)
        return env[atom]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    typed_rules = _RESULT_TYPED_RULES
    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        rule = mctx.rule(prim)
        outvars = eqn.outvars
        avals_out = [v.aval for v in outvars]
        rctx = LoweringRuleContext(mctx, prim, [a.aval for a in eqn.invars], avals_out)
        with mctx.location(eqn):
            try:
                outs = rule(rctx, *map(read, eqn.invars), **eqn.params)
            except (TypeError, ValueError, ir.MLIRError) as e:
                if not mctx.dynamic:
                    raise
                raise NotImplementedError(
                    f"{prim.name} on {', '.join(a.str_short() for a in rctx.avals_in) or 'no operands'} "
                    f"does not lower with dynamic shapes yet ({type(e).__name__}: {str(e).splitlines()[0]})") from e
        if rule in typed_rules:
            outs = [outs]
        else:
            outs = _check_rule_results(mctx, eqn, outs, avals_out)
        if mctx.devices and not getattr(mctx, "manual_axes", None) and any(
                type(a) is ShapedArray and a.sharding_in_type is not None for a in avals_out):
            outs = _annotate_shardings(outs, avals_out)
        env.update(zip(outvars, outs))
    return [read(a) for a in jaxpr.outvars]


def _annotate_shardings(values, avals) -> list:
    """Results whose types name a sharding, constrained to it for Shardy (as JAX annotates
    values of Explicit axes)."""
    from ..lax.sharding_constraint import sdy_type_sharding
    return [v if type(a) is not ShapedArray or a.sharding_in_type is None
            else sdy.sharding_constraint(v, sdy_type_sharding(a)) for v, a in zip(values, avals)]


# Rules made by ``result_typed_op``: one result, created with the equation's output type.
_RESULT_TYPED_RULES: set = set()


def result_typed_op(op_name: str, attributes: Callable | None = None) -> Callable:
    """The lowering rule emitting the op ``op_name`` (``"stablehlo.add"``) on the operands, with
    one result of the equation's output type (and the attributes ``attributes(**params)`` gives,
    if any). Created with that type known, the op needs no type inference nor a Python op class
    (the generated builders ``hlo.add`` do both, at several times the cost), and its result no
    type check."""
    def rule(ctx: LoweringRuleContext, *operands, **params):
        result_type = ctx.module_context.ir_type(ctx.avals_out[0])
        return ir.Operation.create(op_name, results=[result_type], operands=operands,
                                   attributes=attributes(**params) if attributes else None).result
    _RESULT_TYPED_RULES.add(rule)
    return rule


def _check_rule_results(mctx: ModuleContext, eqn, outs, avals_out) -> list[ir.Value]:
    prim = eqn.primitive
    if isinstance(outs, (ir.Value, ir.OpResult)):
        outs = [outs]
    elif isinstance(outs, (ir.OpView, ir.Operation)):
        outs = list(outs.results)
    else:
        outs = list(outs)
    if len(outs) == len(avals_out) and all(v.type == mctx.ir_type(a) for v, a in zip(outs, avals_out)):
        return outs
    where = f" (at {eqn.source_info})" if eqn.source_info else ""
    if len(outs) != len(avals_out):
        raise TypeError(f"The lowering rule of '{prim.name}'{where} returned {len(outs)} value(s), "
                        f"expected {len(avals_out)} of types "
                        f"({', '.join(a.str_short() for a in avals_out)}).")
    for i, (v, a) in enumerate(zip(outs, avals_out)):
        want = aval_to_ir_type(a)
        if v.type != want:
            raise TypeError(f"The lowering rule of '{prim.name}'{where} returned result {i} of MLIR "
                            f"type {v.type}, expected {want} (the primitive's type {a.str_short()}).")
    return outs


# ------------------------------------------------------------------ entry

class Lowered:
    """A lowered program: the MLIR module (public ``main``) plus its signature."""

    def __init__(self, module: ir.Module, context: ir.Context, name: str, in_avals, out_avals,
                 donated_invars, platform: str, host_callbacks=(), runtime_token: bool = False):
        self.host_callbacks = list(host_callbacks)   # passed to the compiler with the module
        self.runtime_token = runtime_token           # ordered effects: main takes and returns one
        self.module = module
        self.context = context
        self.name = name
        self.in_avals = list(in_avals)
        self.out_avals = list(out_avals)
        self.donated_invars = tuple(donated_invars)
        self.platform = platform

    def as_text(self, debug_info: bool = False) -> str:
        """StableHLO text; ``debug_info=True`` adds the ``loc(...)`` source locations."""
        with self.context:
            return self.module.operation.get_asm(enable_debug_info=debug_info)

    def as_bytecode(self) -> bytes:
        """MLIR bytecode (keeps locations; much faster than text for large constants)."""
        buf = io.BytesIO()
        with self.context:
            self.module.operation.write_bytecode(buf)
        return buf.getvalue()

    def __str__(self):
        return self.as_text()


def match_donations(in_avals, out_avals, donated_invars) -> list:
    """For each input, the output (index) whose buffer a donated input becomes, or None: each
    donated input takes the first unmatched output of its shape and dtype. A warning names the
    donated inputs no output can reuse (they stay alive, as in JAX)."""
    free = list(range(len(out_avals)))
    matches, unused = [], []
    for aval, donated in zip(in_avals, list(donated_invars) + [False] * len(in_avals)):
        match = None
        if donated:
            match = next((k for k in free if out_avals[k].shape == aval.shape
                          and out_avals[k].dtype == aval.dtype), None)
            if match is not None:
                free.remove(match)
            else:
                unused.append(aval.str_short())
        matches.append(match)
    if unused:
        warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)}. No output has the "
                      "shape and dtype of these donated inputs, so they were not donated (and stay "
                      "valid).", stacklevel=3)
    return matches


def _donation_attrs(in_avals, out_avals, donated_invars, first_output: int = 0) -> list[dict]:
    """``tf.aliasing_output = k`` for each donated input matched to an output (``match_donations``;
    outputs of ``main`` numbered from ``first_output``: 1 after a runtime token)."""
    i32 = ir.IntegerType.get_signless(32)
    return [{} if k is None else {"tf.aliasing_output": ir.IntegerAttr.get(i32, first_output + k)}
            for k in match_donations(in_avals, out_avals, donated_invars)]


@deep_entry
def lower_jaxpr(closed_jaxpr: ClosedJaxpr, *, name: str = "main", donated_invars: Sequence[bool] = (),
                platform: str = "cpu", devices: Sequence[int] | None = None,
                dynamic: bool = False, effect_tokens: int | None = None) -> Lowered:
    """Lower a ClosedJaxpr to a StableHLO module named ``name`` whose public entry is ``main``;
    ``devices``: the ids of the devices it is partitioned over (None: one device);
    ``dynamic``: symbolic dimensions become dynamic sizes (``engine.dynamic_shapes``)
    instead of an error; ``effect_tokens`` (export's calling convention): ``main`` takes and
    returns that many ``!stablehlo.token``s first, instead of the runtime token that jit's
    modules with ordered effects take."""
    if config.jaxprc_canonicalize:
        closed_jaxpr = canonicalize(closed_jaxpr)
    with runtime.monitoring.elapsed(runtime.monitoring.JAXPR_TO_MLIR_MODULE_EVENT, name):
        return _lower_jaxpr(closed_jaxpr, name, donated_invars, canonical_platform(platform), devices, dynamic,
                            effect_tokens)


def _refine_shapes(module: ir.Module, name: str) -> ir.Module:
    """The module with every dynamic shape made static from ``main``'s static argument types
    (jaxlib's pass, as JAX runs it before compiling a call of a polymorphic Exported); it
    checks the called modules' shape assertions, whose failures become ValueErrors."""
    _composites_to_calls(module)
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    try:
        refined = _jax.mlir.refine_polymorphic_shapes(buf.getvalue())
    except Exception as e:           # jaxlib raises its own error types for failed assertions
        first = re.search(r"error: (?:loc\(.*?\)+: )?(.+)", str(e))     # the assertion's own message
        raise ValueError(f"Lowering '{name}': shape refinement of a called module failed: "
                         f"{first.group(1) if first else e}") from None
    return ir.Module.parse(refined)


def _composites_to_calls(module: ir.Module) -> None:
    """Each ``stablehlo.composite`` replaced by a ``func.call`` of its decomposition: jaxlib's shape
    refinement specialises called functions but not decompositions, whose argument types would then
    disagree with the composite's refined operands. The module is being compiled, not shown, so the
    composite's name is of no further use (XLA inlines decompositions anyway)."""
    composites = []

    def collect(op):
        if op.name == "stablehlo.composite":
            composites.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for op in composites:
        with ir.InsertionPoint(op), op.location:
            call = func.CallOp([r.type for r in op.results], op.attributes["decomposition"], list(op.operands))
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()


def _lower_jaxpr(closed_jaxpr: ClosedJaxpr, name: str, donated_invars, platform: str, devices,
                 dynamic: bool = False, effect_tokens: int | None = None) -> Lowered:
    in_avals, out_avals = closed_jaxpr.in_avals, closed_jaxpr.out_avals
    polymorphic = not all(is_constant_shape(a.shape) for a in (*in_avals, *out_avals))
    if polymorphic and not dynamic:
        raise NotImplementedError(
            f"lowering '{name}': its types have symbolic dimensions ({', '.join(a.str_short() for a in in_avals)}), "
            "and jaxprc does not emit dynamic StableHLO yet. Run it specialised to concrete sizes: "
            "jaxprc.jaxpr_as_fun(program) or jaxprc.export.export(jit(f))(*specs).call(*arrays).")
    context = make_context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        i32 = ir.IntegerType.get_signless(32)     # as JAX's modules say (spmd.py sets several partitions)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, 1)
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
        mctx = ModuleContext(module, platform)
        mctx.devices = None if devices is None else tuple(devices)
        mctx.dynamic = polymorphic
        runtime_token = effect_tokens is None and has_ordered_effects(closed_jaxpr)
        first_output = int(runtime_token) if effect_tokens is None else effect_tokens
        arg_attrs = (_donation_attrs(in_avals, out_avals, donated_invars, first_output)
                     if any(donated_invars) else None)
        constants, bypassed = _CONSTANTS.set({}), _BYPASSED.set({})
        try:
            _emit_function(mctx, "main", closed_jaxpr, "public", arg_attrs, runtime_token, effect_tokens or 0)
            _erase_unused(_BYPASSED.get())
        finally:
            _CONSTANTS.reset(constants)
            _BYPASSED.reset(bypassed)
        try:
            module.operation.verify()
        except ir.MLIRError as e:
            raise RuntimeError(f"Lowering '{name}' produced an invalid StableHLO module: {e}") from None
        if mctx.needs_shape_refinement:
            module = _refine_shapes(module, name)
    return Lowered(module, context, name, in_avals, out_avals, donated_invars, platform,
                   mctx.host_callbacks, runtime_token)


