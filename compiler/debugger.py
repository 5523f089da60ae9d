"""``jaxprc.debug.breakpoint``: stop where it is called and inspect the values the program computes.

Tracing records the calling frames (the user's, innermost first): their source
position, locals and globals. Traced values among them become operands of a
``debug_callback`` (compiler/debug.py), other values are kept as they are.
When the program runs, the callback rebuilds the frames with the traced
values' values and opens a command-line debugger on them, JAX's ``jdb``:

    p EXPR / pp EXPR   evaluate in the current frame (a bare expression too)
    u(p) / d(own)      move to the calling / called frame
    l(ist)             show the source around the current line
    w(here) / bt       the frames, innermost last
    c(ont(inue))       resume the program
    q(uit) / exit      exit the process (sys.exit(0), as jdb; under jit the run fails with it)

Under ``vmap`` it stops once per batch element, as every debug callback does.
"""
from __future__ import annotations

import cmd
import inspect
import pprint
import sys
import threading
import traceback
import warnings

from . import lax
from .callback import debug_callback, pure_callback
from .ir.tracing import Tracer, is_library_file
from .ir.tree_util import tree_flatten, tree_unflatten

__all__ = ["breakpoint"]


class Frame:
    """One Python frame of the traced code: where it is (its function's source lines and the
    current one's offset in them, None without source), its locals and globals."""

    def __init__(self, filename: str, lineno: int, source: list[str], offset: int | None,
                 local_vars: dict, global_vars: dict):
        self.filename, self.lineno, self.source, self.offset = filename, lineno, source, offset
        self.locals, self.globals = local_vars, global_vars


def _position(frame) -> tuple:
    """(filename, lineno, the source of the frame's function, the line's offset in it)."""
    try:
        lines, start = inspect.getsourcelines(frame)
        source = "".join(lines).split("\n")
        offset = frame.f_lineno - max(start, 1)
        if offset >= len(source):
            source, offset = [], None
    except (OSError, TypeError):
        source, offset = [], None
    return frame.f_code.co_filename, frame.f_lineno, source, offset


def _user_frames(filter_frames: bool, num_frames: int | None) -> list:
    """The calling Python frames, innermost first; with ``filter_frames`` without jaxprc's own."""
    found = []
    frame = sys._getframe(2)
    while frame is not None and (num_frames is None or len(found) < num_frames):
        if not (filter_frames and is_library_file(frame.f_code.co_filename)):
            found.append(frame)
        frame = frame.f_back
    return found


def _split(variables: dict) -> tuple:
    """(names, flattened values with their trees): a value that cannot be flattened is one leaf."""
    names, flat = list(variables), []
    with warnings.catch_warnings():    # (generators and such in other code's frames are leaves)
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in names:
            try:
                flat.append(tree_flatten(variables[name]))
            except Exception:  # noqa: BLE001 -- any object may sit in a frame
                flat.append(([variables[name]], None))
    return names, flat


def _rebuild(names, flat, values) -> dict:
    return {n: leaves[0] if tree is None else tree_unflatten(tree, [next(values) if isinstance(x, Tracer) else x
                                                                    for x in leaves])
            for n, (leaves, tree) in zip(names, flat)}


class Debugger(cmd.Cmd):
    """The ``(jdb)`` command loop over ``frames`` (innermost first)."""

    prompt = "(jdb) "
    intro = "Entering jdb:"

    def __init__(self, frames: list[Frame], stdin=None, stdout=None):
        super().__init__(stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
        self.use_rawinput = False        # read self.stdin, which may be any stream
        self.frames, self.index = frames, 0

    def _eval(self, expr: str):
        frame = self.frames[self.index]
        return eval(expr, dict(frame.globals), dict(frame.locals))

    def _show(self, expr: str, fmt) -> None:
        try:
            self.stdout.write(fmt(self._eval(expr)) + "\n")
        except Exception:  # noqa: BLE001 -- any error of the user's expression is reported
            self.stdout.write("*** " + traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip() + "\n")

    def default(self, line):
        self._show(line, repr)

    def do_p(self, arg):
        """p EXPR: evaluate and print EXPR in the current frame."""
        self._show(arg, repr)

    def do_pp(self, arg):
        """pp EXPR: evaluate and pretty-print EXPR in the current frame."""
        self._show(arg, pprint.pformat)

    def _context(self, radius: int) -> None:
        frame = self.frames[self.index]
        out = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for k in range(max(0, frame.offset - 1 - radius), min(len(frame.source), frame.offset + radius + 1)):
                out.append(("->  " if k == frame.offset else "    ") + frame.source[k])
        self.stdout.write("\n".join(out) + "\n")

    def do_up(self, arg):
        """u(p): move to the frame that called this one."""
        if self.index == len(self.frames) - 1:
            self.stdout.write("At topmost frame.\n")
        else:
            self.index += 1
        self._context(2)

    def do_down(self, arg):
        """d(own): move to the frame this one called."""
        if self.index == 0:
            self.stdout.write("At bottommost frame.\n")
        else:
            self.index -= 1
        self._context(2)

    def do_list(self, arg):
        """l(ist): the source around the current line."""
        self._context(5)

    def do_where(self, arg):
        """w(here): the frames, innermost last."""
        lines = ["Traceback:"]
        for frame in self.frames[::-1]:
            lines.append(f'  File "{frame.filename}", line {frame.lineno}')
            lines.append("    " + (frame.source[frame.offset].strip() if frame.offset is not None
                                    else "<no source>"))
        self.stdout.write("\n".join(lines) + "\n")

    def do_continue(self, arg):
        """c(ont(inue)): resume the program."""
        return True

    def do_quit(self, arg):
        """q(uit): exit the process."""
        sys.exit(0)

    do_u, do_d, do_l, do_w, do_bt = do_up, do_down, do_list, do_where, do_where
    do_c = do_cont = do_continue
    do_q = do_exit = do_EOF = do_quit


def breakpoint(*, backend=None, filter_frames: bool = True, num_frames: int | None = None,
               ordered: bool = False, token=None, **kwargs):
    """Enter the ``(jdb)`` debugger when the program reaches this point, on its values. Traced
    locals (and globals) of the calling frames show their values; other objects are shown as
    they were when traced. With ``token`` (a pytree of arrays) the stop comes once ``token`` is
    computed, and ``token`` is returned, to be used: as in JAX, an unused one drops the stop."""
    if backend not in (None, "cli") or kwargs:
        raise TypeError("breakpoint: only the command-line debugger (backend='cli') is available")
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    frames = _user_frames(filter_frames, num_frames)
    where = [_position(f) for f in frames]
    scopes = [(_split(dict(f.f_locals)), _split(dict(f.f_globals))) for f in frames]
    del frames
    traced = [x for pair in scopes for _, flat in pair for leaves, _ in flat for x in leaves
              if isinstance(x, Tracer)]

    def enter(*values):
        values = iter(values)
        rebuilt = [(_rebuild(*loc, values), _rebuild(*glob, values)) for loc, glob in scopes]
        with _LOCK:                # callbacks of other threads wait for this session
            Debugger([Frame(*w, loc, glob) for w, (loc, glob) in zip(where, rebuilt)]).cmdloop()

    if token is None:
        debug_callback(enter, *traced, ordered=ordered)
        return None
    token, traced = lax.stop_gradient((token, traced))
    return pure_callback(lambda tok, *values: (enter(*values), tok)[1], token, token, *traced)


_LOCK = threading.Lock()
