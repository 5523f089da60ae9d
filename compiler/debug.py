"""``jaxprc.debug``: ``print``, ``callback`` and ``breakpoint``, JAX's debugging callbacks.

Both stage a ``debug_callback`` equation (compiler/lax/callbacks.py) whose
function runs on the host with the values the program computes: under ``jit``
when the program runs, under ``grad`` in the forward pass on primal values,
under ``vmap`` once per batch element. ``ordered=True`` keeps them in program
order (across calls too). Arguments that are not arrays (strings, ...) are
passed to the function as they are, without being traced.
"""
from __future__ import annotations

import string
import sys

import numpy as np

from .callback import call_or_stage_later, debug_callback as callback, stage_debug_callback

__all__ = ["print", "callback", "breakpoint"]


class _FormatChecker(string.Formatter):
    """``str.format``'s parsing without formatting, to reject unused arguments as JAX does."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kw}. You may be passing an "
                "f-string (i.e, `f\"{x}\"`) into `jax.debug.print` and instead should pass in a "
                "regular string.")


class _Formatter:
    """Formats and writes one ``debug.print`` line with the numpy print options of its call."""

    __slots__ = ("fmt", "printoptions", "placeholders", "__weakref__")
    compares_by_value = True        # equal formatters make equal programs (FlatCallback)

    def __init__(self, fmt: str, printoptions: dict, placeholders: bool):
        self.fmt, self.printoptions, self.placeholders = fmt, printoptions, placeholders

    def _key(self):
        return self.fmt, tuple(sorted(self.printoptions.items(), key=lambda kv: kv[0])), self.placeholders

    def __eq__(self, other):
        return type(other) is _Formatter and self._key() == other._key()

    def __hash__(self):
        return hash(self.fmt)

    def __call__(self, *args, **kwargs):
        if self.placeholders:
            with np.printoptions(**self.printoptions):
                msg = self.fmt.format(*args, **kwargs)
        else:
            msg = " ".join((self.fmt, *(str(a) for a in args)))
        sys.stdout.write(msg + "\n")


def print(fmt: str | None = None, *args, ordered: bool = False, partitioned: bool = False,
          skip_format_check: bool = False, **kwargs):
    """Print ``fmt.format(*args, **kwargs)`` when the program runs, with the values it computes
    (not an f-string: formatting waits for the values). Also ``print(ordered=...)(fmt, ...)``."""
    def stage(fmt: str, *p_args, **p_kwargs):
        if not skip_format_check:
            _FormatChecker().format(fmt, *p_args, **p_kwargs)
        placeholders = bool(fmt) and next(iter(string.Formatter().parse(fmt)))[1] is not None
        formatter = _Formatter(fmt, dict(np.get_printoptions()), placeholders)
        stage_debug_callback(formatter, "debug.print", p_args, p_kwargs, ordered, partitioned)

    return call_or_stage_later(stage, fmt, args, kwargs, "debug_print")


from .debugger import breakpoint  # noqa: E402


from .sharding_view import visualize_array_sharding, visualize_sharding  # noqa: E402

__all__ += ["visualize_array_sharding", "visualize_sharding"]
