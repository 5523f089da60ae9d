"""``jaxprc.export``: JAX's ``jax.export`` API over jaxprc programs.

``export(jit(f))(*arg_specs)`` traces ``f`` once for argument specs whose
shapes may hold symbolic dimensions (``symbolic_shape("b, 784")``) and gives an
``Exported``: the program with its calling convention (input and output pytrees
and types). ``Exported.call`` runs it on arrays of any sizes that satisfy the
dimension variables' constraints, specialising the program to those sizes
(``passes.specialize``) and compiling once per set of sizes.

``serialize(vjp_order=)`` / ``deserialize`` use JAX's bytes
(``export_serialization``): an artifact written by JAX is called here through
its StableHLO module (``lax.exported_call``; dynamic shapes are refined to the
arguments' at compile time), and one written here is called by JAX. A
deserialized Exported is differentiable through the vjps it was serialized with.

The module of a polymorphic program has dynamic sizes (``engine.dynamic_shapes``);
one for several platforms dispatches on a leading platform-index argument.

Effects follow JAX's calling convention: each ordered effect of the program is
a ``!stablehlo.token`` argument and result of ``main`` (before the arrays,
after the platform index), unordered ones change nothing; both are listed in
``ordered_effects`` / ``unordered_effects`` and serialized by their class's
name. As in JAX, ``export`` lowers at once and refuses what cannot be
serialized: host callbacks (``NotImplementedError``) and custom calls whose
targets have no compatibility guarantee (``ValueError``, unless
``DisabledSafetyCheck.custom_call(target)`` allows one).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import export_serialization, passes
from .api import ShapeDtypeStruct, default_backend, jaxpr_as_fun, jit
from .engine import dispatch
from .runtime import lapack
from .ir import dtypes as dt
from .export_serialization import (DisabledSafetyCheck, register_namedtuple_serialization,
                                   register_pytree_node_serialization)
from .ir.core import ClosedJaxpr
from .ir.effects import jaxpr_effects
from .ir.shape_poly import (InconclusiveDimensionOperation, SymbolicScope, is_symbolic_dim, split_top_level,
                             symbolic_shape)
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform", "deserialize",
           "export", "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]


def default_export_platform() -> str:
    return default_backend()


# The calling convention of the modules this writes and the range it calls (JAX 0.10.2's).
minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
_CALLING_CONVENTION_VERSION = 10


class Exported:
    """A function with its calling convention (JAX's ``jax.export.Exported``): input and
    output pytrees and types, platforms, and the program, either as a jaxpr (traced here by
    ``export``) or as a StableHLO module only (``deserialize``: from JAX or from jaxprc)."""

    def __init__(self, fun_name: str, jaxpr: ClosedJaxpr | None, in_tree, out_tree, platforms, *,
                 in_avals=None, out_avals=None, nr_devices: int = 1, disabled_safety_checks=(),
                 mlir_module_serialized: bytes | None = None,
                 calling_convention_version: int = _CALLING_CONVENTION_VERSION,
                 module_kept_var_idx=None, uses_global_constants: bool | None = None, vjp=None,
                 ordered_effects=(), unordered_effects=()):
        self.fun_name = fun_name
        self.jaxpr = jaxpr
        self.in_tree, self.out_tree = in_tree, out_tree
        self.in_avals = tuple(jaxpr.in_avals if in_avals is None else in_avals)
        self.out_avals = tuple(jaxpr.out_avals if out_avals is None else out_avals)
        self.platforms = tuple(platforms)
        self.nr_devices = nr_devices
        self.ordered_effects, self.unordered_effects = tuple(ordered_effects), tuple(unordered_effects)
        self.disabled_safety_checks = tuple(disabled_safety_checks)
        self.calling_convention_version = calling_convention_version
        self.module_kept_var_idx = tuple(range(len(self.in_avals)) if module_kept_var_idx is None
                                         else module_kept_var_idx)
        self.uses_global_constants = (any(map(is_polymorphic_aval, self.in_avals))
                                      if uses_global_constants is None else uses_global_constants)
        self._mlir_module_serialized = mlir_module_serialized
        self._module_text: str | None = None    # of a traced Exported (export lowers at once)
        self._vjp = vjp                  # a thunk giving the vjp's Exported (deserialized ones)
        self._run = None

    @classmethod
    def from_module(cls, *, fun_name, in_tree, in_avals, out_tree, out_avals, nr_devices, platforms,
                    disabled_safety_checks, mlir_module_serialized, calling_convention_version,
                    module_kept_var_idx, uses_global_constants, vjp, ordered_effects=(),
                    unordered_effects=()) -> Exported:
        """An Exported of a serialized module (what ``deserialize`` reads)."""
        if not (minimum_supported_calling_convention_version <= calling_convention_version
                <= maximum_supported_calling_convention_version):
            raise ValueError(
                f"The exported function '{fun_name}' uses an invalid calling convention version "
                f"{calling_convention_version}. Supported versions are "
                f"{minimum_supported_calling_convention_version}..{maximum_supported_calling_convention_version}.")
        if nr_devices != 1:
            raise NotImplementedError(f"Exported '{fun_name}' was exported for {nr_devices} devices; "
                                      "jaxprc calls modules exported for one device")
        return cls(fun_name, None, in_tree, out_tree, platforms, in_avals=in_avals, out_avals=out_avals,
                   nr_devices=nr_devices, disabled_safety_checks=disabled_safety_checks,
                   mlir_module_serialized=mlir_module_serialized,
                   calling_convention_version=calling_convention_version,
                   module_kept_var_idx=module_kept_var_idx, uses_global_constants=uses_global_constants,
                   vjp=vjp, ordered_effects=ordered_effects, unordered_effects=unordered_effects)

    def __str__(self):
        return f"Exported(fun_name={self.fun_name}, in_avals={self.in_avals}, out_avals={self.out_avals})"

    __repr__ = __str__

    in_shardings_hlo = property(lambda self: (None,) * len(self.in_avals))
    out_shardings_hlo = property(lambda self: (None,) * len(self.out_avals))

    @property
    def mlir_module_serialized(self) -> bytes:
        """The module as a StableHLO portable artifact (JAX's calling convention: a public
        ``main`` taking the kept array arguments)."""
        if self._mlir_module_serialized is None:
            self._mlir_module_serialized = _portable_artifact(self)
        return self._mlir_module_serialized

    def mlir_module(self) -> str:
        """The StableHLO text of the module."""
        from jaxlib import _jax
        from jaxlib.mlir import ir
        from .engine.lowering import make_context
        with make_context() as context:
            if self._module_text is not None:
                return str(ir.Module.parse(self._module_text))
            return str(_jax.mlir.deserialize_portable_artifact(self.mlir_module_serialized, context))

    def has_vjp(self) -> bool:
        return self.jaxpr is not None or self._vjp is not None

    def vjp(self) -> Exported:
        """The Exported of the vjp: it takes the primal arguments and the cotangents of the
        results (flat), and gives the cotangents of the arguments (flat)."""
        if self.jaxpr is not None:
            return _export_vjp(self)
        if self._vjp is None:
            raise ValueError(f"No VJP is available for the exported function '{self.fun_name}': it was "
                             "serialized with a vjp_order smaller than the order of differentiation.")
        return self._vjp()

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """JAX's serialized form (flatbuffers), with the vjps up to ``vjp_order``."""
        return export_serialization.serialize(self, vjp_order)

    def call(self, *args, **kwargs):
        """Run the exported function on arguments of its pytree structure and types; sizes of
        symbolic dimensions come from the arguments (checked against the constraints)."""
        here = default_backend()
        if here not in self.platforms and DisabledSafetyCheck.platform() not in self.disabled_safety_checks:
            raise ValueError(f"Function '{self.fun_name}' was exported for platforms {self.platforms} "
                             f"but it is used on '{here}'.")
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise ValueError(f"Exported '{self.fun_name}' called with arguments of pytree structure "
                             f"{tree}, but it was exported for {self.in_tree}.")
        for i, (x, aval) in enumerate(zip(leaves, self.in_avals)):
            dtype = getattr(x, "dtype", None)
            if dtype is not None and dtype != aval.dtype:
                raise TypeError(f"Exported '{self.fun_name}': argument {i} has dtype {dtype}, but it was "
                                f"exported for {aval.str_short()}.")
        if self._run is None:
            self._run = jit(jaxpr_as_fun(self.jaxpr)) if self.jaxpr is not None else _module_caller(self)
        return tree_unflatten(self.out_tree, self._run(*leaves))


def is_polymorphic_aval(aval) -> bool:
    return any(is_symbolic_dim(d) for d in aval.shape)


def _lower_for_platform(exp: Exported, platform: str):
    """The module of a traced Exported for one platform; symbolic dimensions become dynamic sizes."""
    try:
        lowered = dispatch.lower_jaxpr(exp.jaxpr, name=f"jit_{exp.fun_name}", platform=platform, dynamic=True,
                                       effect_tokens=len(exp.ordered_effects))
    except (InconclusiveDimensionOperation, NotImplementedError) as e:
        raise NotImplementedError(f"Exported '{exp.fun_name}': its symbolic dimensions do not lower to "
                                  f"dynamic StableHLO: {e}") from None
    if lowered.host_callbacks:       # JAX's words: the module would call Python functions of this process
        raise NotImplementedError("serialization of host_callbacks is not yet implemented")
    return lowered


# Custom call targets whose compatibility JAX guarantees (those jaxprc emits): a module with any
# other target is refused unless a DisabledSafetyCheck.custom_call allows it.
_STABLE_CUSTOM_CALL_TARGETS = {
    *(lapack.target(routine, dtype)
      for routine in ("potrf", "geqrf", "orgqr", "syevd", "geev", "gesdd", "getrf", "sytrd", "gehrd", "gees",
                      "trsm", "gtsv")
      for dtype in (np.float32, np.float64, np.complex64, np.complex128)),
    "shape_assertion", "stablehlo.dynamic_reduce_window", "stablehlo.dynamic_rng_bit_generator",
    "stablehlo.dynamic_top_k",
}


def _check_custom_calls(exp: Exported, module) -> None:
    """Refuse, as JAX does, custom calls whose targets may change meaning in a later jaxlib."""
    allowed = _STABLE_CUSTOM_CALL_TARGETS | {c.is_custom_call() for c in exp.disabled_safety_checks}
    if "ALL" in allowed:
        return
    from jaxlib.mlir import ir
    bad = []

    def walk(op):
        if op.name == "stablehlo.custom_call":
            if ir.StringAttr(op.attributes["call_target_name"]).value not in allowed:
                bad.append(f"{op} at {op.location}")
        for region in op.regions:
            for block in region:
                for inner in block:
                    walk(inner.operation)

    walk(module.operation)
    if bad:
        raise ValueError("Cannot serialize code with custom calls whose targets have no compatibility "
                         "guarantees. See https://docs.jax.dev/en/latest/export/export.html"
                         "#compatibility-guarantees-for-custom-calls. Examples are:\n"
                         + "\n".join(bad) + ".\n")


def _module_text(exp: Exported) -> str:
    """The StableHLO module (with its source locations) of a traced Exported in JAX's calling
    convention: for several platforms, ``main`` takes the platform's index first and calls that
    platform's lowering; then its effect tokens, then the arrays."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func, stablehlo as hlo
    from .engine.lowering import make_context
    lowereds = [_lower_for_platform(exp, p) for p in exp.platforms]
    context = make_context()
    with context, ir.Location.unknown():
        if len(lowereds) == 1:
            module = ir.Module.parse(lowereds[0].as_text(debug_info=True))
        else:
            module = ir.Module.parse(lowereds[0].as_text(debug_info=True))
            for op in list(module.body.operations):
                op.erase()
            callees = [_merge_functions(module, ir.Module.parse(l.as_text(debug_info=True)), p)
                       for l, p in zip(lowereds, exp.platforms)]
            first = ir.SymbolTable(module.operation)[callees[0]]
            callee_type = ir.FunctionType(ir.TypeAttr(first.attributes["function_type"]).value)
            i32 = ir.RankedTensorType.get((), ir.IntegerType.get_signless(32))
            with ir.InsertionPoint(module.body):
                main = func.FuncOp("main", ir.FunctionType.get([i32, *callee_type.inputs], callee_type.results))
                main.sym_visibility = ir.StringAttr.get("public")
                # the callees' argument and result attributes (effect tokens: jax.token) stay on main's
                callee_arg_attrs = (list(ir.ArrayAttr(first.attributes["arg_attrs"]))
                                    if "arg_attrs" in first.attributes else [ir.DictAttr.get({})] * len(callee_type.inputs))
                main.arg_attrs = ir.ArrayAttr.get(
                    [ir.DictAttr.get({"jax.global_constant": ir.StringAttr.get("_platform_index")})]
                    + callee_arg_attrs)
                if "res_attrs" in first.attributes:
                    main.result_attrs = first.attributes["res_attrs"]
                with ir.InsertionPoint(main.add_entry_block()):
                    index, *args = main.arguments
                    case = hlo.CaseOp(list(callee_type.results), index, len(callees))
                    for region, callee in zip(case.branches, callees):
                        with ir.InsertionPoint(region.blocks.append()):
                            hlo.return_(list(func.CallOp(list(callee_type.results),
                                                         ir.FlatSymbolRefAttr.get(callee), args).results))
                    func.return_(list(case.results))
        module.operation.attributes["jax.uses_shape_polymorphism"] = ir.BoolAttr.get(
            passes.is_polymorphic(exp.jaxpr))
        module.operation.verify()
        _check_custom_calls(exp, module)
        return module.operation.get_asm(enable_debug_info=True)


def _merge_functions(module, other, prefix: str) -> str:
    """Move ``other``'s functions into ``module``, private and renamed ``prefix_name``; the
    symbol of its ``main``."""
    from jaxlib.mlir import ir
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in other.body.operations]
    for name in names:
        ir.SymbolTable.replace_all_symbol_uses(name, f"{prefix}_{name}", other.operation)
    for op in list(other.body.operations):
        op.attributes["sym_name"] = ir.StringAttr.get(f"{prefix}_{ir.StringAttr(op.attributes['sym_name']).value}")
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        module.body.append(op)
    return f"{prefix}_main"


def _portable_artifact(exp: Exported) -> bytes:
    from jaxlib import _jax
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as hlo
    from .engine.lowering import make_context
    # A StableHLO version at least 4 weeks old, as JAX picks: readable by consumers a month behind.
    target = hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4)
    # jaxlib's serializer (JAX's) first rewrites CHLO ops (erf_inv, top_k, ...) into StableHLO
    with make_context():
        return _jax.mlir.serialize_portable_artifact(ir.Module.parse(exp._module_text), target)


def _tangent_aval(aval):
    """A cotangent's type: the aval itself for floats, float0 for integers and booleans."""
    if np.issubdtype(aval.dtype, np.inexact) or aval.dtype == dt.bfloat16:
        return aval
    return aval.update(dtype=dt.float0, weak_type=False)


def _export_vjp(exp: Exported) -> Exported:
    """Export the vjp of a traced Exported (JAX's convention: flat primals then flat output
    cotangents in, the flat input cotangents out)."""
    from .transformations.ad import vjp
    primal, n = jaxpr_as_fun(exp.jaxpr), len(exp.in_avals)

    def fun_vjp(*primals_and_cts):
        _, pullback = vjp(lambda *xs: list(primal(*xs)), *primals_and_cts[:n])
        return pullback(list(primals_and_cts[n:]))

    fun_vjp.__name__ = f"vjp_{exp.fun_name}"
    specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in (*exp.in_avals, *map(_tangent_aval, exp.out_avals))]
    return export(jit(fun_vjp), platforms=exp.platforms)(*specs)


def _module_caller(exp: Exported):
    """The flat function calling a deserialized module (``call_exported``), differentiable
    through the vjp the module was serialized with (``vjp()`` says when there is none)."""
    from .lax.exported_call import call_exported_p
    from .transformations.custom_derivatives import custom_vjp
    n = len(exp.in_avals)
    if not exp.has_vjp():       # differentiating it raises (call_exported's jvp rule)
        return lambda *leaves: call_exported_p.bind(*leaves, exported=exp)

    @custom_vjp
    def call(*leaves):
        return call_exported_p.bind(*leaves, exported=exp)

    def fwd(*leaves):
        return call(*leaves), leaves

    def bwd(leaves, cts):
        # integer and boolean results take float0 cotangents, as the vjp was exported for
        cts = [ct if _tangent_aval(a).dtype == a.dtype else np.zeros(np.shape(ct), dt.float0)
               for ct, a in zip(cts, exp.out_avals)]
        return tuple(exp.vjp().call(*leaves, *cts))[:n]

    call.defvjp(fwd, bwd)
    return call


def export(fun_jit, *, platforms: Sequence[str] | None = None, disabled_checks=()) -> Callable[..., Exported]:
    """``export(jit(f))(*arg_specs)``: trace ``f`` for the specs (arrays or ``ShapeDtypeStruct``s,
    with symbolic dimensions allowed) into an ``Exported``."""
    if not hasattr(fun_jit, "trace"):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: {fun_jit!r}")
    here = default_backend()
    platforms = (here,) if platforms is None else tuple(platforms)

    def do_export(*args, **kwargs) -> Exported:
        traced = fun_jit.trace(*args, **kwargs)
        effects = jaxpr_effects(traced.jaxpr)
        exp = Exported(traced.fun_name, traced.jaxpr, traced._in_tree, traced._out_tree, platforms,
                       disabled_safety_checks=disabled_checks,
                       ordered_effects=sorted((e for e in effects if e.ordered), key=str),
                       unordered_effects=sorted((e for e in effects if not e.ordered), key=str))
        exp._module_text = _module_text(exp)      # lowered now: what cannot be serialized fails here
        return exp

    return do_export


def deserialize(blob: bytearray | bytes) -> Exported:
    """The Exported that ``blob`` (``Exported.serialize()``, by jaxprc or by JAX) describes.
    The bytes must be trusted: calling the function runs the custom calls its module names."""
    return export_serialization.deserialize(blob, Exported)


def symbolic_args_specs(args, shapes_specs, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None):
    """``ShapeDtypeStruct``s for the pytree ``args`` with the shapes ``shapes_specs`` gives (one
    spec for all, or a matching pytree; ``_`` keeps the argument's own size), in one scope."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot use both `scope` and `constraints`")
    leaves, tree = tree_flatten(args)
    specs = ([shapes_specs] * len(leaves) if isinstance(shapes_specs, str) or shapes_specs is None
             else tree_flatten(shapes_specs, is_leaf=lambda s: s is None)[0])
    if len(specs) != len(leaves):
        raise ValueError(f"symbolic_args_specs: {len(specs)} shape specs for {len(leaves)} arguments")

    def one(x, spec):
        shape = tuple(x.shape)
        if spec is None:
            dims = shape
        else:
            texts = [t for t in split_top_level(spec.strip().strip("()")) if t]
            if len(texts) != len(shape):
                raise ValueError(f"shape spec {spec!r} has {len(texts)} dimensions, the argument {len(shape)}")
            dims = tuple(d if t == "_" else symbolic_shape(t, scope=scope)[0] for t, d in zip(texts, shape))
        return ShapeDtypeStruct(dims, x.dtype)

    return tree_unflatten(tree, [one(x, s) for x, s in zip(leaves, specs)])
