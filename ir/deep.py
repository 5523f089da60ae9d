"""Deep recursion without a recursion limit: the one mechanism for walks over deeply nested programs.

Programs legitimately nest (a cond in a cond in a scan body ...); the parser is
an LALR automaton, but printing, verifying, comparing, tracing, passes and
lowering walk sub-jaxprs recursively, a few Python frames per level, so a
program nested a few hundred levels deep exceeds Python's default recursion
limit (1000) on the caller's thread. ``deep_entry`` wraps such an entry point:
the ordinary call runs as it is (no thread hop, no cost on the fast paths); only
when it fails with RecursionError is the call run again, from scratch, on a
helper thread with a large stack (``STACK_BYTES``) and a recursion limit of
``RECURSION_LIMIT`` frames. The entry points are pure, or (tracing) re-run the
user's function once more, as a retrace would.

Where nesting is never legitimate (tuples nested in param text), the parser
rejects it at a documented depth instead.
"""
from __future__ import annotations

import functools
import sys
import threading

STACK_BYTES = 512 * 2**20      # virtual: only the pages a deep walk touches are committed
RECURSION_LIMIT = 200_000      # Python frames; well within STACK_BYTES (2.6 KiB a frame)

_lock = threading.Lock()
_active = 0                    # helper threads running; the raised limit is restored after the last
_saved_limit = None
_on_helper = threading.local()


def caused_by_recursion(e: BaseException) -> bool:
    """Whether ``e`` is, or was raised while handling, a RecursionError (wrappers that turn
    failures into their own error types keep the cause)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, RecursionError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def on_deep_stack() -> bool:
    """Whether this thread is a helper with the large stack (nested entry points then run inline)."""
    return getattr(_on_helper, "active", False)


def call_on_deep_stack(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a helper thread with a large stack and a high recursion limit;
    its result, or its exception re-raised here."""
    global _active, _saved_limit
    if on_deep_stack():
        return fn(*args, **kwargs)
    outcome = {}

    def work():
        _on_helper.active = True
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 -- handed to the calling thread
            outcome["error"] = e

    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _active += 1
        previous = threading.stack_size(STACK_BYTES)
        try:
            thread = threading.Thread(target=work, name="jaxprc-deep-stack", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    try:
        thread.join()
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved_limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def deep_entry(fn=None, *, retry_if=None):
    """Decorate an entry point that may recurse deeply: run it normally, and once more on the
    large stack if it fails by recursion. ``retry_if()`` (when given) says whether a retry on
    another thread is sound (tracing: only with no trace of the caller's thread active)."""
    if fn is None:
        return functools.partial(deep_entry, retry_if=retry_if)

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        # Only the outermost entry point of a thread retries: an inner one (the printer printing
        # a sub-jaxpr) lets the RecursionError reach it, so a deep walk is redone once, not once
        # per level.
        if on_deep_stack() or getattr(_on_helper, "inside", False):
            return fn(*args, **kwargs)
        _on_helper.inside = True
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if not caused_by_recursion(e) or (retry_if is not None and not retry_if()):
                raise
        finally:
            _on_helper.inside = False
        return call_on_deep_stack(fn, *args, **kwargs)
    return entry
