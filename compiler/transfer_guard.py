"""JAX's transfer guards: ``transfer_guard(level)`` and its per-direction forms, and the
``jax_transfer_guard*`` config options.

The guard itself is jaxlib's (``_jax.guard_lib``): every host-to-device transfer
jaxlib makes (``batched_device_put``, the arguments of a C++ dispatch hit) and
every device-to-host copy (``_single_device_array_to_np_array_did_copy``) reads
its level, thread-local first, then global, and raises, logs or lets it pass.
jaxprc's Python path and its C++ path both transfer through jaxlib, so setting
the state here guards both alike, with jaxlib's own error (``JaxRuntimeError``
"Disallowed host-to-device transfer: ..."), as JAX's guard does.

Implicit and explicit transfers are JAX's: ``device_put`` is an explicit
host-to-device transfer and ``device_get`` an explicit device-to-host one (they
mark themselves with ``explicit_scope``); everything else is implicit: numpy
arrays, numpy scalars and Python scalars passed to ``jit`` functions or ops,
``jnp.asarray`` of host data, ``np.asarray(array)``. On CPU an Array's memory
is host memory: reading it copies nothing and no guard applies (JAX's too).

The options are declared in ir/config.py; this module mirrors them into
jaxlib's state: the process's values into its global state, a thread's
overrides (the context managers) into its thread-local state. jaxlib's state
is one per process: a program that imports jax as well shares it, so a guard
set through either library guards both.
"""
from __future__ import annotations

import contextlib

from jaxlib import _jax

from .ir.config import TRANSFER_GUARD_LEVELS as LEVELS
from .ir.config import transfer_guard_level as check_level
from .ir.dtypes import config
from .runtime.array import explicit_transfers as explicit_scope  # noqa: F401  (device_put and device_get mark theirs)

__all__ = ["transfer_guard", "transfer_guard_device_to_device", "transfer_guard_device_to_host",
           "transfer_guard_host_to_device"]

_guard = _jax.guard_lib
_DIRECTIONS = ("host_to_device", "device_to_device", "device_to_host")
_PREFIX = "jax_transfer_guard_"


def _level(name):
    return None if name is None else getattr(_guard.TransferGuardLevel, name.upper())


def _on_config(name: str, value, local: bool) -> None:
    if name == "jax_transfer_guard":       # set-only: sets the three directions at once
        for d in _DIRECTIONS:
            config.update(_PREFIX + d, value)
    elif name.startswith(_PREFIX):
        direction = name[len(_PREFIX):]
        if local:       # the thread's override, or None (jaxlib then reads the global level)
            setattr(_guard.thread_local_state(), direction, _level(value) if config.overridden(name) else None)
        else:
            setattr(_guard.global_state(), direction, _level(value))


type(config).listeners.append(_on_config)
for _name in ("jax_transfer_guard", *(_PREFIX + d for d in _DIRECTIONS)):
    if config.read(_name) is not None:        # JAX_TRANSFER_GUARD=disallow ..., as JAX reads them
        _on_config(_name, config.read(_name), False)


@contextlib.contextmanager
def _thread_local(directions, level):
    check_level(level)
    with contextlib.ExitStack() as stack:
        for d in directions:
            stack.enter_context(config.override(_PREFIX + d, level))
        yield


def transfer_guard_host_to_device(new_val: str):
    """Context manager: the calling thread's guard level for host-to-device transfers ('allow',
    'log', 'disallow', 'log_explicit' or 'disallow_explicit'; the explicit levels also guard
    ``device_put``)."""
    return _thread_local(("host_to_device",), new_val)


def transfer_guard_device_to_device(new_val: str):
    """Context manager: the calling thread's guard level for device-to-device transfers."""
    return _thread_local(("device_to_device",), new_val)


def transfer_guard_device_to_host(new_val: str):
    """Context manager: the calling thread's guard level for device-to-host transfers (the
    explicit levels also guard ``device_get``)."""
    return _thread_local(("device_to_host",), new_val)


def transfer_guard(new_val: str):
    """Context manager: the calling thread's guard level for all transfers."""
    return _thread_local(_DIRECTIONS, new_val)
