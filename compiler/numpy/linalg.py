"""jaxprc.numpy.linalg: norms (vector and matrix) and the helpers built on products."""
from __future__ import annotations

import numpy as np

from jaxprc.ir import dtypes as dt

from .creation import as_array
from ._util import aval_of, canonical_axis, convert


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (any ``ord``, including inf, -inf and 0) over one axis, and the matrix
    norms 'fro', 1, -1, inf, -inf over two; with ``ord=None`` the 2-norm of all of ``axis``
    (the whole array by default). As in JAX, the 2-norm's derivative at zero is NaN."""
    from . import reductions as r
    from . import ufuncs as uf
    x = as_array(x, "norm")
    aval = aval_of(x)
    if not dt.is_inexact(aval.dtype):
        x = convert(x, dt.default_float_dtype())
    if axis is None:
        if ord is not None and aval.ndim > 2:
            raise ValueError(f"norm: ord={ord!r} needs axis for an array of rank {aval.ndim}")
        axes = tuple(range(aval.ndim))
    else:   # kept in the given order: (row, column) matters for matrix norms
        axes = tuple(canonical_axis(a, aval.ndim, "norm")
                     for a in ((axis,) if isinstance(axis, (int, np.integer)) else axis))
    if ord is None or (ord == "fro" and len(axes) == 2) or (ord == 2 and len(axes) == 1):
        return _two_norm(x, axes, keepdims)
    absx = uf.absolute(x)
    if len(axes) == 1:
        if ord == np.inf:   # initial=0 (as JAX): defined on empty axes, and 0 ties with |x| = 0
            return r.max(absx, axis=axes, keepdims=keepdims, initial=0)
        if ord == -np.inf:
            return r.min(absx, axis=axes, keepdims=keepdims)
        if ord == 0:
            return r.sum(convert(uf.not_equal(x, 0), aval_of(absx).dtype), axis=axes, keepdims=keepdims)
        if ord == 1:
            return r.sum(absx, axis=axes, keepdims=keepdims)
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")
        p = convert(ord, aval_of(absx).dtype)
        return uf.power(r.sum(uf.power(absx, p), axis=axes, keepdims=keepdims), uf.reciprocal(p))
    if len(axes) != 2:
        raise ValueError(f"norm: axis must name one or two axes, got {axis!r}")
    row, col = axes
    if ord in (1, -1):      # the largest (smallest) column sum
        out = (r.max if ord == 1 else r.min)(r.sum(absx, axis=row, keepdims=True), axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):      # the largest (smallest) row sum
        out = (r.max if ord > 0 else r.min)(r.sum(absx, axis=col, keepdims=True), axis=row, keepdims=True)
    else:
        raise NotImplementedError(f"norm: matrix norm ord={ord!r} is not supported (use 'fro', 1, -1, inf, -inf)")
    if not keepdims:
        from .shape_ops import squeeze
        out = squeeze(out, axes)
    return out


def _two_norm(x, axes, keepdims):
    """``sqrt(sum(|x|^2))``, differentiated as written: at x = 0 the derivative is 0/0 = NaN,
    as JAX's (no subgradient convention)."""
    from . import reductions as r
    from . import ufuncs as uf
    return uf.sqrt(r.sum(uf.real(uf.multiply(x, uf.conj(x))), axis=axes, keepdims=keepdims))


def matmul(x1, x2):
    from .products import matmul as mm
    return mm(x1, x2)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    from .shape_ops import ravel
    if axis is None:
        return norm(ravel(x), ord=ord, keepdims=False)
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)


def matrix_norm(x, ord="fro", keepdims=False):
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def trace(x, offset=0):
    from .selection import trace as tr
    return tr(x, offset, -2, -1)


def outer(x1, x2):
    from .products import outer as o
    return o(x1, x2)
