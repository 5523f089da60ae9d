"""A Python function called from a program on the host, held as a param of the callback primitives.

It prints by name (``HostCallback(name="my_fn")``) and parses back to a
callback of that name with no function: running it raises
``CallbackUnavailableError`` unless the caller binds the name to a function
(``parse(text, callbacks={"my_fn": my_fn})`` or ``bind_callbacks``). Two
callbacks are equal when they hold the same function object (identity: a
function's own ``==`` is not asked), or, both unbound, when they have the same
name; so CSE merges calls of one function only and compiled programs are
shared only by calls of the same functions. The API's callbacks hold a
``FlatCallback`` (the user's function with the structure of its arguments),
compared by the user function's identity and the structure.
"""
from __future__ import annotations

from typing import Callable, Mapping

from .core import ClosedJaxpr, Jaxpr, JaxprcError, RuleNotPrinted, Thunk, param_type, subjaxprs
from .tree_util import tree_leaves, tree_unflatten

__all__ = ["HostCallback", "FlatCallback", "CallbackUnavailableError", "bind_callbacks", "program_callbacks",
           "check_callbacks_bound", "callback_name"]


class CallbackUnavailableError(JaxprcError):
    """A program calls a host callback that has no Python function (it was read from text)."""


def callback_name(fn) -> str:
    """The name a function prints under: its qualified name, or its type's name."""
    fn = getattr(fn, "func", fn)          # functools.partial: the wrapped function's name
    return getattr(fn, "__qualname__", None) or type(fn).__name__


@param_type
class HostCallback:
    """``fn`` (or None when read from text) under ``name``; calling it calls ``fn``."""

    _fields = ("name",)                   # the text form's record fields
    __slots__ = ("name", "fn")
    called_by_program = True              # a subclass naming a rule of a pass (custom_vmap) is not

    def __init__(self, name: str, fn: Callable | None = None):
        if not isinstance(name, str):
            raise TypeError(f"HostCallback: name must be a string, got {name!r}")
        self.name, self.fn = name, fn

    def __call__(self, *args):
        if self.fn is None:
            raise _unavailable([self.name])
        return self.fn(*args)

    def __eq__(self, other):
        if type(other) is not HostCallback:
            return NotImplemented
        if self.fn is None or other.fn is None:
            return self.fn is other.fn and self.name == other.name
        same = self.fn is other.fn or (type(self.fn) is FlatCallback and self.fn == other.fn)
        return same and self.name == other.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"HostCallback(name={self.name!r}{'' if self.fn is not None else ', unbound'})"


class FlatCallback:
    """A user's function called on a program's flat operands: ``static`` leaves (non-arrays, as
    ``(position, value)`` pairs) merged back among them, unflattened into ``(args, kwargs)`` by
    ``in_tree``; its results flattened. Equal when the function is the same object and the
    structure and static values are equal: tracing a function again gives an equal program."""

    __slots__ = ("callback", "in_tree", "static", "__weakref__")

    def __init__(self, callback: Callable, in_tree, static: tuple = ()):
        self.callback, self.in_tree, self.static = callback, in_tree, tuple(static)

    def __call__(self, *flat_args):
        static = dict(self.static)
        it = iter(flat_args)
        leaves = [static[i] if i in static else next(it) for i in range(len(static) + len(flat_args))]
        args, kwargs = tree_unflatten(self.in_tree, leaves)
        return tree_leaves(self.callback(*args, **kwargs))

    def __eq__(self, other):
        if type(other) is not FlatCallback:
            return NotImplemented
        same_fn = self.callback is other.callback or (
            getattr(self.callback, "compares_by_value", False) and self.callback == other.callback)
        return same_fn and self.in_tree == other.in_tree and _same_static(self.static, other.static)

    def __hash__(self):
        return hash((self.in_tree, len(self.static)))


def _same_static(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for (i, x), (j, y) in zip(a, b):
        if i != j or type(x) is not type(y):
            return False
        try:
            if not bool(x == y):
                return False
        except Exception:  # noqa: BLE001 -- a value without a usable ==
            if x is not y:
                return False
    return True


def _host_callbacks(program: ClosedJaxpr | Jaxpr, force_rules: bool = False):
    """Every HostCallback param of ``program``, sub-jaxprs included (each jaxpr object once), and
    of its custom rules' jaxprs where formed (or formed now, with ``force_rules``: only for
    parsed programs, whose rules are their text's definitions, not user code)."""
    seen: set[int] = set()
    stack = [program.jaxpr if isinstance(program, ClosedJaxpr) else program]
    while stack:
        jaxpr = stack.pop()
        if id(jaxpr) in seen:
            continue
        seen.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            for value in eqn.params.values():
                for x in (value if isinstance(value, tuple) else (value,)):
                    if isinstance(x, HostCallback):
                        yield x
                    elif isinstance(x, Thunk) and (x.forced or force_rules):
                        try:
                            stack.append(x().jaxpr)
                        except RuleNotPrinted:
                            pass
            stack.extend(sub.jaxpr for sub in subjaxprs(eqn))


def _unavailable(names) -> CallbackUnavailableError:
    listed = ", ".join(f"'{n}'" for n in names)
    example = ", ".join(f"'{n}': fn" for n in names)
    return CallbackUnavailableError(
        f"the host callback(s) {listed} have no Python function: the program was read from text, "
        f"which names callbacks only. Bind them by name: jaxprc.ir.parse(text, callbacks={{{example}}}) "
        "or jaxprc.ir.bind_callbacks(program, {...}).")


def check_callbacks_bound(program: ClosedJaxpr | Jaxpr) -> None:
    """Raise CallbackUnavailableError naming the callbacks of ``program`` without a function."""
    names = sorted({cb.name for cb in _host_callbacks(program) if cb.fn is None and cb.called_by_program})
    if names:
        raise _unavailable(names)


def program_callbacks(program: ClosedJaxpr | Jaxpr) -> dict[str, Callable]:
    """name -> function of the bound callbacks of ``program``: what ``bind_callbacks`` takes to
    bind the same functions into the program read back from its text."""
    return {cb.name: cb.fn for cb in _host_callbacks(program) if cb.fn is not None}


def bind_callbacks(program: ClosedJaxpr | Jaxpr, callbacks: Mapping[str, Callable]) -> int:
    """Give the unbound callbacks of the parsed ``program`` (sub-jaxprs and rules included) the
    functions named in ``callbacks``, in place; returns how many were bound. Names the program does not use are
    an error (a misspelt name would otherwise fail only when the program runs)."""
    used: set[str] = set()
    count = 0
    for cb in _host_callbacks(program, force_rules=True):
        used.add(cb.name)
        if cb.fn is None and cb.name in callbacks:
            cb.fn = callbacks[cb.name]
            count += 1
    unknown = sorted(set(callbacks) - used)
    if unknown:
        raise KeyError(f"bind_callbacks: the program calls no callback named {', '.join(map(repr, unknown))}; "
                       f"it calls {', '.join(map(repr, sorted(used))) or 'none'}")
    return count
