"""Running programs with effects: runtime tokens, waiting for callbacks, their errors.

A program with *ordered* effects takes and returns a runtime token (an empty
array, see ``compiler/lowering.py``): each execution gets the token the
previous ordered execution returned, so XLA starts it only once that one has
finished, and ordered callbacks of separate calls run in call order. Every
execution with effects is waited for before the call returns, so that a
callback's output (a print) is complete, and its error raised, at the call
that ran it; ``effects_barrier()`` also waits for any still running (another
thread's).

An exception raised by a Python callback reaches us only as XLA's error text;
the callback wrappers record the exception itself (``record_callback_error``)
so that the error raised here carries it as ``__cause__``.
"""
from __future__ import annotations

import threading

__all__ = ["effects_barrier", "record_callback_error", "take_callback_error", "wait_for"]

_lock = threading.Lock()
_ordered_token = None          # the runtime token the last ordered execution returned
_running: list = []            # completion tokens of executions with effects not yet waited for
_recorded: list = []           # exceptions callbacks raised, not yet attached to an error


def ordered_token(make_initial):
    """The token to pass to the next ordered execution (``make_initial()`` makes the first)."""
    global _ordered_token
    with _lock:
        if _ordered_token is None:
            _ordered_token = make_initial()
        return _ordered_token


def set_ordered_token(token) -> None:
    global _ordered_token
    with _lock:
        _ordered_token = token


def started(completion) -> None:
    with _lock:
        _running.append(completion)


def finished(completion) -> None:
    with _lock:
        if completion in _running:
            _running.remove(completion)


def effects_barrier() -> None:
    """Wait until every host callback of every program started so far has run."""
    with _lock:
        running = list(_running)
        token = _ordered_token
    for completion in running:
        try:
            completion.block_until_ready()
        except Exception:  # noqa: BLE001 -- raised at the call that ran it
            pass
        finished(completion)
    if token is not None:
        try:
            token.block_until_ready()
        except Exception:  # noqa: BLE001
            pass


def record_callback_error(exc: BaseException) -> None:
    """Called by a callback wrapper on the thread running the callback, before it re-raises."""
    with _lock:
        del _recorded[:-7]     # a few: errors nobody collected must not pile up
        _recorded.append(exc)


def take_callback_error() -> BaseException | None:
    """The latest exception a callback raised (any thread), forgetting all recorded ones."""
    with _lock:
        found = _recorded[-1] if _recorded else None
        _recorded.clear()
    return found


def wait_for(results, handlers, first=None) -> list:
    """The handled results of a run started with tokens, once it has completed, so that what its
    callbacks print and raise comes at the call that ran it. ``first(outs)``, if given, sees the
    results before the wait (an ordered program hands on its token there) and returns them."""
    completion = results.consume_token()
    started(completion)
    outs = results.consume_with_handlers(handlers)
    if first is not None:
        outs = first(outs)
    try:
        completion.block_until_ready()
    finally:
        finished(completion)
    return outs
