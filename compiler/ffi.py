"""Foreign function interface, JAX's ``jax.ffi``: call XLA FFI handlers from programs.

``register_ffi_target`` hands a handler (a ``PyCapsule`` of its function
pointer, from ``pycapsule``) to XLA through jaxlib and records it, so that a
call of a target nobody registered fails with a clear error at lowering rather
than in XLA. ``ffi_call`` builds the function that binds ``ffi_call_p``
(compiler/lax/ffi_call.py); its keyword arguments become the handler's
attributes. ``include_dir`` is jaxlib's directory holding ``xla/ffi/api/ffi.h``.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any

from .callback import _result_avals
from .engine.traceback_filtering import api_boundary
from .ir.tracing import get_aval
from .ir.tree_util import tree_flatten, tree_unflatten
from .lax.callbacks import VMAP_METHODS
from .lax.ffi_call import (attribute_param, attribute_value, emit_custom_call, ffi_call_p, mlir_attribute,
                           registered_targets)

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir", "pycapsule", "register_ffi_target",
           "register_ffi_target_as_batch_partitionable", "register_ffi_type", "register_ffi_type_id"]


def include_dir() -> str:
    """The directory of the XLA FFI headers shipped with jaxlib (``-I`` it to build a handler)."""
    import jaxlib
    return os.path.join(os.path.dirname(jaxlib.__file__), "include")


def pycapsule(funcptr) -> Any:
    """A ``PyCapsule`` of a ctypes function pointer (``lib.Handler``), as XLA's registry takes it."""
    address = ctypes.cast(funcptr, ctypes.c_void_p).value
    make = ctypes.pythonapi.PyCapsule_New
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return make(address, None, None)


def _platform(platform: str) -> str:
    return {"cpu": "cpu", "host": "cpu", "cuda": "cuda", "gpu": "cuda", "rocm": "rocm"}.get(platform.lower(),
                                                                                         platform.lower())


def register_ffi_target(name: str, fn, platform: str = "cpu", api_version: int = 1, **kwargs) -> None:
    """Register ``fn`` (a PyCapsule, or a dict of them by execution stage) as the FFI target
    ``name`` on ``platform``; ``api_version`` 1 is the typed FFI, 0 the legacy custom call."""
    from jaxlib import xla_client as xc
    xc.register_custom_call_target(name, fn, platform=platform, api_version=api_version, **kwargs)
    registered_targets.add((_platform(platform), name))


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Let XLA's SPMD partitioner split the batch dimensions of calls of ``name``."""
    from jaxlib import xla_client as xc
    xc.register_custom_call_as_batch_partitionable(name)


def register_ffi_type(name: str, type_registration, platform: str = "cpu") -> None:
    """Register a user type (a ``TypeRegistration``) for FFI handlers."""
    from jaxlib import xla_client as xc
    xc.register_custom_type(name, type_registration, platform=platform)


def register_ffi_type_id(name: str, obj, platform: str = "cpu") -> None:
    """Removed by JAX (jaxlib 0.8.1 on): raises its error."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def build_ffi_lowering_function(call_target_name: str, *, operand_layouts=None, result_layouts=None,
                                backend_config=None, skip_ffi_layout_processing: bool = False,
                                **lowering_args):
    """A function ``(ctx, *operands, **params)`` emitting the custom call of ``call_target_name``
    and giving its op: the equation's params become the handler's attributes unless
    ``backend_config`` (a dict of MLIR attributes, or a string for api_version < 4) is given."""
    if skip_ffi_layout_processing:
        raise NotImplementedError("ffi_lowering: skip_ffi_layout_processing is not supported by jaxprc")
    api_version = lowering_args.pop("api_version", 4)
    has_side_effect = lowering_args.pop("has_side_effect", False)
    if lowering_args:
        raise TypeError(f"ffi_lowering: unsupported arguments {sorted(lowering_args)}")

    def emit(ctx, *operands, **params):
        if backend_config is None:
            attrs = {k: mlir_attribute(attribute_value(attribute_param(k, v))) for k, v in params.items()}
        else:
            attrs = backend_config if isinstance(backend_config, dict) else {}
        in_layouts = None if operand_layouts is None else [
            _layout(lo, a.ndim, "operand") for lo, a in zip(operand_layouts, ctx.avals_in)]
        out_layouts = None if result_layouts is None else [
            _layout(lo, a.ndim, "result") for lo, a in zip(result_layouts, ctx.avals_out)]
        return emit_custom_call(ctx, call_target_name, operands, attributes=attrs,
                                has_side_effect=has_side_effect, input_layouts=in_layouts,
                                output_layouts=out_layouts, api_version=api_version,
                                backend_config=backend_config if isinstance(backend_config, str) else "")
    return emit


def ffi_lowering(call_target_name: str, **kwargs):
    """A lowering rule (for a library's own primitive) calling the FFI target
    ``call_target_name``; the arguments are ``build_ffi_lowering_function``'s."""
    emit = build_ffi_lowering_function(call_target_name, **kwargs)
    return lambda ctx, *operands, **params: list(emit(ctx, *operands, **params).results)


def _layout(layout, ndim: int, what: str) -> tuple:
    """A user's layout (None: row-major; else the axes from major to minor, JAX's convention) as
    the minor-to-major order XLA takes."""
    if layout is None:
        return tuple(range(ndim - 1, -1, -1))
    layout = tuple(int(d) for d in layout)
    if sorted(layout) != list(range(ndim)):
        raise ValueError(f"ffi_call: the {what} layout {layout} is not a permutation of range({ndim})")
    return layout[::-1]


def ffi_call(target_name: str, result_shape_dtypes, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts=None, output_layouts=None,
             input_output_aliases: dict[int, int] | None = None, custom_call_api_version: int = 4,
             legacy_backend_config: str | None = None):
    """The function calling the FFI target ``target_name`` with results shaped as
    ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``-likes); call it as
    ``f(*arrays, **attributes)``."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {[*VMAP_METHODS, None]}, "
                         f"but got: {vmap_method}")
    single = hasattr(result_shape_dtypes, "shape") and hasattr(result_shape_dtypes, "dtype")
    result_avals, out_tree = _result_avals(result_shape_dtypes, "ffi_call")
    if single and output_layouts is not None:     # one result: its layout alone, as JAX takes it
        output_layouts = [output_layouts]
    out_layouts = tuple(_layout(None if output_layouts is None else output_layouts[k], a.ndim, "output")
                        for k, a in enumerate(result_avals))

    @api_boundary
    def wrapped(*args, **attributes):
        flat_args, _ = tree_flatten(args)
        avals = [get_aval(x) for x in flat_args]
        in_layouts = tuple(_layout(None if input_layouts is None else input_layouts[k], a.ndim, "input")
                           for k, a in enumerate(avals))
        if custom_call_api_version < 4 and attributes:
            raise ValueError("The use of ffi_call attributes requires a custom call API version of at "
                             f"least 4; got custom_call_api_version={custom_call_api_version}.")
        attrs = tuple((k, attribute_param(k, v)) for k, v in sorted(attributes.items()))
        outs = ffi_call_p.bind(
            *flat_args, target_name=target_name, result_avals=tuple(result_avals), attributes=attrs,
            has_side_effect=bool(has_side_effect), vmap_method=vmap_method, input_layouts=in_layouts,
            output_layouts=out_layouts,
            input_output_aliases=tuple(sorted((input_output_aliases or {}).items())),
            custom_call_api_version=int(custom_call_api_version), legacy_backend_config=legacy_backend_config)
        return outs[0] if single else tree_unflatten(out_tree, list(outs))

    return wrapped
