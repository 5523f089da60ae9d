"""``jaxprc.ref``: mutable array references (JAX's ``jax.ref``: ``new_ref``, ``Ref``, ``freeze``).

A ``Ref`` holds an array that ``ref[idx] = v`` replaces in part and ``ref[idx]`` reads. jaxprc
discharges refs while it traces: a ref holds its current value (an Array eagerly, a tracer inside
a traced function), a write builds the updated value with ``.at[idx].set``, and a read indexes
it, so the IR of a traced function that uses refs is pure (no ref types or effects in it) and
every transformation and the text format handle it as any other program.

The cost of that choice: a ref can only be used in the trace that made it. A ref created outside
a traced function (jit, grad, vmap, a loop or branch body) and read or written inside it would
need its value threaded in and out of the compiled program; jaxprc refuses that with
``RefEscapeError`` instead of baking in a stale value. Refs are not jit arguments either.
"""
from __future__ import annotations

import numpy as np

from .ir.core import AbstractValue, JaxprcError, ShapedArray
from .ir.tracing import current_builder, get_aval

__all__ = ['AbstractRef', 'Ref', 'addupdate', 'empty_ref', 'free_ref', 'freeze', 'get', 'new_ref',
           'set', 'swap']

_set = set   # the builtin, before ``set`` (the ref write) shadows it here


class RefEscapeError(JaxprcError):
    """A ref used in a trace other than the one that created it (or after ``freeze``)."""


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

    def _current(self, what: str):
        if self._value is None:
            raise RefEscapeError(f"{what}: the ref was freed or frozen (jaxprc.freeze / free_ref)")
        if current_builder() is not self._trace:
            raise RefEscapeError(
                f"{what}: the ref was created outside the traced function (jit, grad, vmap, or a "
                "loop or branch body) that uses it. jaxprc discharges refs while tracing, so a "
                "ref must be created inside the function that reads or writes it; pass its "
                "value in and return the new value instead.")
        return self._value

    aval = property(lambda self: AbstractRef(get_aval(self._current("Ref.aval"))))
    shape = property(lambda self: np.shape(self._current("Ref.shape")))
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


def _array(x):
    from . import numpy as jnp
    return jnp.asarray(x)


def new_ref(init_val, *, memory_space=None, kind=None) -> Ref:
    """A new ref holding ``init_val`` (an array or scalar)."""
    return Ref(_array(init_val), current_builder())


def empty_ref(ty, *, memory_space=None) -> Ref:
    """A new ref of type ``ty`` (a ShapedArray); its contents are zeros until written."""
    from . import numpy as jnp
    return new_ref(jnp.zeros(ty.shape, ty.dtype))


def free_ref(ref: Ref) -> None:
    """Release ``ref``; any later use raises."""
    ref._current("free_ref")
    ref._value = None


def freeze(ref: Ref):
    """The ref's value as an immutable array; the ref may not be used afterwards."""
    value = ref._current("freeze")
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
    current = ref._current("Ref write")
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
