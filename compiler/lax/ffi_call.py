"""Calls of foreign (XLA FFI) functions: ``ffi_call`` (JAX's ``ffi_call_p``).

``ffi_call[target_name, result_avals, attributes, ...]`` *args calls the handler
registered with XLA under ``target_name`` (``jaxprc.ffi.register_ffi_target``).
``attributes`` is a tuple of ``(name, value)`` pairs, the handler's attributes;
a value is a Python bool, int, float or string, ``(dtype, number)`` for a typed
scalar or ``(dtype, shape, flat values)`` for an array, so that a program
holding the call prints and parses back. The lowering is JAX's: a
``stablehlo.custom_call`` with an empty ``backend_config`` and the attributes as
its ``mhlo.backend_config`` dictionary (a Python int is i64, a float f64).
A call with ``has_side_effect`` has the ``io`` effect (never dropped or merged).
"""
from __future__ import annotations

import functools

import numpy as np

from jaxprc.engine import dispatch
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import Primitive
from jaxprc.ir.effects import Effect
from jaxprc.ir import dtypes as dt
from jaxprc.ir.params import Aval, Bool, Checker, Int, OneOf, Str, Tuple
from .callbacks import VMAP_METHODS, batch_by_vmap_method

__all__ = ["ffi_call_p"]

# (platform, name) of every target registered through jaxprc.ffi: a call of any other fails at
# lowering with a clear error, before XLA sees it
registered_targets: set[tuple[str, str]] = set()

_Layouts = Tuple(Tuple(Int(0)))


class _Attributes(Checker):
    """``((name, value), ...)``; a value as the module docstring says."""

    def problem(self, value):
        if type(value) is not tuple:
            return "not a tuple"
        for item in value:
            if type(item) is not tuple or len(item) != 2 or not isinstance(item[0], str):
                return f"{item!r} is not a (name, value) pair"
            if attribute_value(item[1]) is None:
                return f"attribute {item[0]!r} has a value of no attribute kind: {item[1]!r}"
        return None

    def __str__(self):
        return "a tuple of (name, value) attribute pairs"


def _is_dtype(x) -> bool:
    return isinstance(x, np.dtype) and x in dt.ALL_DTYPES


def attribute_value(v):
    """The numpy value an attribute param holds (None: not an attribute)."""
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    if type(v) is tuple and len(v) == 2 and _is_dtype(v[0]):
        return np.array(v[1], v[0])[()]
    if (type(v) is tuple and len(v) == 3 and _is_dtype(v[0]) and type(v[1]) is tuple
            and type(v[2]) is tuple and len(v[2]) == int(np.prod(v[1]))):
        return np.array(v[2], v[0]).reshape(v[1])
    return None


def attribute_param(name: str, value):
    """A user's attribute value (a Python or NumPy scalar, a string, an array) as a param item."""
    if isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, (np.generic, np.ndarray)) and np.dtype(value.dtype) in dt.ALL_DTYPES:
        if np.ndim(value) == 0 and isinstance(value, np.generic):
            return (np.dtype(value.dtype), value.item())
        a = np.asarray(value)
        return (a.dtype, a.shape, tuple(a.ravel().tolist()))
    raise TypeError(f"ffi_call: attribute {name!r} has a value of type {type(value).__name__}, which is "
                    "not a Python or NumPy scalar, a string or a NumPy array")

ffi_call_p = Primitive("ffi_call")
ffi_call_p.multiple_results = True
ffi_call_p.def_params(
    target_name=Str(), result_avals=Tuple(Aval()), attributes=_Attributes(),
    has_side_effect=Bool(), vmap_method=OneOf(None, Str()), input_layouts=_Layouts, output_layouts=_Layouts,
    input_output_aliases=Tuple(Tuple(Int(0), 2)), custom_call_api_version=Int(0),
    legacy_backend_config=OneOf(None, Str()))
ffi_call_p.def_effects(lambda *, has_side_effect=False, **_: {Effect.io} if has_side_effect is True else set())


@ffi_call_p.def_abstract_eval
def _ffi_call_abstract_eval(*avals, result_avals, vmap_method, input_layouts, output_layouts,
                            input_output_aliases, **_):
    if vmap_method not in (None, *VMAP_METHODS):
        raise ValueError(f"ffi_call: vmap_method must be one of {VMAP_METHODS} or None, got {vmap_method!r}")
    if len(input_layouts) != len(avals) or len(output_layouts) != len(result_avals):
        raise ValueError(f"ffi_call: {len(input_layouts)} input layouts for {len(avals)} operands and "
                         f"{len(output_layouts)} output layouts for {len(result_avals)} results")
    for i, o in input_output_aliases:
        if i >= len(avals) or o >= len(result_avals) or avals[i].shape != result_avals[o].shape \
                or avals[i].dtype != result_avals[o].dtype:
            raise ValueError(f"ffi_call: input {i} cannot alias output {o}: their types differ or "
                             "one does not exist")
    return [a.strip_weak_type() for a in result_avals]


ffi_call_p.def_impl(functools.partial(dispatch.apply_primitive, ffi_call_p))


def _no_jvp(primals, tangents, **params):
    raise ValueError(f"The FFI call to `{params['target_name']}` cannot be differentiated. You can use "
                     "`jax.custom_jvp` or `jax.custom_jvp` to add support.")


ad.primitive_jvps[ffi_call_p] = _no_jvp


def _ffi_call_batch(args, dims, *, result_avals, vmap_method, input_layouts, output_layouts, **params):
    if vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        # one call over the batch: each operand and result has a new leading (major-most) axis
        # (legacy_vectorized leaves the unbatched operands as they are)
        input_layouts = tuple(lo if d is None and vmap_method == "legacy_vectorized" else _prepend_major(lo)
                              for lo, d in zip(input_layouts, dims))
        output_layouts = tuple(_prepend_major(lo) for lo in output_layouts)
    return batch_by_vmap_method(ffi_call_p, args, dims, vmap_method, result_avals,
                                input_layouts=input_layouts, output_layouts=output_layouts, **params)


def _prepend_major(layout: tuple) -> tuple:
    return (*(d + 1 for d in layout), 0)


batching.primitive_batchers[ffi_call_p] = _ffi_call_batch


def _layouts(layouts) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(np.array(lo, dtype=np.int64), type=ir.IndexType.get())
                             for lo in layouts])


def mlir_attribute(value) -> ir.Attribute:
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, np.ndarray):
        return ir.DenseElementsAttr.get(value, type=mlir.dtype_to_ir_type(value.dtype))
    t = mlir.dtype_to_ir_type(value.dtype)
    if value.dtype == np.bool_:
        return ir.BoolAttr.get(bool(value))
    if value.dtype.kind in "iu":
        return ir.IntegerAttr.get(t, int(value))
    return ir.FloatAttr.get(t, float(value))


def emit_custom_call(ctx, target_name: str, operands, *, attributes: dict, has_side_effect: bool = False,
                     input_layouts=None, output_layouts=None, input_output_aliases=(),
                     api_version: int = 4, backend_config: str = ""):
    """A ``stablehlo.custom_call`` of ``target_name`` with ``ctx.avals_out`` results in JAX's form:
    typed-FFI (api_version 4) ``attributes`` (MLIR attributes by name) as ``mhlo.backend_config``;
    layouts minor-to-major, None row-major."""
    platform = ctx.module_context.platform
    if (platform, target_name) not in registered_targets:
        raise ValueError(f"ffi_call: no FFI target named {target_name!r} is registered for platform "
                         f"{platform!r}; register it first with jaxprc.ffi.register_ffi_target("
                         f"{target_name!r}, ..., platform={platform!r})")
    row_major = lambda avals: [tuple(range(a.ndim - 1, -1, -1)) for a in avals]  # noqa: E731
    typed = api_version >= 4
    n_out = len(ctx.avals_out)
    aliases = [hlo.OutputOperandAlias.get([o] if n_out > 1 else [], i, []) for i, o in input_output_aliases]
    op = hlo.CustomCallOp(
        [mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(operands), ir.StringAttr.get(target_name),
        has_side_effect=ir.BoolAttr.get(has_side_effect),
        backend_config=ir.StringAttr.get("" if typed else backend_config),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1 if typed else api_version),
        called_computations=ir.ArrayAttr.get([]), output_operand_aliases=ir.ArrayAttr.get(aliases),
        operand_layouts=_layouts(input_layouts or row_major(ctx.avals_in)),
        result_layouts=_layouts(output_layouts or row_major(ctx.avals_out)))
    if typed:    # XLA reads the typed-FFI attributes from here (JAX's form)
        op.attributes["mhlo.backend_config"] = ir.DictAttr.get(attributes)
    return op


def _ffi_call_lowering(ctx, *args, target_name, result_avals, attributes, has_side_effect, vmap_method,
                       input_layouts, output_layouts, input_output_aliases, custom_call_api_version,
                       legacy_backend_config):
    return list(emit_custom_call(
        ctx, target_name, args, attributes={k: mlir_attribute(attribute_value(v)) for k, v in attributes},
        has_side_effect=has_side_effect, input_layouts=input_layouts, output_layouts=output_layouts,
        input_output_aliases=input_output_aliases, api_version=custom_call_api_version,
        backend_config=legacy_backend_config or "").results)


mlir.register_lowering(ffi_call_p, _ffi_call_lowering)
