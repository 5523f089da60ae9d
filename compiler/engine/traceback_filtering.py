"""Tracebacks that show the user's frames: JAX's ``jax_traceback_filtering``.

An error raised while jaxprc runs a user's function (a shape error in a jitted function, an
exception in a scan body) unwinds through many of jaxprc's own frames. Every public entry point
(``jit``, ``grad``, ``vmap``, ``scan``, a ``custom_vjp`` call, ...) is wrapped in
``api_boundary``; the outermost boundary an error crosses edits its traceback as the option says:

- ``"off"``: left as it is;
- ``"tracebackhide"``: left as it is, jaxprc's frames marked with a ``__tracebackhide__`` local
  (what IPython and pytest hide);
- ``"remove_frames"``: jaxprc's frames removed; the whole traceback, from the caller's module
  down, kept as the ``__cause__`` of the error (an ``UnfilteredStackTrace``);
- ``"quiet_remove_frames"``: jaxprc's frames removed, and a note saying so;
- ``"auto"`` (the default): ``"tracebackhide"`` under IPython, else ``"quiet_remove_frames"``.

jaxprc's frames are those of its own files (``ir``, ``passes``, ``compiler``, ``runtime``) and
of libraries that registered theirs (``jaxprc.extend.source_info_util.register_exclusion``).
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types

from jaxprc import runtime
from jaxprc.ir.config import config
from jaxprc.ir.tracing import is_library_file

__all__ = ["UnfilteredStackTrace", "api_boundary", "filter_traceback", "is_hidden_frame"]

_RUNTIME_DIR = os.path.dirname(os.path.abspath(runtime.__file__)) + os.sep

FILTERED_NOTE = ("--------------------\nFor simplicity, jaxprc has removed its internal frames from the "
                 "traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.")
_UNFILTERED_TRAILER = ("The stack trace below excludes jaxprc's internal frames.\n"
                       "The preceding is the original exception that occurred, unmodified.\n"
                       "\n--------------------")


class UnfilteredStackTrace(Exception):
    """The ``__cause__`` of an error under ``"remove_frames"``: its message, and as its own
    traceback every frame the error passed through, jaxprc's included."""


def is_hidden_frame(frame) -> bool:
    """Whether a frame is jaxprc's (or a registered library's), not the user's."""
    name = frame.f_code.co_filename
    return is_library_file(name) or name.startswith(_RUNTIME_DIR)


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the hidden frames' entries (a new chain; ``tb`` is not changed)."""
    entries = []
    while tb is not None:
        if not is_hidden_frame(tb.tb_frame):
            entries.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(entries):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _mode() -> str:
    mode = config.jax_traceback_filtering
    if mode == "auto":
        return "tracebackhide" if "IPython" in sys.modules and _in_ipython() else "quiet_remove_frames"
    return mode


def _in_ipython() -> bool:
    try:
        return sys.modules["IPython"].get_ipython() is not None
    except Exception:       # an IPython too old or partly imported: no shell to serve
        return False


def _inside_outer_boundary(frame) -> bool:
    """Whether a boundary is running above ``frame``: only the outermost one edits the error."""
    while frame is not None:
        if frame.f_code is _BOUNDARY_CODE:
            return True
        frame = frame.f_back
    return False


def _with_callers(tb: types.TracebackType, frame) -> types.TracebackType:
    """``tb`` preceded by the frames that called the boundary, up to the first module-level one
    (the script or the REPL line that started it all)."""
    callers = []
    while frame is not None:
        callers.append(frame)
        if frame.f_code.co_name == "<module>":
            break
        frame = frame.f_back
    for f in callers:
        tb = types.TracebackType(tb, f, f.f_lasti, f.f_lineno)
    return tb


def _edit(e: BaseException, caller) -> None:
    """Edit the traceback of ``e``, which the outermost boundary (called from ``caller``) caught."""
    mode = _mode()
    tb = e.__traceback__
    if mode == "off" or tb is None:
        return
    if mode == "tracebackhide":
        while tb is not None:
            if is_hidden_frame(tb.tb_frame):
                tb.tb_frame.f_locals["__tracebackhide__"] = True
            tb = tb.tb_next
        return
    e.with_traceback(filter_traceback(tb))
    if mode == "quiet_remove_frames":
        e.add_note(FILTERED_NOTE)
        return
    # "remove_frames": the unfiltered traceback becomes the cause, and takes over the old one
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    unfiltered = UnfilteredStackTrace(f"{text}\n\n{_UNFILTERED_TRAILER}")
    unfiltered.with_traceback(_with_callers(tb, caller))
    unfiltered.__cause__, unfiltered.__context__ = e.__cause__, e.__context__
    unfiltered.__suppress_context__ = e.__suppress_context__
    e.__cause__, e.__context__ = unfiltered, None


def api_boundary(fun):
    """``fun`` as a public entry point: an ``Exception`` raised below it and not caught by an
    outer boundary leaves with its traceback filtered (see the module's docstring)."""
    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (read by IPython and pytest)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            caller = sys._getframe(1)
            if not _inside_outer_boundary(caller):
                _edit(e, caller)
            del caller
            raise
    return boundary


_BOUNDARY_CODE = api_boundary(lambda: None).__code__     # the code every boundary's frame runs
