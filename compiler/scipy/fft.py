"""jaxprc.scipy.fft: the type-2 discrete cosine transform and its inverse (dct, idct, dctn,
idctn) with JAX's semantics, computed with FFTs.

A DCT-II of length N is one complex FFT of the interleaved signal (even
samples, then the odd ones reversed) rotated by the quarter-wave twiddles
``exp(-i pi k / 2N)``; two axes at once take one 2-D FFT. ``norm`` is None
("backward") or "ortho". Only type 2 exists, as in JAX.
"""
from __future__ import annotations

import functools
import inspect
import math
import operator
from typing import Sequence

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.numpy import fft as jnp_fft
from jaxprc.numpy._util import aval_of, canonical_axis, convert, located
from jaxprc.numpy.creation import arange, as_array
from jaxprc.numpy.shape_ops import flip, roll
from jaxprc.numpy.ufuncs import exp, real

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(fn: str, type, norm):
    if type != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm is not None and norm not in ("backward", "ortho"):
        raise ValueError(f"jax.scipy.fft.{fn}: norm={norm!r} is not implemented")


def _along(v, axis: int, ndim: int):
    """A vector laid along ``axis`` of an ``ndim``-dimensional array."""
    return lax.expand_dims(v, [a for a in range(ndim) if a != axis])


def _twiddle(n: int, k):
    """exp(-i pi k / 2n), complex of ``k``'s precision."""
    complex_dtype = dt.complex128 if dt.finfo(aval_of(k).dtype).dtype == dt.float64 else dt.complex64
    return exp((-0.5j * np.pi) * convert(k, complex_dtype) / n)


def _interleave(x, axis: int):
    """Even samples in order, then the odd ones reversed."""
    evens = lax.slice_in_dim(x, None, None, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    return lax.concatenate([evens, odds], axis)


def _deinterleave(x, axis: int):
    """The inverse of ``_interleave``: the first half at the even positions, the second half
    reversed at the odd ones (pairs stacked on a new axis, then merged)."""
    shape = aval_of(x).shape
    n = shape[axis]
    half = math.ceil(n / 2)
    evens = lax.slice_in_dim(x, 0, half, 1, axis)
    odds = lax.rev(lax.slice_in_dim(x, half, None, 1, axis), (axis,))
    if n % 2:       # one odd sample fewer: pad it, cropped again below
        config = [(0, 0, 0)] * len(shape)
        config[axis] = (0, 1, 0)
        odds = lax.pad(odds, np.zeros((), aval_of(x).dtype)[()], config)
    pairs = lax.concatenate([lax.expand_dims(evens, (axis + 1,)), lax.expand_dims(odds, (axis + 1,))], axis + 1)
    merged = lax.reshape(pairs, shape[:axis] + (2 * half,) + shape[axis + 1:])
    return lax.slice_in_dim(merged, 0, n, 1, axis)


def _ortho_scale(out, axis: int):
    """The orthonormal DCT's scaling: 1/sqrt(4N) for k = 0, 1/sqrt(2N) after."""
    a = aval_of(out)
    n = a.shape[axis]
    factor = lax.concatenate([lax.full((1,), 4, a.dtype), lax.full((n - 1,), 2, a.dtype)], 0)
    return out / lax.sqrt(_along(factor, axis, a.ndim) * n)


def _resize(x, sizes: dict):
    """``x`` zero-padded or cropped at the end of each axis in ``sizes`` to that size."""
    shape = aval_of(x).shape
    config = [(0, sizes[a] - shape[a] if a in sizes else 0, 0) for a in range(len(shape))]
    if all(c == (0, 0, 0) for c in config):
        return x
    return lax.pad(x, np.zeros((), aval_of(x).dtype)[()], config)


def _transform(fn):
    """A public transform: its input made an array and its ``type``/``norm`` checked; complex
    input transformed as its real and imaginary parts separately."""
    name, signature = fn.__name__, inspect.signature(fn)

    @functools.wraps(fn)
    def transform(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        x = as_array(bound.arguments.pop("x"), name)
        _check(name, bound.arguments["type"], bound.arguments["norm"])
        if dt.is_complex(aval_of(x).dtype):
            return lax.complex(fn(lax.real(x), **bound.arguments), fn(lax.imag(x), **bound.arguments))
        return fn(x, **bound.arguments)
    return transform


def _axis_resized(fn: str, x, n, axis):
    """``x`` resized to ``n`` along ``axis``, the axis made non-negative, and the new length."""
    axis = canonical_axis(axis, aval_of(x).ndim, located(fn))
    if n is not None:
        x = _resize(x, {axis: n})
    return x, axis, aval_of(x).shape[axis]


@_transform
def dct(x, type=2, n=None, axis=-1, norm=None):
    """The type-2 discrete cosine transform along ``axis`` (length ``n``)."""
    x, axis, length = _axis_resized("dct", x, n, axis)
    ndim = aval_of(x).ndim
    spectrum = jnp_fft.fft(_interleave(x, axis), axis=axis)
    k = _along(arange(length, dtype=dt.finfo(aval_of(spectrum).dtype).dtype), axis, ndim)
    out = 2 * real(spectrum * _twiddle(length, k))
    return _ortho_scale(out, axis) if norm == "ortho" else out


def _dct2(x, axes, norm):
    """The DCT over two axes at once: one 2-D FFT, then the twiddles of both axes (the second
    axis's combines each frequency with its mirror image)."""
    ndim = aval_of(x).ndim
    ax1, ax2 = (canonical_axis(a, ndim, located("dctn")) for a in axes)
    n1, n2 = aval_of(x).shape[ax1], aval_of(x).shape[ax2]
    spectrum = jnp_fft.fftn(_interleave(_interleave(x, ax1), ax2), axes=axes)
    cdtype = aval_of(spectrum).dtype
    k1 = _along(arange(n1, dtype=cdtype), ax1, ndim)
    k2 = _along(arange(n2, dtype=cdtype), ax2, ndim)
    mirrored = roll(flip(spectrum, axis=ax2), shift=1, axis=ax2)
    out = _twiddle(n1, k1) * (_twiddle(n2, k2) * spectrum + _twiddle(n2, -k2) * mirrored)
    out = 2 * real(out)
    return _ortho_scale(_ortho_scale(out, ax1), ax2) if norm == "ortho" else out


def _nd_args(fn: str, x, s, axes):
    """``s`` as a list (an int is one size) and ``axes`` as non-negative axes; by default the
    last ``len(s)`` axes, or all of them."""
    ndim = aval_of(x).ndim
    if s is not None:
        s = [operator.index(s)] if not isinstance(s, Sequence) else list(s)
        if len(s) > ndim:
            raise ValueError(f"s must have at most x.ndim ({ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(ndim - len(s), ndim)) if s is not None else tuple(range(ndim))
    else:
        axes = tuple(canonical_axis(a, ndim, located(fn)) for a in
                     ((axes,) if isinstance(axes, (int, np.integer)) else axes))
        if len(set(axes)) != len(axes):
            raise ValueError(f"{located(fn)}: repeated axes {axes}")
    return s, axes


@_transform
def dctn(x, type=2, s=None, axes=None, norm=None):
    """The type-2 DCT over several axes (all by default), two at a time."""
    s, axes = _nd_args("dctn", x, s, axes)
    if len(axes) == 1:
        return dct(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    if s is not None:
        x = _resize(x, dict(zip(axes, s)))
    if len(axes) == 2:
        return _dct2(x, axes, norm)
    for block in [axes[i:i + 2] for i in range(0, len(axes), 2)]:
        x = dctn(x, axes=block, norm=norm)
    return x


@_transform
def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of the type-2 DCT along ``axis`` (a type-3 DCT, scaled)."""
    x, axis, length = _axis_resized("idct", x, n, axis)
    ndim = aval_of(x).ndim
    if not dt.is_inexact(aval_of(x).dtype):
        x = convert(x, dt.to_inexact_dtype(aval_of(x).dtype))
    if norm is None or norm == "backward":
        x = _ortho_scale(x, axis)
    x = _ortho_scale(x, axis)
    k = _along(arange(length, dtype=aval_of(x).dtype), axis, ndim)
    w = _twiddle(length, k)
    x = convert(x, aval_of(w).dtype) / w * 2 * length
    return _deinterleave(real(jnp_fft.ifft(x, axis=axis)), axis)


@_transform
def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of ``dctn``: ``idct`` along each axis."""
    s, axes = _nd_args("idctn", x, s, axes)
    if len(axes) == 1:
        return idct(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    if s is not None:
        x = _resize(x, dict(zip(axes, s)))
    for axis in axes:
        x = idct(x, axis=axis, norm=norm)
    return x
