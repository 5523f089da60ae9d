"""Host-side helpers: file I/O (load/save/savez), arrays from buffers and strings,
``fromfunction``, ``from_dlpack``, printing options, ``einsum_path``, ``iterable``, and the
remaining dtype names (``bool``, ``double``, ``single``, ``cdouble``, ``csingle`` and numpy's
abstract ``character``/``flexible``/``object_``).

Arrays print through numpy, so numpy's print options apply to them (as in JAX).
"""
from __future__ import annotations

import numpy as np

from jaxprc.ir import dtypes as dt

from ._dtypes import ScalarType, to_dtype
from .creation import arange, asarray

bool = ScalarType(dt.bool_)
single, double = ScalarType(dt.float32), ScalarType(dt.float64)
csingle, cdouble = ScalarType(dt.complex64), ScalarType(dt.complex128)
character, flexible, object_ = np.character, np.flexible, np.object_
ComplexWarning = np.exceptions.ComplexWarning

save, savez = np.save, np.savez
array_repr, array_str = np.array_repr, np.array_str
iterable = np.iterable


def printoptions(*args, **kwargs):
    """numpy's ``printoptions`` context manager (jaxprc arrays print through numpy)."""
    return np.printoptions(*args, **kwargs)


def get_printoptions():
    return np.get_printoptions()


def set_printoptions(*args, **kwargs):
    return np.set_printoptions(*args, **kwargs)


def load(file, *args, **kwargs):
    """``np.load``, with arrays returned as jaxprc arrays (bfloat16, which numpy saves as
    2-byte voids, recovered)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2":
            out = out.view(dt.bfloat16)
        try:
            out = asarray(out)
        except TypeError:      # a dtype jaxprc cannot hold: returned as numpy read it
            pass
    return out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    return asarray(np.frombuffer(buffer=buffer, dtype=to_dtype(dtype), count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    return asarray(np.fromstring(string, dtype=to_dtype(dtype), count=count, sep=sep))


def _impure(name):
    def f(*args, **kwargs):
        raise NotImplementedError(
            f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe for use with JIT and "
            f"other transformations. Consider using jnp.asarray(np.{name}(...)) instead.")
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Refused, as in JAX: reading a {'file' if name == 'fromfile' else 'iterator'} is a side effect."
    return f


fromfile, fromiter = _impure("fromfile"), _impure("fromiter")


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function`` evaluated at every index of ``shape`` (called on scalars, batched by vmap)."""
    from jaxprc import vmap
    shape = tuple(int(s) for s in shape)
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(arange(s, dtype=dtype) for s in shape), **kwargs)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array from any object exporting DLPack (``jaxprc.dlpack.from_dlpack``: a copy unless
    ``copy=False``)."""
    from jaxprc.dlpack import from_dlpack as impl      # jaxprc.dlpack needs jaxprc.numpy's package
    return impl(x, device=device, copy=copy)


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """The contraction order numpy's optimizer picks for these operand shapes (no data is read)."""
    shapes = [np.shape(o) for o in operands]
    dummies = [np.broadcast_to(np.zeros((), np.float32), s) for s in shapes]
    return np.einsum_path(subscripts, *dummies, optimize="greedy" if optimize == "auto" else optimize)
