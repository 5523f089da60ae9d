"""Cached jit calls through jaxlib's C++ dispatch (runtime/cpp_jit.py), with Python as the fallback.

A jit function is a C++ ``PjitFunction`` whose cache miss is jaxprc's Python
path. The miss hands jaxlib the compiled executable (``fastpath``) only where
the C++ path does exactly what the Python path would; everything else stays in
Python, call after call:

- the context: C++ runs a cached executable only while the C++ dispatch is on,
  jit is enabled, no NaN/Inf checks are on, executions are allowed (no_execution)
  and no trace is live in the calling thread. The context
  is part of every C++ cache key (``cpp_jit.context_state``: jaxprc's config
  mirrored into it, and a thread-local mark while this thread traces), so a
  call in another context misses, and its miss hands jaxlib nothing;
- the program: one executable on the default device, with no host callbacks
  (effects), no results that carry no data (float0), no sharding options;
- the arguments: jaxprc ``Array``s, numpy arrays and scalars, Python scalars.
  jaxlib flattens them with ``dispatch_registry``, where an ``Array`` is a node
  around its jaxlib buffer (results come back through the same node) and a
  numpy array a node around a private copy of it (``HostCopy``). Anything else
  (tracers, arrays over several devices, deleted buffers) makes jaxlib call
  the Python path.

``jaxprc.config.jaxprc_cpp_dispatch`` (env ``JAXPRC_CPP_DISPATCH=0``) turns the
C++ path off; so does a jaxlib other than the pinned one.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import runtime
from ..ir import tracing
from ..ir.config import TRACE_CONTEXT, TraceContext
from ..ir.dtypes import config
from ..ir.tree_util import dispatch_registry
from ..runtime import cpp_jit

Array = runtime.Array

# jaxlib reads the buffer of an Array in C++ (`_buf`) and rebuilds one with `Array(_buf=...)`,
# whose aval is the one the cached executable gave its result.
dispatch_registry.register_dataclass_node(Array, ["_buf"], [])


class HostCopy(np.ndarray):
    """The leaf jaxlib transfers for a numpy argument: a copy no one else holds.

    jaxlib's own transfer aliases the numpy buffer (or copies it after the call
    has returned), and the program reads it when it runs: a host write made
    after the call would reach the result (jax has that race). Handing jaxlib a
    fresh copy makes the alias harmless and keeps the transfer in C++. (A
    subclass, so that the registry does not take the copy for a node again.)"""


def _copy_host_argument(x: np.ndarray):
    return (x.copy().view(HostCopy),), None


dispatch_registry.register_node(np.ndarray, _copy_host_argument, lambda _, children: children[0])

_CONTEXT_OPTIONS = ("jaxprc_cpp_dispatch", "jax_disable_jit", "jax_debug_nans", "jax_debug_infs", "jax_no_execution")
_FAST_CONTEXT = (True, False, False, False, False)
_TRACING = "tracing"


def _context() -> tuple:
    return tuple(bool(getattr(config, name)) for name in _CONTEXT_OPTIONS)


class _ThreadState(threading.local):
    tracing = False


_thread = _ThreadState()


def _local_context():
    """The calling thread's context in jaxlib's thread-local state: the tracing mark while it
    traces, its own context while it overrides a context option, else unset (the global one)."""
    if _thread.tracing:
        return _TRACING
    if any(config.overridden(name) for name in _CONTEXT_OPTIONS):
        return _context()
    return cpp_jit.unset


def _on_config(name: str, value, local: bool) -> None:
    if name in TRACE_CONTEXT:
        if not local:
            cpp_jit.trace_context_state.set_global(TraceContext(*map(config.global_value, TRACE_CONTEXT)))
        else:
            overridden = any(config.overridden(n) for n in TRACE_CONTEXT)
            cpp_jit.trace_context_state.set_local(config.trace_context() if overridden else cpp_jit.unset)
    if name == "jax_enable_x64":
        if local:
            cpp_jit.x64_state.set_local(bool(value) if config.overridden(name) else cpp_jit.unset)
        else:
            cpp_jit.x64_state.set_global(bool(value))
    elif name in _CONTEXT_OPTIONS:
        if local:
            cpp_jit.context_state.set_local(_local_context())
        else:
            cpp_jit.context_state.set_global(tuple(bool(config.global_value(n)) for n in _CONTEXT_OPTIONS))


def _on_tracing(live: bool) -> None:
    _thread.tracing = live
    cpp_jit.context_state.set_local(_local_context())


if cpp_jit.SUPPORTED:
    cpp_jit.x64_state.set_global(bool(config.jax_enable_x64))
    cpp_jit.context_state.set_global(_context())
    cpp_jit.trace_context_state.set_global(config.trace_context())
    type(config).listeners.append(_on_config)
    tracing.tracing_listeners.append(_on_tracing)


def enabled() -> bool:
    """Whether new jit functions and eager ops go through C++ (the pinned jaxlib, switch on)."""
    return cpp_jit.SUPPORTED and config.jaxprc_cpp_dispatch


def fast_context() -> bool:
    """Whether a cache miss now may hand jaxlib an executable: the calls its signature covers
    would run it in C++ (the context in the key is the fast one, jaxlib types host arguments
    with jaxprc's x64 flag)."""
    x64 = config.jax_enable_x64
    return (cpp_jit.context_state.value == _FAST_CONTEXT
            and cpp_jit.x64_state.value == x64 and cpp_jit.jaxlib_x64() == x64)


_SCALARS = (bool, int, float, complex)


def c_leaves(leaves) -> bool:
    """Whether jaxlib types and transfers each argument leaf as the Python path does."""
    for x in leaves:
        t = type(x)
        if t is np.ndarray:
            if x.dtype.kind == "V" and x.dtype.itemsize == 0:   # float0: no device form of its own
                return False
        elif not (t is Array or t in _SCALARS or isinstance(x, np.generic)):
            return False
    return True


def result_tree(outs, num_outputs: int):
    """The treedef jaxlib rebuilds ``outs`` with from the executable's outputs; None when ``outs``
    holds anything but one plain Array per output."""
    leaves, tree = dispatch_registry.flatten(outs)
    if len(leaves) != num_outputs or any(type(b) is not cpp_jit.ArrayImpl for b in leaves):
        return None
    return tree
