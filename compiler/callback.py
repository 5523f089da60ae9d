"""Host callbacks, JAX's API: ``pure_callback``, ``io_callback``, ``effects_barrier``, and the
staging of ``debug_callback`` (``jaxprc.debug.callback``).

The user's function takes and returns pytrees; the primitives (compiler/lax/
callbacks.py) take flat arrays. A ``FlatCallback`` bridges them and is the
function a ``HostCallback`` param holds, named after the user's function.
Equal (same function, same argument structure) flat callbacks compare equal,
as in JAX, so retracing a function gives an equal program (CSE merges equal
pure calls; compiled programs are shared).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .ir import dtypes as dt
from .ir.core import ShapedArray
from .ir.effects import Effect
from .ir.host_callback import FlatCallback, HostCallback, callback_name
from .ir.tracing import get_aval
from .ir.tree_util import tree_flatten, tree_unflatten
from .lax.callbacks import VMAP_METHODS, debug_callback_p, io_callback_p, pure_callback_p
from .runtime import effects_barrier
from .sharding import NamedSharding, SingleDeviceSharding
from .engine.traceback_filtering import api_boundary

__all__ = ["pure_callback", "io_callback", "effects_barrier", "debug_callback"]


def _host_callback(callback: Callable, in_tree) -> HostCallback:
    """The HostCallback param calling ``callback`` on arguments structured as ``in_tree``."""
    return HostCallback(callback_name(callback), FlatCallback(callback, in_tree))


def _result_avals(result_shape_dtypes, what: str):
    leaves, out_tree = tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{what}: result_shape_dtypes must be a pytree of objects with shape and "
                            f"dtype attributes (jaxprc.ShapeDtypeStruct), got {leaf!r}")
        dtype = np.dtype(leaf.dtype)
        if dt.canonicalize_dtype(dtype) != dtype:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when `jax_enable_x64` "
                             "is disabled")
        avals.append(ShapedArray(leaf.shape, dtype))
    return tuple(avals), out_tree


def _device(sharding, what: str) -> int | None:
    """The id of the one device ``sharding`` names (where the callback runs in a program over
    several devices), as JAX: a SingleDeviceSharding, or a NamedSharding over a one-device mesh."""
    if sharding is None:
        return None
    if isinstance(sharding, SingleDeviceSharding) or (
            isinstance(sharding, NamedSharding) and sharding.mesh.size == 1):
        return next(iter(sharding.device_set)).id
    raise NotImplementedError(f"{what} only supports SingleDeviceSharding, but got {type(sharding)}")


def _check_callable(callback, what: str) -> None:
    if not callable(callback):
        raise TypeError(f"{what}: the callback must be callable, got an object of type "
                        f"{type(callback).__name__}")


@api_boundary
def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding=None,
                  vmap_method: str | None = None, **kwargs: Any):
    """Call the pure Python function ``callback`` on the host, from traced code too.

    ``result_shape_dtypes`` is a pytree of ``ShapeDtypeStruct``s (shape and dtype) the results
    must match. Being pure, an unused call may be removed and equal calls merged. Under ``vmap``
    ``vmap_method`` says how: ``"sequential"`` (once per element, ``"sequential_unrolled"``
    unrolled), ``"expand_dims"`` (one call, unbatched operands get a leading axis of size 1),
    ``"broadcast_all"`` (... of the batch size); none given, ``vmap`` raises. Not differentiable
    (wrap it in ``custom_jvp``/``custom_vjp``).
    """
    _check_callable(callback, "pure_callback")
    if vmap_method not in (*VMAP_METHODS, None):
        raise ValueError(f"vmap_method must be on of the allowed methods {[*VMAP_METHODS, None]}, "
                         f"but got: {vmap_method}")
    flat_args, in_tree = tree_flatten((args, kwargs))
    result_avals, out_tree = _result_avals(result_shape_dtypes, "pure_callback")
    outs = pure_callback_p.bind(*flat_args, callback=_host_callback(callback, in_tree),
                                result_avals=result_avals, vmap_method=vmap_method,
                                device=_device(sharding, "pure_callback"))
    return tree_unflatten(out_tree, list(outs))


@api_boundary
def io_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding=None,
                ordered: bool = False, **kwargs: Any):
    """Call the impure Python function ``callback`` on the host, from traced code too.

    Never removed or merged; with ``ordered=True`` the calls run in program order, across
    separate compiled calls too (not allowed under ``vmap``). Not differentiable.
    """
    _check_callable(callback, "io_callback")
    flat_args, in_tree = tree_flatten((args, kwargs))
    result_avals, out_tree = _result_avals(result_shape_dtypes, "io_callback")
    outs = io_callback_p.bind(*flat_args, callback=_host_callback(callback, in_tree),
                              result_avals=result_avals, ordered=bool(ordered),
                              device=_device(sharding, "io_callback"))
    return tree_unflatten(out_tree, list(outs))


# ----------------------------------------------------------- debug callbacks
# (jaxprc.debug.callback and debug.print stage them; so does the debugger's breakpoint)

def _split_debug_args(args, kwargs):
    """(tree, array leaves, {position: other leaf}): arrays are operands, the rest static."""
    leaves, tree = tree_flatten((args, kwargs))
    dynamic, static = [], {}
    for i, leaf in enumerate(leaves):
        try:
            get_aval(leaf)
            dynamic.append(leaf)
        except TypeError:
            static[i] = leaf
    return tree, dynamic, static


def stage_debug_callback(fn, name: str, args, kwargs, ordered: bool, partitioned: bool) -> None:
    """Stage a ``debug_callback`` equation calling ``fn`` with (args, kwargs): array leaves are its
    operands, the other leaves are passed as they are."""
    tree, dynamic, static = _split_debug_args(args, kwargs)
    cb = HostCallback(name, FlatCallback(fn, tree, tuple(static.items())))
    debug_callback_p.bind(*dynamic, callback=cb, effect=Effect.ordered_debug if ordered else Effect.debug,
                          partitioned=bool(partitioned))


def debug_callback(callback: Callable[..., None] | None = None, *args: Any, ordered: bool = False,
                   partitioned: bool = False, **kwargs: Any):
    """Call ``callback(*args, **kwargs)`` on the host when the program runs (its result is
    ignored). Also ``callback(ordered=...)(fn, *args, **kwargs)``."""
    def stage(fn, *c_args, **c_kwargs):
        if not callable(fn):
            raise TypeError("first argument to jax.debug.callback must be callable, but got an "
                            f"object of type {type(fn)}")
        stage_debug_callback(fn, callback_name(fn), c_args, c_kwargs, ordered, partitioned)

    return call_or_stage_later(stage, callback, args, kwargs, "debug_callback")


def call_or_stage_later(stage, first, args, kwargs, api: str):
    """JAX's two forms of the debug APIs: ``api(first, *args)`` stages at once; ``api(options...)``
    returns ``stage``, to be called as ``stage(first, *args)``."""
    if first is not None:
        stage(first, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"{api} received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return stage
