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

The state is jaxlib's, one per process: a program that imports jax as well
shares it, so a guard set through either library guards both.
"""
from __future__ import annotations

import contextlib
import os

from jaxlib import _jax

from .ir.dtypes import config

__all__ = ["transfer_guard", "transfer_guard_device_to_device", "transfer_guard_device_to_host",
           "transfer_guard_host_to_device"]

_guard = _jax.guard_lib
LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
_DIRECTIONS = ("host_to_device", "device_to_device", "device_to_host")


def check_level(value):
    """A level name or None (the default: 'allow', or what the global option says)."""
    if value is not None and value not in LEVELS:
        raise ValueError(f"new enum value must be None or in {list(LEVELS)}, got {value!r} of type "
                         f"{type(value)}.")
    return value


def _level(name):
    return None if name is None else getattr(_guard.TransferGuardLevel, name.upper())


# -- config options: the global state ---------------------------------------------------
for _d in _DIRECTIONS:
    setattr(config, f"jax_transfer_guard_{_d}", None)
config.jax_transfer_guard = None      # set-only: sets the three directions at once
for _name in ("jax_transfer_guard", *(f"jax_transfer_guard_{d}" for d in _DIRECTIONS)):
    type(config).validators[_name] = check_level


def _on_config(name: str, value) -> None:
    if name == "jax_transfer_guard":
        for d in _DIRECTIONS:
            setattr(config, f"jax_transfer_guard_{d}", value)
    elif name.startswith("jax_transfer_guard_"):
        setattr(_guard.global_state(), name[len("jax_transfer_guard_"):], _level(value))


type(config).listeners.append(_on_config)
for _name in ("jax_transfer_guard", *(f"jax_transfer_guard_{d}" for d in _DIRECTIONS)):
    if os.environ.get(_name.upper()):        # JAX_TRANSFER_GUARD=disallow ..., as JAX reads them
        config.update(_name, os.environ[_name.upper()])


# -- context managers: the calling thread's state ----------------------------------------
@contextlib.contextmanager
def _thread_local(directions, level):
    check_level(level)
    state = _guard.thread_local_state()
    saved = [getattr(state, d) for d in directions]
    for d in directions:
        setattr(state, d, _level(level))
    try:
        yield
    finally:
        for d, old in zip(directions, saved):
            setattr(state, d, old)


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


@contextlib.contextmanager
def explicit_scope(direction: str):
    """Marks the transfers made in the block as explicit ones (``direction``: 'device_put' or
    'device_get'), which only the ``*_explicit`` levels guard."""
    state = _guard.thread_local_state()
    attr = f"explicit_{direction}"
    saved = getattr(state, attr)
    setattr(state, attr, True)
    try:
        yield
    finally:
        setattr(state, attr, saved)
