"""jaxlib's C++ jit dispatch (``_jax.pjit`` -> ``PjitFunction``), driven without jax.

A ``PjitFunction`` does a cached call in C++: flatten the arguments, compute
their signature, look it up, move host arguments to the device, execute, wrap
the results. On a miss it calls back into Python. None of this is public
jaxlib API: what follows was read from jaxlib 0.10.2's ``pjit.cc`` and
``jax_jit.cc`` and checked by running it, so the module refuses other versions
(``SUPPORTED``) and callers keep their Python path as the fallback.

What jaxlib expects:

- Three process-wide jit states, each a ``_jax.config.Config``, set with
  ``_jax.jax_jit.set_{enable_x64,disable_jit,post_hook}_state``; a call
  raises "... state is not set" before they are. ``enable_x64`` decides how
  numpy and Python scalar arguments are typed and transferred (64-bit types
  narrowed unless on); with ``disable_jit`` on, the call runs ``fun`` as is; a
  non-None ``post_hook`` is called after every cached call. jax installs its
  own states when it is imported, and two owners cannot share them: jaxprc
  installs its own only when jax's are not there, and otherwise reads the x64
  flag jax's state holds (``jaxlib_x64``) before handing jaxlib an executable.
- Every ``Config`` made with ``include_in_jit_key=True`` is part of every
  call's cache key (its thread-local value if set, else its global one).
- ``_jax.pjit(name, fun, cache_miss, static_argnums, static_argnames,
  global_cache_key, registry, shard_arg_fallback, cache)``: calls flatten
  their arguments with ``registry`` (a ``PyTreeRegistry``). A leaf's
  signature: a jaxlib ``ArrayImpl``'s aval (shape, dtype, weak_type),
  sharding and committedness; a numpy array's or scalar's dtype under
  ``enable_x64``; Python scalars weakly typed. A leaf of another type, or a
  deleted ``ArrayImpl``, makes the call go to ``cache_miss``.
- ``cache_miss(*args, **kwargs)`` runs the call and returns
  ``(outputs, fastpath, False)``. ``fastpath`` None keeps that signature on
  ``cache_miss`` for good; so does ``cache_miss`` raising.
- ``fastpath`` (``FastpathData``) is read by attribute: the loaded executable,
  the results' treedef (of ``registry``; its leaves are the executable's
  outputs in order), one input sharding per executable argument, one output
  sharding, aval and committed flag per output, one kept flag and one layout
  (None) per argument, and ``const_args``: device arrays passed before the
  call's own arguments.
- On a hit, host leaves are transferred by jaxlib (zero-copy when the numpy
  buffer is aligned: the program may read it after the call has returned, so
  jaxprc hands jaxlib copies, compiler/cpp_dispatch.py) unless their layout is
  not None: then jaxlib calls ``shard_arg_fallback(x, sharding, layout)`` for
  the device array. Device arrays are passed as they are (a layout not None
  would be compared with theirs), and the results are new ``ArrayImpl``s
  carrying the cached avals and shardings. A failed run raises ``ValueError``
  from C++.
"""
from __future__ import annotations

import collections
import sys

import jaxlib
from jaxlib import _jax

from .client import backend

# The private interface above was read and tested against this jaxlib release only.
PINNED_JAXLIB = "0.10.2"
SUPPORTED = jaxlib.__version__ == PINNED_JAXLIB

_Config = _jax.config.Config
ArrayImpl = _jax.ArrayImpl
PjitFunction = _jax.PjitFunction

# Part of every cache key: jaxprc's x64 flag (also jaxlib's enable_x64 state when jaxprc's states
# are installed), and the "context" in which a cached executable may run at all (see
# compiler/cpp_dispatch.py): calls in any other context miss and run through Python.
x64_state = _Config("jaxprc_enable_x64", False, include_in_jit_key=True)
context_state = _Config("jaxprc_jit_context", None, include_in_jit_key=True)
# The options tracing reads (jaxprc's trace context), mirrored from its config: a call under other
# values misses, as the Python cache key does.
trace_context_state = _Config("jaxprc_trace_context", None, include_in_jit_key=True)
_disable_jit_state = _Config("jaxprc_disable_jit", False)   # jaxprc's own disable_jit misses instead
_post_hook_state = _Config("jaxprc_post_hook", None)
unset = _jax.config.unset

_installed = False


def install_states() -> None:
    """Give jaxlib its jit states, unless jax has (it sets its own when imported)."""
    global _installed
    if not _installed and "jax._src.config" not in sys.modules:
        _jax.jax_jit.set_enable_x64_state(x64_state)
        _jax.jax_jit.set_disable_jit_state(_disable_jit_state)
        _jax.jax_jit.set_post_hook_state(_post_hook_state)
        _installed = True


def jaxlib_x64() -> bool | None:
    """The x64 flag jaxlib types host arguments with (None: unknown, when jax's states are in place
    but do not name it)."""
    if _installed and "jax._src.config" not in sys.modules:
        return x64_state.value
    names, values = _jax.config.trace_context_names(), _jax.config.trace_context()
    return dict(zip(names, values)).get("jax_enable_x64")


FastpathData = collections.namedtuple("FastpathData", [
    "xla_executable", "out_pytree_def", "in_shardings", "out_shardings", "out_avals", "out_committed",
    "kept_var_bitvec", "in_device_local_layouts", "const_args"])


def fastpath(loaded, out_tree, arg_avals, out_avals, const_args=(), kept=None) -> FastpathData:
    """What jaxlib needs to run ``loaded`` (a single-device executable taking ``const_args`` then
    the call's arguments, of ``arg_avals``, whose ``kept`` flags are true: all when None) on a hit;
    ``out_tree`` rebuilds the results from its outputs."""
    sharding = backend().sharding
    n = len(const_args) + len(arg_avals)
    kept = [True] * len(const_args) + (list(kept) if kept is not None else [True] * len(arg_avals))
    return FastpathData(loaded, out_tree, [sharding] * n, [sharding] * len(out_avals), list(out_avals),
                        [True] * len(out_avals), kept, [None] * n, list(const_args))


def _shard_arg_fallback(x, sharding, layout):
    # jaxlib calls this only for a host argument of a multi-device executable, or a device array
    # with another layout: jaxprc hands jaxlib neither.
    raise RuntimeError(f"jaxprc's C++ dispatch was asked to place {type(x).__name__} on {sharding} "
                       "(a multi-device executable was given to it: a jaxprc bug)")


# One cache for every jaxprc function, apart from jax's: clear_caches empties only it.
CACHE = _jax.PjitFunctionCache(4096) if SUPPORTED else None


def make_function(name: str, fun, cache_miss, static_argnums, static_argnames, global_cache_key, registry):
    """A C++ ``PjitFunction``: calls hit its cache, misses call ``cache_miss``."""
    install_states()
    return _jax.pjit(name, fun, cache_miss, list(static_argnums), list(static_argnames), global_cache_key,
                     registry, _shard_arg_fallback, CACHE)
