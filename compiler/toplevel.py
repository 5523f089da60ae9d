"""JAX's top-level process utilities: configuration context managers, device and process
queries, host transfer, caches, and ``named_call``.

The context managers (``enable_x64``, ``debug_nans``, ``debug_infs``,
``disable_jit``, ``default_device``, ``numpy_rank_promotion``,
``numpy_dtype_promotion``, ``default_matmul_precision``, ``log_compiles``,
``check_tracer_leaks``) set a
``jaxprc.config`` option for the calling thread in the ``with`` block and
restore it after (other threads keep their values, as in JAX); the same options
are set for the process with ``jaxprc.config.update("jax_debug_nans", True)``
and friends. The options are declared in ir/config.py.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import logging
import platform
import sys

import numpy as np
from jaxlib import xla_client as _xla_client

from .ir import dtypes as dt
from .ir.core import ShapedArray
from .ir.tracing import get_aval
from .ir.tree_util import tree_leaves, tree_map

__all__ = ["Device", "check_tracer_leaks", "checking_leaks", "clear_caches", "copy_to_host_async",
           "debug_infs", "debug_nans", "default_device", "default_matmul_precision",
           "device_count", "device_get", "devices", "disable_jit", "enable_x64", "host_count", "host_id", "host_ids",
           "jacobian", "live_arrays", "local_device_count", "local_devices", "log_compiles", "named_call", "named_scope",
           "numpy_dtype_promotion", "numpy_rank_promotion", "print_environment_info", "process_count",
           "process_index", "process_indices", "typeof"]

config = dt.config


def compile_log_level() -> int:
    """The level the compile path logs at: WARNING under ``log_compiles``, as JAX, else DEBUG."""
    return logging.WARNING if config.jax_log_compiles else logging.DEBUG

Device = _xla_client.Device           # the class of jaxprc's devices (jaxlib's)


def enable_x64(new_val: bool = True):
    """Context manager: 64-bit types on (or off) in the block."""
    return config.override("jax_enable_x64", new_val)


def debug_nans(new_val: bool = True):
    """Context manager: a NaN output of any op raises FloatingPointError naming the primitive."""
    return config.override("jax_debug_nans", new_val)


def debug_infs(new_val: bool = True):
    """Context manager: an infinite output of any op raises FloatingPointError naming the primitive."""
    return config.override("jax_debug_infs", new_val)


def disable_jit(disable: bool = True):
    """Context manager: ``jit`` functions run their Python function op by op (eagerly) in the block."""
    return config.override("jax_disable_jit", disable)


def check_tracer_leaks(new_val: bool = True):
    """Context manager: every trace checks, when it ends, that none of its tracers outlives it
    (kept in a global, a closure, a list...), and raises naming the leaked tracers and their
    holders. Slow (it walks the garbage collector's objects): for debugging."""
    return config.override("jax_check_tracer_leaks", new_val)


checking_leaks = check_tracer_leaks


def log_compiles(new_val: bool = True):
    """Context manager: every jit compilation is logged (logger ``jaxprc``, WARNING level)."""
    return config.override("jax_log_compiles", new_val)


def numpy_rank_promotion(new_val: str = "allow"):
    """Context manager: 'allow', 'warn' or 'raise' when jaxprc.numpy broadcasts arrays of
    different ranks."""
    return config.override("jax_numpy_rank_promotion", new_val)


def numpy_dtype_promotion(new_val: str = "standard"):
    """Context manager: 'standard' or 'strict' (no implicit promotion between dtypes)."""
    return config.override("jax_numpy_dtype_promotion", new_val)


def default_matmul_precision(new_val=None):
    """Context manager: the precision of matrix products that do not name one."""
    from .lax.contractions import canonicalize_precision
    canonicalize_precision(new_val)      # validate: a Precision, its name, or None
    return config.override("jax_default_matmul_precision", new_val)


def default_device(new_val=None):
    """Context manager: the device ``device_put`` and computations use (one of ``devices()``)."""
    from .runtime import devices
    if new_val is not None and new_val not in devices():
        raise ValueError(f"default_device: {new_val!r} is not one of this process's devices {devices()}")
    return config.override("jax_default_device", new_val)


# ------------------------------------------------------------- queries

def _backend(backend: str | None):
    from .runtime import backend as runtime_backend
    b = runtime_backend()
    if backend is not None and backend not in (b.platform, "cuda" if b.platform == "gpu" else b.platform):
        raise RuntimeError(f"Backend '{backend}' is not in the list of known backends: {b.platform}")
    return b


def devices(backend: str | None = None) -> list:
    """The devices of every process together (of ``backend``: this process has one)."""
    return list(_backend(backend).devices)


def local_devices(process_index: int | None = None, backend: str | None = None, host_id: int | None = None):
    """The devices of process ``process_index`` (this process's by default)."""
    b = _backend(backend)
    index = process_index if process_index is not None else host_id
    if index is None:
        return list(b.local_devices)
    if not 0 <= index < process_count():
        raise ValueError(f"Unknown process_index {index}: there are {process_count()} processes")
    return [d for d in b.devices if d.process_index == index]


def local_device_count(backend: str | None = None) -> int:
    return len(_backend(backend).local_devices)


def device_count(backend: str | None = None) -> int:
    """The number of devices of every process together."""
    return len(_backend(backend).devices)


def process_index(backend: str | None = None) -> int:
    """This process's index among those ``jaxprc.distributed.initialize`` joined (0 alone)."""
    return _backend(backend).process_index


def process_count(backend: str | None = None) -> int:
    return len(process_indices(backend))


def process_indices(backend: str | None = None) -> list[int]:
    return sorted({d.process_index for d in _backend(backend).devices})


host_id, host_count, host_ids = process_index, process_count, process_indices


def typeof(x) -> ShapedArray:
    """The abstract type of a value (its ``ShapedArray``, weak type included; a ref's
    ``AbstractRef``; a typed key array's shape and key dtype)."""
    from .random import PRNGKeyArray
    from .ref import Ref
    if isinstance(x, (Ref, PRNGKeyArray)):
        return x.aval
    return get_aval(x)


def device_get(x):
    """A pytree with every array leaf copied to the host as a numpy array (other leaves as they are)."""
    from .transfer_guard import explicit_scope

    def get(leaf):
        if hasattr(leaf, "__array__") and not isinstance(leaf, np.ndarray):
            return np.asarray(leaf)
        return leaf
    with explicit_scope("device_get"):      # guarded only by the *_explicit transfer guard levels
        copy_to_host_async(x)          # start every copy before waiting for the first
        return tree_map(get, x)


def copy_to_host_async(x):
    """Start the device-to-host copy of every Array leaf of the pytree ``x`` (leaves without a
    ``copy_to_host_async`` method are left alone); returns ``x``."""
    for leaf in tree_leaves(x):
        copy = getattr(leaf, "copy_to_host_async", None)
        if copy is not None:
            copy()
    return x


def live_arrays(platform: str | None = None) -> list:
    """The jaxprc Arrays alive in this process (whose buffers are not deleted)."""
    from .runtime import Array
    gc.collect()
    return [a for a in gc.get_objects() if type(a) is Array and not a._buf.is_deleted()]


def clear_caches() -> None:
    """Drop every compiled and traced cache entry (jit functions, eager ops)."""
    from . import api, runtime
    from .engine import dispatch
    for per_options in list(api._JIT_CACHES.values()):
        for compiled, traced in per_options.values():
            compiled.clear()
            traced.clear()
    for impl in list(dispatch._EAGER_IMPLS.values()):
        impl.cache.clear()
    if runtime.cpp_jit.CACHE is not None:      # the C++ dispatch's entries (compiler/engine/cpp_dispatch.py)
        runtime.cpp_jit.CACHE.clear()


def jacobian(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False, allow_int: bool = False):
    """The Jacobian of ``fun`` in reverse mode (JAX's ``jax.jacobian`` is ``jax.jacrev``)."""
    from .transformations.ad import jacrev
    return jacrev(fun, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def named_call(fun, *, name: str | None = None):
    """``fun`` run inside ``named_scope(name)`` (its function's name by default), as in JAX: its
    operations carry the name in their location and the lowered module's op names; nothing is
    staged, so it takes any arguments ``fun`` does."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {name!r}")
    name = name or getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    def call(*args, **kwargs):
        with named_scope(name):
            return fun(*args, **kwargs)
    return call


def print_environment_info(return_string: bool = False):
    """The versions of jaxprc, jaxlib, numpy and Python, and the devices."""
    import jaxlib
    from . import __version__
    from .runtime import default_backend, devices
    info = (f"jaxprc:    {__version__}\njaxlib:    {jaxlib.__version__}\nnumpy:     {np.__version__}\n"
            f"python:    {sys.version}\nplatform:  {platform.platform()}\n"
            f"backend:   {default_backend()}\ndevices:   {devices()}\n"
            f"process_count: {process_count()}\n")
    if return_string:
        return info
    print(info)
    return None


@contextlib.contextmanager
def named_scope(name: str):
    """Context manager: the operations traced in the block carry ``name`` in their location (nested
    scopes join with '/'); lowered, their MLIR locations read ``name/primitive``, as JAX's op names."""
    from .ir.tracing import trace_state
    if not isinstance(name, str):
        raise TypeError(f"named_scope name must be a string, got {name!r}")
    location = trace_state.location
    saved = location.scope
    location.scope = f"{saved}/{name}" if saved else name
    try:
        yield
    finally:
        location.scope = saved
