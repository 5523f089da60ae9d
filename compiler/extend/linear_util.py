"""``jaxprc.extend.linear_util``: JAX's wrapped functions, for libraries that build on them.

A ``WrappedFun`` is a function with a stack of transformations applied lazily: each
transformation sees the arguments on the way in and the results on the way out, and may leave
auxiliary values in a ``Store`` that the caller reads after the call. jaxprc's own transformations
are passes over jaxprs; this module only serves libraries that compose functions this way
(``jaxprc.api_util.flatten_fun`` is one such transformation).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["StoreException", "Store", "WrappedFun", "wrap_init", "transformation",
           "transformation_with_aux", "transformation2", "transformation_with_aux2", "cache",
           "merge_linear_aux"]


class StoreException(Exception):
    pass


class Store:
    """A value a transformation leaves behind during a call, read once the call returned."""

    __slots__ = ("_val",)
    _EMPTY = object()

    def __init__(self):
        self._val = Store._EMPTY

    def store(self, val) -> None:
        if self._val is not Store._EMPTY:
            raise StoreException("Store occupied")
        self._val = val

    def reset(self) -> None:
        self._val = Store._EMPTY

    @property
    def val(self):
        if self._val is Store._EMPTY:
            raise StoreException("Store empty")
        return self._val

    def __nonzero__(self):
        return self._val is not Store._EMPTY

    __bool__ = __nonzero__


class WrappedFun:
    """``f`` with transformations: ``call_wrapped(*args)`` runs the outermost one first.

    ``transforms`` holds ``(transformation, static args)`` innermost first; ``params`` are
    keyword arguments passed to ``f`` on every call."""

    __slots__ = ("f", "transforms", "params", "debug_info", "__weakref__")

    def __init__(self, f: Callable, transforms=(), params=(), debug_info=None):
        self.f = f
        self.transforms = tuple(transforms)
        self.params = tuple(params)
        self.debug_info = debug_info

    @property
    def __name__(self):
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, transform: Callable, *static) -> "WrappedFun":
        return WrappedFun(self.f, self.transforms + ((transform, static),), self.params,
                          self.debug_info)

    def call_wrapped(self, *args, **kwargs):
        call = functools.partial(self.f, **dict(self.params))
        for transform, static in self.transforms:
            call = functools.partial(transform, call, *static)
        return call(*args, **kwargs)

    def __eq__(self, other):
        return (isinstance(other, WrappedFun) and self.f == other.f
                and self.transforms == other.transforms and self.params == other.params)

    def __hash__(self):
        return hash((self.f, self.transforms, self.params))

    def __repr__(self):
        names = ", ".join(getattr(t, "__name__", repr(t)) for t, _ in self.transforms)
        return f"Wrapped function: {self.__name__}; transformations: [{names}]"


def wrap_init(f: Callable, params=None, *, debug_info=None) -> WrappedFun:
    """A ``WrappedFun`` of ``f`` with no transformation yet (``params``: keyword arguments)."""
    return WrappedFun(f, (), tuple(sorted((params or {}).items())), debug_info)


def transformation2(gen: Callable) -> Callable:
    """``gen(f, *static, *args, **kwargs)`` (``f`` the function it transforms) as a
    transformation: ``t(wrapped_fun, *static)`` is the transformed WrappedFun."""
    return functools.wraps(gen)(lambda fun, *static: fun.wrap(gen, *static))


def transformation_with_aux2(gen: Callable, use_eq_store: bool = False) -> Callable:
    """As ``transformation2``, but ``gen(f, store, *static, *args)`` also stores an auxiliary
    value: ``t(fun, *static)`` returns ``(wrapped_fun, aux)`` where ``aux()`` reads it."""
    def apply(fun, *static):
        store = Store()
        return fun.wrap(gen, store, *static), lambda: store.val
    return functools.wraps(gen)(apply)


def _run_generator(gen, f, *args, **kwargs):
    """An old-style transformation: a generator that yields ``(args, kwargs)`` for ``f`` and
    receives ``f``'s result, then yields its own result."""
    it = gen(*args, **kwargs)
    f_args, f_kwargs = next(it)
    return it.send(f(*f_args, **f_kwargs))


def transformation(gen: Callable) -> Callable:
    """A generator transformation (``gen(*static, *args)`` yields ``(args, kwargs)``, receives
    the result, yields its own): ``t(fun, *static)`` is the transformed WrappedFun."""
    def apply_gen(f, *static_and_args, **kwargs):
        return _run_generator(gen, f, *static_and_args, **kwargs)
    apply_gen.__name__ = getattr(gen, "__name__", "transformation")
    return lambda fun, *static: fun.wrap(apply_gen, *static)


def transformation_with_aux(gen: Callable) -> Callable:
    """As ``transformation``; ``gen`` yields ``(result, aux)`` last, and ``t(fun, *static)``
    returns ``(wrapped_fun, aux)`` with ``aux()`` the auxiliary value of the last call."""
    def apply_gen(f, store, *static_and_args, **kwargs):
        out, aux = _run_generator(gen, f, *static_and_args, **kwargs)
        store.reset()
        store.store(aux)
        return out

    def apply(fun, *static):
        store = Store()
        return fun.wrap(apply_gen, store, *static), lambda: store.val
    return apply


def merge_linear_aux(aux1: Callable, aux2: Callable):
    """The auxiliary value of whichever of two branches ran (exactly one must have)."""
    try:
        out1 = aux1()
    except StoreException:
        try:
            return False, aux2()
        except StoreException:
            raise StoreException("neither store occupied") from None
    try:
        aux2()
    except StoreException:
        return True, out1
    raise StoreException("both stores occupied")


def cache(call: Callable, *, explain: Any = None) -> Callable:
    """Memoize ``call(fun, *args)`` on the wrapped function and the (hashable) args."""
    table: dict = {}

    @functools.wraps(call)
    def memoized(fun: WrappedFun, *args):
        key = (fun, args)
        if key not in table:
            table[key] = call(fun, *args)
        return table[key]
    memoized.cache_clear = table.clear
    return memoized
