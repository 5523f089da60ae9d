"""``jaxprc.ref``: mutable array references (JAX's ``jax.ref``: ``new_ref``, ``Ref``, ``freeze``).

A ``Ref`` holds an array that ``ref[idx] = v`` replaces in part and ``ref[idx]`` reads. jaxprc
discharges refs while it traces: a ref holds its current value (an Array eagerly, a tracer inside
a traced function), a write builds the updated value with ``.at[idx].set``, and a read indexes
it, so the IR of a traced function that uses refs is pure (no ref types or effects in it) and
every transformation and the text format handle it as any other program.

A ref passed to a ``jit`` function as an argument (or inside a pytree argument) is threaded
through the program: its value goes in as an operand, the function sees a ref around the traced
value, and the value it holds at the end comes out as an extra result that ``jit`` writes back
into the caller's ref (``thread_refs`` below). A ref of the calling code that the function uses
(closed over: an eager ref, or a trace's ref written in a nested jit) is threaded the same way,
as JAX threads a jit function's closed-over refs: tracing finds it (``Unthreaded``), and every
call passes its current value in and writes its final value back (``discover_closed_refs``).
``vmap`` threads refs too: an argument ref batched along its in_axes, a closed-over one unbatched
(a batched write into it is JAX's error); so does ``grad`` for refs it does not differentiate
(closed over, or arguments outside argnums; a write of a differentiated value is JAX's error).

A ref written in the body of a loop or conditional (``scan``, ``fori_loop``, ``while_loop``,
``cond``, ``switch``) is threaded through it the same way: its value joins the loop's carry (the
conditional's operands and results), found by tracing the bodies once without it
(``lax.control_flow.ref_threading``). ``make_jaxpr``, ``eval_shape``, ``jvp``, ``vjp`` and
``linearize``, whose traces are made for one call, read a closed-over eager ref as a constant
(``reading_closed_refs``); a write to it there raises ``RefEscapeError``: jaxprc's IR has no ref
types, so pass the ref as an argument instead (its value in, its final value out).
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .ir.core import AbstractValue, ShapedArray
from .ir.tracing import current_builder, get_aval, trace_state
from .ir.tree_util import register_pytree_node, tree_flatten, tree_map
from .lax.control_flow.ref_threading import RefEscapeError, Unthreaded

__all__ = ['AbstractRef', 'Ref', 'addupdate', 'empty_ref', 'free_ref', 'freeze', 'get', 'new_ref',
           'set', 'swap']

class AbstractRef(AbstractValue):
    """The type of a ref: a reference to an array of type ``inner_aval``."""

    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval: ShapedArray):
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: self.inner_aval.ndim)
    size = property(lambda self: self.inner_aval.size)

    def __eq__(self, other):
        return isinstance(other, AbstractRef) and self.inner_aval == other.inner_aval

    def __hash__(self):
        return hash(("Ref", self.inner_aval))

    def str_short(self) -> str:
        return f"Ref{{{self.inner_aval.str_short()}}}"

    def __repr__(self):         # JAX's form: Ref{float32[3]}
        inner = self.inner_aval
        return f"Ref{{{inner.dtype.name}[{','.join(map(str, inner.shape))}]}}"


class Ref:
    """A mutable array: ``ref[...]`` reads it, ``ref[idx] = v`` writes part of it."""

    __slots__ = ("_value", "_trace", "__weakref__")

    def __init__(self, value, trace):
        self._value = value
        self._trace = trace

    def _current(self, what: str, write: bool = False):
        """The value, if this ref may be used here: in the trace that created it, or (to read) in
        a trace nested in that one, which then closes over the value at this program point."""
        if self._value is None:
            raise RefEscapeError(f"{what}: the ref was freed or frozen (jaxprc.freeze / free_ref)")
        builder = current_builder()
        if builder is self._trace or (not write and (self._trace in trace_state.stack
                                                     or self._readable_here())):
            return self._value
        where = ("a traced function that does not thread it (jit, vmap, grad and loops do; make_jaxpr, "
                 "eval_shape, jvp, vjp and linearize only read it; checkpoint does not)")
        message = (f"{what}: the ref is used inside {where}. jaxprc discharges refs while tracing, "
                   "so such a ref's value cannot flow in and out of that function: pass the ref "
                   "to a jit function as an argument, or pass its value in and return the new value.")
        if self._trace is None or self._trace in trace_state.stack:    # a loop around may thread it
            raise Unthreaded(message, self, write)
        raise RefEscapeError(message)

    def _readable_here(self) -> bool:
        """Whether a one-shot trace pinned this ref for reading and this is that trace (not a
        trace nested in it, which might be kept: jit's, checkpoint's)."""
        return any(self is r for r in _readable()) and len(trace_state.stack) == 1

    aval = property(lambda self: AbstractRef(_type_of(self._current("Ref.aval"))))
    shape = property(lambda self: tuple(self._current("Ref.shape").shape))
    dtype = property(lambda self: self._current("Ref.dtype").dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))

    def __getitem__(self, idx):
        return get(self, idx)

    def __setitem__(self, idx, value):
        set(self, idx, value)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        if self._value is None:
            return "Ref(<freed>)"
        text = repr(self._value)     # an Array prints as Array([...], dtype=...)
        return "Ref" + text[len("Array"):] if text.startswith("Array(") else f"Ref({text})"


def _type_of(value):
    from .random import PRNGKeyArray
    return value.aval if isinstance(value, PRNGKeyArray) else get_aval(value)


def _array(x):
    from . import numpy as jnp
    from .random import PRNGKeyArray
    return x if isinstance(x, PRNGKeyArray) else jnp.asarray(x)     # refs may hold typed keys


def new_ref(init_val, *, memory_space=None, kind=None) -> Ref:
    """A new ref holding ``init_val`` (an array or scalar)."""
    return Ref(_array(init_val), current_builder())


def empty_ref(ty, *, memory_space=None) -> Ref:
    """A new ref of type ``ty`` (a ShapedArray); its contents are zeros until written."""
    from . import numpy as jnp
    return new_ref(jnp.zeros(ty.shape, ty.dtype))


def free_ref(ref: Ref) -> None:
    """Release ``ref``; any later use raises."""
    ref._current("free_ref", write=True)
    ref._value = None


def freeze(ref: Ref):
    """The ref's value as an immutable array; the ref may not be used afterwards."""
    value = ref._current("freeze", write=True)
    ref._value = None
    return value


def _normalize(idx):
    return () if idx is Ellipsis else idx


def get(ref: Ref, idx=()):
    """``ref[idx]``."""
    value = ref._current("Ref read")
    idx = _normalize(idx)
    return value if idx == () else value[idx]


def _check_value(current, old, value, op: str) -> None:
    if value.shape != old.shape:
        raise ValueError(f"Invalid shape for `{op}`. Ref shape: {current.shape}. Expected shape: "
                         f"{old.shape}. Value shape: {value.shape}. ")
    if value.dtype != old.dtype:
        raise ValueError(f"Invalid dtype for `{op}`. Ref dtype: {old.dtype}. Value dtype: {value.dtype}. ")


def _write(ref: Ref, idx, value, op: str, combine):
    """Replace ``ref[idx]`` by ``combine(old, value)``; return ``old``. ``value`` must have exactly
    the indexed part's shape and dtype (no broadcasting, no promotion: JAX's rule)."""
    current = ref._current("Ref write", write=True)
    idx = _normalize(idx)
    old = current if idx == () else current[idx]
    value = _array(value)
    _check_value(current, old, value, op)
    new = combine(old, value)
    ref._value = new if idx == () else current.at[idx].set(new)
    return old


def swap(ref: Ref, idx, value):
    """Write ``value`` at ``ref[idx]`` and return what was there."""
    return _write(ref, idx, value, "swap", lambda old, new: new)


def set(ref: Ref, idx, value) -> None:   # noqa: A001 - JAX's name
    """``ref[idx] = value``."""
    _write(ref, idx, value, "swap", lambda old, new: new)


def addupdate(ref: Ref, idx, value) -> None:
    """``ref[idx] += value``, in place."""
    _write(ref, idx, value, "addupdate", lambda old, new: old + new)


# ------------------------------------------------------------ refs as jit arguments


class _RefValue:
    """Where a ref was in a jit call's arguments: its value, as a pytree node, so that it is an
    operand of the program and the cache key tells ref positions from plain arrays."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


register_pytree_node(_RefValue, lambda r: ((r.value,), None), lambda _, kids: _RefValue(kids[0]))


def _is_ref_value(x) -> bool:
    return isinstance(x, _RefValue)


def has_refs(leaves) -> bool:
    return any(isinstance(x, Ref) for x in leaves)


def unwrap_refs(args, kwargs):
    """``(args, kwargs)`` with each ref replaced by a ``_RefValue`` of its value, and the refs in
    that order. A ref passed twice is refused (one program operand cannot be two refs)."""
    refs = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, Ref)]
    if len({id(r) for r in refs}) != len(refs):
        raise ValueError("a jit function was given the same Ref twice among its arguments; jaxprc "
                         "threads each ref argument through the program once, so refs may not alias")
    args, kwargs = tree_map(lambda x: _RefValue(x._current("jit argument")) if isinstance(x, Ref) else x,
                            (args, kwargs))
    return args, kwargs, refs


# The keyword by which a threaded function takes the values of the refs of the calling code it uses.
CLOSED_VALUES = "_jaxprc_closed_ref_values"


def thread_refs(fun, closed=()):
    """``fun`` taking ``_RefValue``s where refs were, and the values of ``closed`` (refs of the
    calling code that it uses: eager refs, or a trace's refs written in a nested jit) by the
    keyword ``CLOSED_VALUES``; returning ``(results, the argument refs' final values, the closed
    refs' final values)``: the function ``jit`` compiles for a call that uses refs. While it runs,
    each closed ref holds its traced value; afterwards it holds its own value again."""
    @functools.wraps(fun)
    def threaded(*args, **kwargs):
        values = kwargs.pop(CLOSED_VALUES, ())
        builder = current_builder()
        saved = [(r._value, r._trace) for r in closed]
        for r, v in zip(closed, values):
            r._value, r._trace = v, builder
        made = []

        def as_ref(x):
            made.append(Ref(x.value, builder))
            return made[-1]
        try:
            args, kwargs = tree_map(lambda x: as_ref(x) if _is_ref_value(x) else x, (args, kwargs),
                                    is_leaf=_is_ref_value)
            outs = fun(*args, **kwargs)
            return (outs, [r._current("the end of the jit function that was passed it") for r in made],
                    [r._current("the end of the jit function that uses it") for r in closed])
        finally:
            for r, (value, trace) in zip(closed, saved):
                r._value, r._trace = value, trace
    return threaded


def discover_closed_refs(call, closed: list, arg_refs=(), name: str = "fun"):
    """``call()``, run again with each ref of the calling code that it turns out to use (a read
    of an eager ref, or a write of a ref of the trace around) added to ``closed``; ``call``
    threads the refs of ``closed`` through the traced function (``thread_refs``). A ref that
    is also among the arguments (``arg_refs``) is JAX's ValueError: two operands, one ref."""
    while True:
        try:
            return call()
        except Unthreaded as e:
            ref = e.ref
            if ref._trace is not current_builder() or any(ref is r for r in closed):
                raise
            if any(ref is r for r in arg_refs):
                raise ValueError(f"when tracing {name} for jit, a mutable array reference of type "
                                 f"{ref.aval!r} was both closed over and passed as an argument") from None
            closed.append(ref)


_one_shot = threading.local()


def _readable() -> list:
    """The eager refs that the one-shot trace running now may read (``reading_closed_refs``)."""
    return getattr(_one_shot, "refs", ())


def reading_closed_refs(transform):
    """``transform`` (jvp, vjp, linearize, eval_shape, make_jaxpr: a trace made for one call and
    not kept) where the function it traces reads eager refs it closes over, as JAX's do: each
    such ref is then readable in that trace (not in traces nested in it, which may be kept),
    its current value a constant of it. A write to one still raises: the trace could not write
    it back. Only at top level: inside a trace, the traces around thread the ref."""
    @functools.wraps(transform)
    def reading(*args, **kwargs):
        pinned: list = []
        while True:
            saved = _readable()
            _one_shot.refs = [*saved, *pinned]
            try:
                return transform(*args, **kwargs)
            except Unthreaded as e:
                if (e.write or e.ref._trace is not None or current_builder() is not None
                        or any(e.ref is r for r in pinned)):
                    raise
                pinned.append(e.ref)
            finally:
                _one_shot.refs = saved
    return reading


def write_back(refs, values) -> None:
    for r, v in zip(refs, values):
        r._value = v
