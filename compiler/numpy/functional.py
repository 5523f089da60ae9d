"""Functions of functions: ``vectorize`` (with gufunc ``signature``), ``apply_along_axis``,
``apply_over_axes``, ``piecewise``, and ``ufunc``/``frompyfunc`` with JAX's ufunc methods
(``reduce``, ``accumulate``, ``at``, ``reduceat``, ``outer``).

Everything batches with ``vmap`` or loops with ``scan``, so it traces, differentiates and
compiles like the functions it wraps. A ufunc built on a jnp function keeps that function's
fast paths (``jnp.add.reduce`` is ``jnp.sum``); one built from a Python function reduces
and accumulates with a scan.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt

from ._util import aval_of, broadcast_shapes, broadcast_to_shape, canonical_axis, convert, located
from .creation import as_array, asarray, full
from .shape_ops import expand_dims, moveaxis, ravel, reshape


def _vmap(*args, **kwargs):
    from jaxprc import vmap
    return vmap(*args, **kwargs)


# ------------------------------------------------------------------ vectorize

_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARGS = rf"\({_CORE}\)(?:,\({_CORE}\))*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(signature: str):
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = sig.split("->")
    parse = lambda s: [tuple(d for d in part.split(",") if d) for part in re.findall(r"\(([^)]*)\)", s)]
    return parse(ins), parse(outs)


class vectorize:
    """``pyfunc`` applied elementwise (or over core dimensions given by ``signature``) with
    numpy broadcasting of the loop dimensions, by nested ``vmap``."""

    def __init__(self, pyfunc, *, excluded=frozenset(), signature=None):
        if any(not isinstance(e, (str, int)) for e in excluded):
            raise TypeError(f"jax.numpy.vectorize can only exclude integer or string arguments, but excluded={excluded!r}")
        if any(isinstance(e, int) and e < 0 for e in excluded):
            raise ValueError(f"excluded={excluded!r} contains negative numbers")
        self.pyfunc = pyfunc
        self.excluded = frozenset(excluded)
        self.signature = signature
        functools.update_wrapper(self, pyfunc)

    def __call__(self, *args, **kwargs):
        excluded = self.excluded
        if any(isinstance(e, str) for e in excluded):
            kw_excluded = {k: v for k, v in kwargs.items() if k in excluded}
        else:
            kw_excluded = {}
        kwargs = {k: v for k, v in kwargs.items() if k not in kw_excluded}
        if kwargs:
            # Keyword arguments are vectorized like positional ones.
            names = list(kwargs)
            base = self

            def with_keywords(*all_args):
                pos, kws = all_args[:len(args)], dict(zip(names, all_args[len(args):]))
                return base.pyfunc(*pos, **kws, **kw_excluded)
            inner = vectorize(with_keywords, excluded={i for i in excluded if isinstance(i, int)},
                              signature=self.signature)
            return inner(*args, *kwargs.values())
        positions = [i for i in range(len(args)) if i not in excluded]
        if self.signature is not None:
            in_core, out_core = _parse_signature(self.signature)
            if len(in_core) != len(positions):
                raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, got "
                                f"{len(positions)}")
        else:
            in_core, out_core = [()] * len(positions), None
        arrays = [as_array(args[i], "vectorize") for i in positions]
        sizes = {}
        loops = []
        for a, core in zip(arrays, in_core):
            shape = aval_of(a).shape
            if len(shape) < len(core):
                raise ValueError(f"input with shape {shape} does not have enough dimensions for all core "
                                 f"dimensions {core} of signature {self.signature}")
            for name, size in zip(core, shape[len(shape) - len(core):]):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs {sizes[name]}")
            loops.append(shape[:len(shape) - len(core)])
        loop = broadcast_shapes(*loops, fn="vectorize") if loops else ()
        arrays = [broadcast_to_shape(a, loop + aval_of(a).shape[len(l):]) for a, l in zip(arrays, loops)]

        def call(*vargs):
            full_args = list(args)
            for i, v in zip(positions, vargs):
                full_args[i] = v
            out = self.pyfunc(*full_args, **kw_excluded)
            if out_core is not None:
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(out_core):
                    raise TypeError(f"wrong number of output arguments: expected {len(out_core)}, got "
                                    f"{len(outs)} (vectorize with signature {self.signature})")
                for o, core in zip(outs, out_core):
                    if aval_of(asarray(o)).ndim != len(core):
                        raise ValueError(f"output shape {aval_of(asarray(o)).shape} does not match the core "
                                         f"dimensions {core} of signature {self.signature}")
            return out

        f = call
        for _ in loop:
            f = _vmap(f)
        out = f(*arrays)
        if isinstance(out, tuple):
            return tuple(asarray(o) for o in out)
        return asarray(out)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to the 1-D slices of ``arr`` along ``axis``; its result's
    dimensions take the place of ``axis``."""
    arr = as_array(arr, "apply_along_axis")
    nd = aval_of(arr).ndim
    axis = canonical_axis(axis, nd, "apply_along_axis")
    f = lambda x: func1d(x, *args, **kwargs)
    for i in range(1, nd - axis):
        f = _vmap(f, in_axes=i, out_axes=-1)
    for _ in range(axis):
        f = _vmap(f, in_axes=0, out_axes=0)
    return f(arr)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each axis in turn, keeping the rank (a reduced axis is
    re-inserted)."""
    a = as_array(a, "apply_over_axes")
    for axis in axes:
        b = asarray(func(a, axis))
        if aval_of(b).ndim == aval_of(a).ndim:
            a = b
        elif aval_of(b).ndim == aval_of(a).ndim - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[i](x)`` (or the constant ``funclist[i]``) where ``condlist[i]`` holds, later
    conditions winning; an extra last function is the default (else 0)."""
    from .reductions import argmax, cumsum
    from .shape_ops import concatenate
    x = as_array(x, "piecewise")
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; got {nf}")
    conds = convert(asarray(condlist), dt.bool_)
    if aval_of(conds).ndim == 0:
        conds = reshape(conds, (1,))
    dtype = aval_of(x).dtype
    # Index of the last true condition (0, the default, where none holds).
    stacked = concatenate([full((1,) + aval_of(conds).shape[1:], 0, dt.int32), convert(conds, dt.int32)], 0)
    index = argmax(cumsum(stacked, axis=0), axis=0)
    branches = [(lambda v, f=f: convert(asarray(f(v, *args, **kw)), dtype)) if callable(f)
                else (lambda v, f=f: convert(asarray(f), dtype)) for f in funclist]
    return vectorize(lax.switch, excluded=(1,))(index, branches, x)


# ------------------------------------------------------------------ ufunc

class ufunc:
    """A universal function: called elementwise with broadcasting, with the methods
    ``reduce``, ``accumulate``, ``at``, ``reduceat`` and ``outer``."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None, call=None,
                 reduce=None, accumulate=None, at=None, reduceat=None):
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = getattr(func, "__doc__", None)
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = int(nargs if nargs is not None else nin)
        self.identity = identity
        self._call, self._reduce, self._accumulate, self._at, self._reduceat = call, reduce, accumulate, at, reduceat

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None, **kwargs):
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional argument(s) but {len(args)} were given")
        if self._call is not None:
            return self._call(*args, **kwargs)
        # As in JAX, the function is applied to scalars (vectorized), not to whole arrays.
        return vectorize(self._func)(*args, **kwargs)

    def _need_binary(self, method):
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value; "
                             f"{self.__name__} has nin={self.nin}, nout={self.nout}")

    def _result_dtype(self, a, dtype):
        if dtype is not None:
            from ._dtypes import to_dtype
            return dt.canonicalize_dtype(to_dtype(dtype))
        from jaxprc import eval_shape
        one = asarray(np.ones((), aval_of(a).dtype))
        return eval_shape(self._func, one, one).dtype

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
        """The binary function folded over ``axis`` (None: all axes)."""
        self._need_binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
        a = as_array(a, f"{self.__name__}.reduce")
        dtype = self._result_dtype(a, dtype)
        shape = aval_of(a).shape
        axes = tuple(range(len(shape))) if axis is None else (
            tuple(canonical_axis(i, len(shape)) for i in axis) if isinstance(axis, (tuple, list))
            else (canonical_axis(axis, len(shape), f"{self.__name__}.reduce"),))
        kept = [i for i in range(len(shape)) if i not in axes]
        x = reshape(moveaxis(convert(a, dtype), axes, tuple(range(len(axes)))),
                    (int(np.prod([shape[i] for i in axes], dtype=np.int64)),) + tuple(shape[i] for i in kept))
        if where is not None:
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, so to use "
                                 "a where mask one has to specify 'initial'")
            mask = broadcast_to_shape(convert(as_array(where, "where"), dt.bool_), shape)
            mask = reshape(moveaxis(mask, axes, tuple(range(len(axes)))), aval_of(x).shape)
            from .selection import where as select
            fill = self.identity if self.identity is not None else initial
            x = select(mask, x, convert(fill, dtype))
        n = aval_of(x).shape[0]
        if initial is None:
            if n == 0:
                if self.identity is None:
                    raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
                initial = self.identity
            else:
                carry, xs = x[0], x[1:]
        if initial is not None:
            carry, xs = broadcast_to_shape(convert(as_array(initial, "initial"), dtype), aval_of(x).shape[1:]), x
        carry, _ = lax.scan(lambda c, v: (convert(self(c, v), dtype), None), carry, xs)
        if keepdims:
            carry = reshape(carry, tuple(1 if i in axes else d for i, d in enumerate(shape)))
        return carry

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running results of ``reduce`` along ``axis``."""
        self._need_binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = as_array(a, f"{self.__name__}.accumulate")
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        dtype = self._result_dtype(a, dtype)
        axis = canonical_axis(axis, aval_of(a).ndim, f"{self.__name__}.accumulate")
        x = moveaxis(convert(a, dtype), axis, 0)
        if aval_of(x).shape[0] == 0:
            return moveaxis(x, 0, axis)

        def step(c, v):
            c = convert(self(c, v), dtype)
            return c, c
        _, rest = lax.scan(step, x[0], x[1:])
        from .shape_ops import concatenate
        return moveaxis(concatenate([x[:1], rest], 0), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """``a`` with ``a[indices] = f(a[indices], b)`` applied once per index, repeated
        indices included (requires ``inplace=False``)."""
        if inplace:
            raise NotImplementedError("jax.numpy.ufunc.at does not support inplace=True")
        if b is None and self.nin != 1 or b is not None and self.nin != 2:
            raise ValueError(f"{self.__name__}.at: expected {self.nin - 1} update argument(s)")
        if self._at is not None:
            return self._at(a, indices, *(() if b is None else (b,)))
        a = as_array(a, f"{self.__name__}.at")
        if b is None:
            return a.at[indices].apply(self)
        dtype = self._result_dtype(a, None)
        a = convert(a, dtype)
        idx = indices if isinstance(indices, tuple) else (indices,)
        idx = [as_array(i, "at") if not isinstance(i, slice) else i for i in idx]
        arrays = [i for i in idx if not isinstance(i, slice)]
        shape = broadcast_shapes(*(aval_of(i).shape for i in arrays), fn="at") if arrays else ()
        if not arrays:
            return a.at[tuple(idx)].set(self(a[tuple(idx)], b))
        flat = [i if isinstance(i, slice) else ravel(broadcast_to_shape(i, shape)) for i in idx]
        count = int(np.prod(shape, dtype=np.int64))
        b = convert(as_array(b, "at"), dtype)
        probe = a[tuple(i if isinstance(i, slice) else i[0] for i in flat)] if count else None
        bb = broadcast_to_shape(b, shape + aval_of(probe).shape) if count else b
        bb = reshape(bb, (count,) + aval_of(probe).shape) if count else b

        def step(arr, k):
            where_ = tuple(i if isinstance(i, slice) else i[k] for i in flat)
            return arr.at[where_].set(convert(self(arr[where_], bb[k]), dtype)), None
        out, _ = lax.scan(step, a, lax.iota(dt.default_int_dtype(), count))
        return out

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """``reduce`` over the segments ``a[indices[i]:indices[i+1]]`` along ``axis`` (a
        single element where the next index is not larger)."""
        self._need_binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        from .indexing import take
        from .selection import where
        from .shape_ops import concatenate
        a = as_array(a, f"{self.__name__}.reduceat")
        idx = as_array(indices, f"{self.__name__}.reduceat")
        if aval_of(idx).ndim != 1:
            raise ValueError(f"reduceat: expected 1D indices; got shape {aval_of(idx).shape}")
        dtype = self._result_dtype(a, dtype)
        axis = canonical_axis(axis, aval_of(a).ndim, f"{self.__name__}.reduceat")
        n = aval_of(a).shape[axis]
        a = convert(a, dtype)
        acc = take(a, idx, axis=axis)
        ends = concatenate([idx[1:], full((1,), n, aval_of(idx).dtype)])
        start = lax.broadcast_in_dim(idx, aval_of(acc).shape, (axis,))
        stop = lax.broadcast_in_dim(ends, aval_of(acc).shape, (axis,))

        def body(i, acc):
            from .ufuncs import greater, less, logical_and
            row = broadcast_to_shape(take(a, reshape(i, (1,)), axis=axis), aval_of(acc).shape)
            inside = logical_and(greater(i, start), less(i, stop))
            return where(inside, convert(self(acc, row), dtype), acc)
        return lax.fori_loop(0, n, body, acc)

    def outer(self, A, B, /):
        """``f`` on every pair: shape ``A.shape + B.shape``."""
        self._need_binary("outer")
        A, B = as_array(A, f"{self.__name__}.outer"), as_array(B, f"{self.__name__}.outer")
        nb = aval_of(B).ndim
        return self(reshape(A, aval_of(A).shape + (1,) * nb), B)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A ``ufunc`` from a Python function of jnp arrays."""
    return ufunc(func, nin, nout, identity=identity)


# ------------------------------------------------------------------ jnp's ufuncs

def _jnp_ufuncs():
    """The jnp functions JAX makes ufuncs, with their fast reductions and updates."""
    from . import reductions as r
    from . import ufuncs as u

    def reduction(fn, with_dtype=True):
        def reduce(a, axis, dtype, keepdims, initial, where):
            if not with_dtype and dtype is not None:
                from ._dtypes import to_dtype
                a = convert(as_array(a, fn.__name__), dt.canonicalize_dtype(to_dtype(dtype)))
            kw = {"dtype": dtype} if with_dtype else {}
            return fn(a, axis=axis, keepdims=keepdims, initial=initial, where=where, **kw)
        return reduce

    def logical(fn):
        def reduce(a, axis, dtype, keepdims, initial, where):
            out = fn(a, axis=axis, keepdims=keepdims, where=where)
            if initial is not None:
                out = (u.logical_and if fn is r.all else u.logical_or)(out, initial)
            return out if dtype is None else out.astype(dtype)
        return reduce

    def cumulative(fn):
        return lambda a, axis, dtype: fn(a, axis=axis, dtype=dtype)

    def cumulative_lax(fn):
        def accumulate(a, axis, dtype):
            a = as_array(a, "accumulate")
            if dtype is not None:
                from ._dtypes import to_dtype
                a = convert(a, dt.canonicalize_dtype(to_dtype(dtype)))
            return fn(a, canonical_axis(axis, aval_of(a).ndim, "accumulate"))
        return accumulate

    def update(method):
        return lambda a, indices, b: getattr(as_array(a, "at").at[indices], method)(b)

    def ufunc_(func, nin, nout, **kwargs):
        return ufunc(func, nin, nout, call=func, **kwargs)     # already elementwise: no vectorize

    return dict(
        add=ufunc_(u.add, 2, 1, identity=0, reduce=reduction(r.sum), accumulate=cumulative(r.cumsum),
                  at=update("add")),
        multiply=ufunc_(u.multiply, 2, 1, identity=1, reduce=reduction(r.prod), accumulate=cumulative(r.cumprod),
                       at=update("multiply")),
        maximum=ufunc_(u.maximum, 2, 1, reduce=reduction(r.max, False), accumulate=cumulative_lax(lax.cummax),
                      at=update("max")),
        minimum=ufunc_(u.minimum, 2, 1, reduce=reduction(r.min, False), accumulate=cumulative_lax(lax.cummin),
                      at=update("min")),
        subtract=ufunc_(u.subtract, 2, 1),
        negative=ufunc_(u.negative, 1, 1),
        logaddexp=ufunc_(u.logaddexp, 2, 1, identity=-np.inf),
        logaddexp2=ufunc_(u.logaddexp2, 2, 1, identity=-np.inf),
        logical_and=ufunc_(u.logical_and, 2, 1, identity=True, reduce=logical(r.all)),
        logical_or=ufunc_(u.logical_or, 2, 1, identity=False, reduce=logical(r.any)),
        logical_xor=ufunc_(u.logical_xor, 2, 1, identity=False),
        bitwise_and=ufunc_(u.bitwise_and, 2, 1, identity=-1),
        bitwise_or=ufunc_(u.bitwise_or, 2, 1, identity=0),
        bitwise_xor=ufunc_(u.bitwise_xor, 2, 1, identity=0),
    )


_UFUNCS = _jnp_ufuncs()
(add, multiply, maximum, minimum, subtract, negative, logaddexp, logaddexp2, logical_and, logical_or, logical_xor,
 bitwise_and, bitwise_or, bitwise_xor) = (_UFUNCS[n] for n in (
    "add", "multiply", "maximum", "minimum", "subtract", "negative", "logaddexp", "logaddexp2", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"))
