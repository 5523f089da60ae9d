"""Event listeners (JAX's ``jax.monitoring``): named moments of compilation reported to callbacks.

Code records an event (``record_event``), a duration (``record_event_duration_secs``), a time
span or a scalar; every listener registered for that kind is called with the event's name and
keyword metadata. It lives in the runtime layer so that the compile path, which is here, can
record; ``jaxprc.monitoring`` is its public face. The event names are JAX's where the moment
means the same (``elapsed``'s callers): a listener written for JAX hears jaxprc's compiles.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

# JAX's names for the compile path's moments (jax/_src/dispatch.py, compiler.py).
JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_USED_EVENT = "/jax/compilation_cache/tasks_using_cache"
CACHE_DISABLED_EVENT = "/jax/compilation_cache/task_disabled_cache"
CACHE_REQUEST_EVENT = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"
CACHE_RETRIEVAL_EVENT = "/jax/compilation_cache/cache_retrieval_time_sec"

_event: list[Callable] = []
_duration: list[Callable] = []
_time_span: list[Callable] = []
_scalar: list[Callable] = []


def record_event(event: str, **kwargs: str | int) -> None:
    """Report that ``event`` happened."""
    for callback in list(_event):
        callback(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Report that ``event`` took ``duration`` seconds."""
    for callback in list(_duration):
        callback(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs: str | int) -> None:
    """Report that ``event`` ran from ``start_time`` to ``end_time`` (seconds since the epoch)."""
    for callback in list(_time_span):
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Report a scalar value of ``event``."""
    for callback in list(_scalar):
        callback(event, value, **kwargs)


def register_event_listener(callback: Callable) -> None:
    _event.append(callback)


def register_event_duration_secs_listener(callback: Callable) -> None:
    _duration.append(callback)


def register_event_time_span_listener(callback: Callable) -> None:
    _time_span.append(callback)


def register_scalar_listener(callback: Callable) -> None:
    _scalar.append(callback)


def _unregister(listeners: list, callback: Callable, kind: str) -> None:
    if callback not in listeners:      # JAX asserts: the same error type, with a message
        raise AssertionError(f"unregister: {callback!r} is not a registered {kind} listener")
    listeners.remove(callback)


def unregister_event_listener(callback: Callable) -> None:
    _unregister(_event, callback, "event")


def unregister_event_duration_listener(callback: Callable) -> None:
    _unregister(_duration, callback, "event duration")


def unregister_event_time_span_listener(callback: Callable) -> None:
    _unregister(_time_span, callback, "event time span")


def unregister_scalar_listener(callback: Callable) -> None:
    _unregister(_scalar, callback, "scalar")


def clear_event_listeners() -> None:
    """Remove every listener, of every kind."""
    for listeners in (_event, _duration, _time_span, _scalar):
        listeners.clear()


# What the compile path logs when a timed moment ends, in JAX's words, on the ``jaxprc`` logger at
# the level ``compile_log_level()`` says (the compiler layer makes it WARNING under log_compiles).
_FINISHED = {
    JAXPR_TRACE_EVENT: "Finished tracing {} for jit in {:.9f} sec",
    JAXPR_TO_MLIR_MODULE_EVENT: "Finished jaxpr to MLIR module conversion {} in {:.9f} sec",
    BACKEND_COMPILE_EVENT: "Finished XLA compilation of {} in {:.9f} sec",
}
compile_log_level: Callable[[], int] = lambda: logging.DEBUG
_logger = logging.getLogger("jaxprc")


class elapsed:
    """``with elapsed(EVENT, name):`` records the block as JAX's ``log_elapsed_time`` does: a
    scalar (the start time) on entry, then the duration and the time span, with ``fun_name``,
    and logs it (``_FINISHED``)."""

    __slots__ = ("event", "fun_name", "start")

    def __init__(self, event: str, fun_name: str):
        # Modules are named jit_f (as in JAX's HLO); JAX's events name the function jit(f).
        if fun_name.startswith("jit_"):
            fun_name = f"jit({fun_name[4:]})"
        self.event, self.fun_name = event, fun_name

    def __enter__(self):
        self.start = time.time()
        record_scalar(self.event, self.start, fun_name=self.fun_name)

    def __exit__(self, *exc):
        end = time.time()
        level = compile_log_level()
        if _logger.isEnabledFor(level):
            _logger.log(level, _FINISHED[self.event].format(self.fun_name, end - self.start))
        record_event_duration_secs(self.event, end - self.start, fun_name=self.fun_name)
        record_event_time_span(self.event, self.start, end, fun_name=self.fun_name)
