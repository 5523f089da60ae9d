"""``jaxprc.config``: one table of every option, its value per process and its overrides per thread.

Each option is declared once, in ``OPTIONS``: its name, type, default, the
environment variable that sets it at import, the validator ``update`` runs on
new values, and one line of documentation (``jaxprc --help`` and
docs/architecture.md list them from here).

A value has two scopes, as in JAX:

- ``config.update(name, value)`` (or ``config.name = value``) sets the process's
  value, seen by every thread that does not override it;
- ``with config.override(name, value):`` (what ``jaxprc.enable_x64()``,
  ``debug_nans()``, ``default_device()``, ``transfer_guard()``... do) sets the
  calling thread's value for the block: other threads keep theirs.

Listeners ``(name, value, local)`` hear each change: jaxlib keeps states of its
own that it reads in C++ (the jit cache key's x64 flag and context, the transfer
guards), and the modules that own them mirror the options into them, the
process's value into jaxlib's global state and a thread's override into
jaxlib's thread-local one. The module lives in ``ir`` because dtypes (x64) and
the passes read options, and ``ir`` imports nothing above it.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
from typing import Any, Callable

__all__ = ["Config", "OPTIONS", "Option", "config"]


def _parse_bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on", "t", "y")


def _parse_int(text: str) -> int | str:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _choice(name, *allowed):
    def check(value):
        if value not in allowed:
            raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")
        return value
    return check


def _enum(*allowed):
    """A validator with JAX's message for its enum options."""
    def check(value):
        if value not in allowed:
            raise ValueError(f"new enum value must be in {list(allowed)}, got {value} of type {type(value)}.")
        return value
    return check


def _not_implemented_when_true(name):
    def check(value):
        if value:
            raise NotImplementedError(f"{name}=True: key reuse checking is not implemented in jaxprc")
        return value
    return check


def _valid_member(enum_name, *allowed):
    """A validator with JAX's message for its options whose values are a Python Enum's."""
    def check(value):
        if value not in allowed:
            raise ValueError(f"{value!r} is not a valid {enum_name}")
        return value
    return check


TRANSFER_GUARD_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")


def transfer_guard_level(value):
    """A transfer guard level name or None (the default: 'allow')."""
    if value is not None and value not in TRANSFER_GUARD_LEVELS:
        raise ValueError(f"new enum value must be None or in {list(TRANSFER_GUARD_LEVELS)}, got {value!r} "
                         f"of type {type(value)}.")
    return value


@dataclasses.dataclass(frozen=True)
class Option:
    """One declared option. ``parse`` reads the environment variable's text; ``validator`` checks
    (and may normalise) a value given to ``update`` or a context manager."""
    name: str
    type: type
    default: Any
    env: str | None
    doc: str
    validator: Callable[[Any], Any] | None = None
    parse: Callable[[str], Any] | None = None

    def check(self, value):
        if self.validator is not None:
            return self.validator(value)
        return bool(value) if self.type is bool else value

    def initial(self):
        """The value at import: the environment variable's if set, else the default."""
        text = os.environ.get(self.env) if self.env else None
        if not text:
            return self.default
        return self.check((self.parse or (_parse_bool if self.type is bool else str))(text))


def _bool(name, doc, default=False, env=True):
    return Option(name, bool, default, name.upper() if env else None, doc)


OPTIONS: dict[str, Option] = {o.name: o for o in [
    _bool("jax_enable_x64", "64-bit types: Python floats are float64, ints int64 (jaxprc.enable_x64)"),
    _bool("jax_debug_nans", "a NaN output of any op raises FloatingPointError naming the primitive"),
    _bool("jax_debug_infs", "an infinite output of any op raises FloatingPointError naming the primitive"),
    _bool("jax_disable_jit", "jit functions run their Python function op by op (jaxprc.disable_jit)"),
    _bool("jax_no_tracing", "a jit call that must trace raises instead (jaxprc.no_tracing)"),
    _bool("jax_no_execution", "running a compiled program raises (jaxprc.no_execution)"),
    _bool("jax_explain_cache_misses", "each jit cache miss logs why the cache missed"),
    _bool("jax_check_tracer_leaks", "each trace checks that none of its tracers outlives it (slow)"),
    _bool("jax_log_compiles", "each jit compilation is logged (logger 'jaxprc', WARNING)"),
    Option("jax_numpy_dtype_promotion", str, "standard", "JAX_NUMPY_DTYPE_PROMOTION",
           "'standard', or 'strict': no implicit promotion between dtypes",
           _choice("numpy_dtype_promotion", "standard", "strict")),
    Option("jax_numpy_rank_promotion", str, "allow", "JAX_NUMPY_RANK_PROMOTION",
           "'allow', 'warn' or 'raise' when jaxprc.numpy broadcasts arrays of different ranks",
           _choice("numpy_rank_promotion", "allow", "warn", "raise")),
    Option("jax_traceback_filtering", str, "auto", "JAX_TRACEBACK_FILTERING",
           "how tracebacks of errors raised through jit, grad, vmap, scan... hide jaxprc's frames: "
           "'off', 'tracebackhide', 'remove_frames', 'quiet_remove_frames' or 'auto' (compiler/engine/traceback_filtering.py)",
           _enum("off", "tracebackhide", "remove_frames", "quiet_remove_frames", "auto")),
    Option("jax_default_matmul_precision", object, None, None,
           "the precision of matrix products that name none (a lax.Precision, its name, or None)"),
    Option("jax_default_prng_impl", str, "threefry2x32", "JAX_DEFAULT_PRNG_IMPL",
           "the PRNG implementation of keys that name none, and of raw key data (jaxprc.random "
           "checks the name against its registry)"),
    Option("jax_legacy_prng_key", str, "allow", "JAX_LEGACY_PRNG_KEY",
           "raw uint32 key data passed to jaxprc.random functions: 'allow', 'warn' or 'error'",
           _valid_member("LegacyPrngKeyState", "allow", "warn", "error")),
    Option("jax_threefry_partitionable", bool, True, "JAX_THREEFRY_PARTITIONABLE",
           "threefry bits and splits hash each output's own counter (JAX's default); False: the "
           "original scheme, which hashes the two halves of one counter range"),
    Option("jax_debug_key_reuse", bool, False, "JAX_DEBUG_KEY_REUSE",
           "JAX's key reuse checking (KeyReuseError when a typed key is used twice): not implemented, "
           "only False is accepted", _not_implemented_when_true("jax_debug_key_reuse")),
    Option("jax_default_device", object, None, None,
           "the device device_put and computations use (one of jaxprc.devices(); None: the first)"),
    *(Option(f"jax_transfer_guard{suffix}", str, None, f"JAX_TRANSFER_GUARD{suffix.upper()}",
             f"the transfer guard level{what} ({', '.join(TRANSFER_GUARD_LEVELS)}; None: allow)",
             transfer_guard_level)
      for suffix, what in (("", " of all three directions (set-only)"),
                           ("_host_to_device", " of host-to-device transfers"),
                           ("_device_to_device", " of device-to-device transfers"),
                           ("_device_to_host", " of device-to-host transfers"))),
    _bool("jaxprc_verify_passes", "the pass pipelines verify the program after each pass (slow)"),
    _bool("jaxprc_cpp_dispatch", "cached jit calls and eager ops run through jaxlib's C++ dispatch", default=True),
    _bool("jaxprc_canonicalize", "programs are canonicalized (the canonicalize pass) before they are "
          "lowered (off: XLA's compile time does not gain from it, docs/workbench.md)"),
    Option("jaxprc_reproducer_dir", str, None, "JAXPRC_REPRODUCER_DIR",
           "when lowering or compiling a program fails, a reproducer file (jaxprc repro FILE replays "
           "it) is written there (None: none)"),
    Option("jaxprc_compilation_cache_dir", str, None, "JAXPRC_COMPILATION_CACHE_DIR",
           "the directory of the persistent compilation cache (None: off)"),
    Option("jaxprc_max_segment_eqns", int, 5000, "JAXPRC_MAX_SEGMENT_EQNS",
           "jit splits programs with more top-level equations into executables of at most this many "
           "(0 or None: never)", parse=_parse_int),
]}

_UNSET = object()


class _Overrides(threading.local):
    """The calling thread's overrides: option name -> value."""

    def __init__(self):
        self.values: dict[str, Any] = {}


class _Value:
    """The descriptor of one option on ``Config``: the thread's override, else the process's value."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, cfg, owner=None):
        if cfg is None:
            return self
        value = cfg._overrides.values.get(self.name, _UNSET)
        return cfg._values[self.name] if value is _UNSET else value

    def __set__(self, cfg, value) -> None:
        cfg._set_global(self.name, value)


class Config:
    """The options of ``OPTIONS`` as attributes (``config.jax_enable_x64``), read for the calling
    thread. ``update`` sets an option for the process; ``override`` for the calling thread."""

    # Called with (name, value, local) after each change; see the module's docstring.
    listeners: list = []

    def __init__(self):
        object.__setattr__(self, "_values", {name: o.initial() for name, o in OPTIONS.items()})
        object.__setattr__(self, "_overrides", _Overrides())

    def __setattr__(self, name: str, value) -> None:
        if name not in OPTIONS:
            raise AttributeError(f"Unrecognized config option: {name!r}")
        self._set_global(name, value)

    def _set_global(self, name: str, value) -> None:
        self._values[name] = value
        for listener in Config.listeners:
            listener(name, value, False)

    def _check(self, name: str, value):
        option = OPTIONS.get(name)
        if option is None:
            raise AttributeError(f"Unrecognized config option: {name!r}")
        return option.check(value)

    def update(self, name: str, value) -> None:
        """Set option ``name`` for the whole process (threads that override it keep their value)."""
        self._set_global(name, self._check(name, value))

    def read(self, name: str):
        if name not in OPTIONS:
            raise AttributeError(f"Unrecognized config option: {name!r}")
        return getattr(self, name)

    def override(self, name: str, value):
        """Context manager: option ``name`` set for the calling thread in the block, its previous
        state restored after. The value is checked now, as JAX's context managers do."""
        return self._override(name, self._check(name, value))

    @contextlib.contextmanager
    def _override(self, name: str, value):
        local = self._overrides.values
        saved = local.get(name, _UNSET)
        self._set_local(name, value)
        try:
            yield
        finally:
            self._set_local(name, saved)

    def _set_local(self, name: str, value) -> None:
        local = self._overrides.values
        if value is _UNSET:
            local.pop(name, None)
        else:
            local[name] = value
        for listener in Config.listeners:
            listener(name, getattr(self, name), True)

    def global_value(self, name: str):
        """The process's value of option ``name`` (what threads that do not override it read)."""
        return self._values[name]

    def overridden(self, name: str) -> bool:
        """Whether the calling thread overrides option ``name``."""
        return name in self._overrides.values

    @property
    def values(self) -> dict:
        """The calling thread's value of every option."""
        return {name: getattr(self, name) for name in OPTIONS}

    @property
    def x64_enabled(self) -> bool:
        return self.jax_enable_x64

    def trace_context(self) -> "TraceContext":
        """The calling thread's values of the options that change what tracing produces: part of
        every jit cache key, as in JAX (a program traced under one is not reused under another)."""
        return TraceContext(*[getattr(self, name) for name in TRACE_CONTEXT])


for _name in OPTIONS:
    setattr(Config, _name, _Value(_name))

# The options tracing reads (dtypes, promotion checks, default precision and PRNG): a jit function
# traced under other values of these is traced again.
TRACE_CONTEXT = ("jax_enable_x64", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion",
                 "jax_default_matmul_precision", "jax_default_prng_impl", "jax_threefry_partitionable")
TraceContext = collections.namedtuple("TraceContext", TRACE_CONTEXT)

config = Config()
