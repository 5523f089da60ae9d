"""jnp.convolve and jnp.correlate: 1-D discrete convolution and cross-correlation as one
``conv_general_dilated`` (the kernel flipped for a convolution, conjugated for a correlation)."""
from __future__ import annotations

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import is_symbolic_dim

from ._util import aval_of, convert
from .creation import asarray


def promote_no_broadcast(fn: str, *args, to_inexact: bool = True):
    """``args`` as arrays of their common dtype (inexact when asked), shapes left alone."""
    arrays = [asarray(a) for a in args]
    avals = [aval_of(a, fn) for a in arrays]
    dtype, weak = dt.promote_types(*((a.dtype, a.weak_type) for a in avals))
    if to_inexact and not dt.is_inexact(dtype):
        dtype = dt.to_inexact_dtype(dtype)
    return [convert(a, dtype, weak) for a in arrays]


def _length(x, op: str) -> int:
    """The length of a 1-D input as a Python int: JAX reads it with ``len()``, so a symbolic length
    is refused with the TypeError of a dimension that is no integer, even under constraints."""
    n = aval_of(x).shape[0]
    if is_symbolic_dim(n):
        raise TypeError(f"'DimExpr' object cannot be interpreted as an integer: {op}() needs the "
                        f"length of its inputs as an integer, got the symbolic dimension '{n}'")
    return n


def _conv1d(x, y, mode, op, precision, preferred_element_type):
    if aval_of(x, op).ndim != 1 or aval_of(y, op).ndim != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs.")
    x, y = promote_no_broadcast(op, x, y, to_inexact=preferred_element_type is None)
    nx, ny = _length(x, op), _length(y, op)
    if nx == 0 or ny == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {(nx,)} and {(ny,)}.")
    reverse_out = False
    if op == "correlate":
        if dt.is_complex(aval_of(y).dtype):
            y = lax.conj(y)
        if nx < ny:       # the longer array slides; the result is reversed back
            x, y, reverse_out = y, x, True
    else:
        if nx < ny:
            x, y = y, x
        y = lax.rev(y, (0,))
    k = aval_of(y).shape[0]
    pads = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}
    if mode not in pads:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    out = lax.conv_general_dilated(lax.reshape(x, (1, 1, aval_of(x).shape[0])),
                                   lax.reshape(y, (1, 1, k)), (1,), [pads[mode]], precision=precision,
                                   preferred_element_type=preferred_element_type)
    out = lax.reshape(out, (aval_of(out).shape[2],))
    return lax.rev(out, (0,)) if reverse_out else out


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """Discrete linear convolution of two 1-D arrays (``numpy.convolve``)."""
    return _conv1d(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """Cross-correlation of two 1-D arrays, ``v`` conjugated (``numpy.correlate``)."""
    return _conv1d(a, v, mode, "correlate", precision, preferred_element_type)
