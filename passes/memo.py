"""Sub-jaxpr transformations memoised on the identity of the jaxpr they transform.

Control-flow rules transform their bodies, and several do it more than once (a fixpoint over
which carries have nonzero tangents, are unknown or are batched). Each of those calls transforms
the loops nested in the body again, so without memoising a body nested d levels deep is
transformed 2**d times. Keyed on the body object and the other arguments, each distinct
request is computed once while the body lives; the entries go with it.
"""
from __future__ import annotations

import functools
import threading
import weakref

from jaxprc.ir.dtypes import config


def _frozen(value):
    """A hashable stand-in for an argument (lists of masks/axes become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    hash(value)
    return value


def _fresh(result):
    """Callers may modify the lists they get back: hand out copies."""
    if isinstance(result, tuple):
        return tuple(list(r) if isinstance(r, list) else r for r in result)
    return result


def memoize_on_jaxpr(transform=None, *, uncached_when=None):
    """Decorate ``transform(jaxpr, *args, **kwargs)`` so that equal requests on the same jaxpr
    object reuse the first result. ``uncached_when(kwargs)`` names calls that must not be cached
    (e.g. those given concrete values); unhashable arguments are never cached."""
    if transform is None:
        return functools.partial(memoize_on_jaxpr, uncached_when=uncached_when)
    tables: dict[int, dict] = {}
    lock = threading.Lock()

    @functools.wraps(transform)
    def memoized(jaxpr, *args, **kwargs):
        if uncached_when is not None and uncached_when(kwargs):
            return transform(jaxpr, *args, **kwargs)
        try:
            key = (_frozen(args), _frozen(sorted(kwargs.items())), config.jax_enable_x64)
        except TypeError:
            return transform(jaxpr, *args, **kwargs)
        table = tables.get(id(jaxpr))
        if table is not None and key in table:
            return _fresh(table[key])
        result = transform(jaxpr, *args, **kwargs)
        with lock:
            if id(jaxpr) not in tables:
                tables[id(jaxpr)] = {}
                weakref.finalize(jaxpr, tables.pop, id(jaxpr), None)
            tables[id(jaxpr)][key] = _fresh(result)
        return _fresh(result)

    memoized.cache_size = lambda: sum(len(t) for t in tables.values())
    return memoized
