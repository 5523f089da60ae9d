"""jaxprc.numpy.fft: numpy's FFT functions with JAX's semantics, on the ``fft`` primitive.

XLA transforms the trailing 1-3 axes of an array, so every function moves its
``axes`` to the end, crops or zero-pads them to ``s``, runs one ``fft`` (or a
few for more than three axes) and moves the axes back. ``norm`` is
"backward" (None), "ortho" or "forward", as in numpy.
"""
from __future__ import annotations

import math
import operator
import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.lax.fft import FftType

from ._util import aval_of, located
from .creation import arange, as_array, asarray
from .shape_ops import moveaxis, roll
from .ufuncs import conj

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _norm_factor(lengths, fn: str, norm, dtype):
    """The scale ``norm`` applies to ``fn``'s result (None for "backward"), as a scalar of the
    result's dtype; the inverse transforms ("i...") scale the other way."""
    if norm is None or norm == "backward":
        return None
    n = np.asarray(math.prod(lengths), dt.finfo(dtype).dtype)
    if norm == "ortho":
        factor = np.sqrt(n) if fn.startswith("i") else 1 / np.sqrt(n)
    elif norm == "forward":
        factor = n if fn.startswith("i") else 1 / n
    else:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return np.asarray(factor, dtype)


def _fft_nd(x, fft_type: FftType, lengths: tuple):
    """The transform over the last ``len(lengths)`` axes. XLA does at most three at once; more
    are done three (or, for four, two) at a time: the forward transforms innermost first, the
    inverse ones outermost first, so that IRFFT's half-spectrum axis is transformed last."""
    if len(lengths) <= 3:
        return lax.fft(x, fft_type, lengths)
    k = 2 if len(lengths) == 4 else 3
    ndim = aval_of(x).ndim
    outer = tuple(range(ndim - len(lengths), ndim - k))
    moved = tuple(range(ndim - len(lengths) + k, ndim))
    if fft_type in (FftType.FFT, FftType.RFFT):
        x = lax.fft(x, fft_type, lengths[-k:])
        x = _fft_nd(moveaxis(x, outer, moved), FftType.FFT, lengths[:-k])
        return moveaxis(x, moved, outer)
    x = _fft_nd(moveaxis(x, outer, moved), FftType.IFFT, lengths[:-k])
    return lax.fft(moveaxis(x, moved, outer), fft_type, lengths[-k:])


def _fft_core(fn: str, fft_type: FftType, a, s, axes, norm):
    full_name = f"jax.numpy.fft.{fn}"
    x = as_array(a, full_name)
    ndim = aval_of(x).ndim
    if s is not None:
        s = tuple(map(operator.index, s))
        if any(n <= 0 for n in s):
            raise ValueError(f"{located(full_name)}: Shape should be positive.")
        if axes is not None and len(s) != len(axes):
            raise ValueError(f"{located(full_name)}: Shape and axes have different lengths.")
    given_axes = axes
    if axes is None:
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    axes = tuple(operator.index(ax) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{located(full_name)} does not support repeated axes. Got axes {axes}.")
    if len(axes) > ndim or any(not -ndim <= ax < ndim for ax in axes):
        raise ValueError(f"{located(full_name)}: axes {axes} are out of bounds for an array of "
                         f"dimension {ndim}")
    if given_axes is not None:      # XLA transforms the innermost axes only
        inner = tuple(range(ndim - len(axes), ndim))
        x, axes = moveaxis(x, axes, inner), inner
    shape = aval_of(x).shape
    if s is not None:
        sizes = list(s)
        if fft_type == FftType.IRFFT:
            sizes[-1] = sizes[-1] // 2 + 1
        config = [(0, 0, 0)] * ndim     # zero-pad or crop (a negative high edge) to ``s``
        for ax, n in zip(axes, sizes):
            config[ax] = (0, n - shape[ax], 0)
        if any(c != (0, 0, 0) for c in config):
            x = lax.pad(x, np.zeros((), aval_of(x).dtype)[()], config)
        lengths = s
    elif fft_type == FftType.IRFFT:
        lengths = tuple(shape[ax] for ax in axes[:-1]) + ((max(0, 2 * (shape[axes[-1]] - 1)),) if axes else ())
    else:
        lengths = tuple(shape[ax] for ax in axes)
    out = _fft_nd(x, fft_type, tuple(lengths))
    factor = _norm_factor(lengths, fn, norm, aval_of(out).dtype)
    if factor is not None:
        out = out * factor
    if given_axes is not None:
        out = moveaxis(out, axes, given_axes)
    return out


def _fft_core_1d(fn: str, fft_type: FftType, a, n, axis, norm):
    if isinstance(axis, (list, tuple)):
        name = f"jax.numpy.fft.{fn}"
        raise ValueError(f"{located(name)} does not support multiple axes. Please use {name}n. "
                         f"Got axis = {axis!r}.")
    return _fft_core(fn, fft_type, a, None if n is None else [n], None if axis is None else [axis], norm)


def _fft_core_2d(fn: str, fft_type: FftType, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"{located(f'jax.numpy.fft.{fn}')} only supports 2 axes. Got axes = {axes!r}.")
    return _fft_core(fn, fft_type, a, s, axes, norm)


def fft(a, n=None, axis=-1, norm=None):
    """The one-dimensional discrete Fourier transform along ``axis`` (length ``n``)."""
    return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The one-dimensional inverse discrete Fourier transform along ``axis``."""
    return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The one-dimensional transform of a real array: the ``n // 2 + 1`` non-negative frequencies."""
    return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``rfft``: a real array of length ``n`` (default ``2 * (m - 1)``)."""
    return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half: a real spectrum."""
    conj_a = conj(as_array(a, "jax.numpy.fft.hfft"))
    if isinstance(axis, (list, tuple)):
        return _fft_core_1d("hfft", FftType.IRFFT, conj_a, n, axis, norm)
    nn = (aval_of(conj_a).shape[axis] - 1) * 2 if n is None else n
    return _fft_core_1d("hfft", FftType.IRFFT, conj_a, n, axis, norm) * nn


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``hfft``: the half spectrum of a real signal, conjugated and scaled."""
    x = asarray(a)
    if isinstance(axis, (list, tuple)):
        return _fft_core_1d("ihfft", FftType.RFFT, x, n, axis, norm)
    nn = aval_of(x).shape[axis] if n is None else n
    return conj(_fft_core_1d("ihfft", FftType.RFFT, x, n, axis, norm)) * (1 / nn)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional discrete Fourier transform over ``axes``."""
    return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional inverse discrete Fourier transform over ``axes``."""
    return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional transform of a real array (half spectrum along ``axes[-1]``)."""
    return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2``."""
    return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftn(a, s=None, axes=None, norm=None):
    """The N-dimensional discrete Fourier transform over ``axes`` (all by default)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The N-dimensional inverse discrete Fourier transform over ``axes``."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The N-dimensional transform of a real array (half spectrum along the last axis)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of ``rfftn``."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _check_freq_args(fn: str, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{fn} only takes an int. Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{fn} only takes a single value. "
                         f"Got d = {list(d)}.")


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., n//2 - 1 (or (n-1)//2), -n//2, ..., -1] / (d * n)``."""
    _check_freq_args("fftfreq", n, d)
    out_dtype = np.dtype(dtype) if dtype is not None else dt.default_float_dtype()
    dtype = dt.canonicalize_dtype(out_dtype if dt.is_inexact(out_dtype) else dt.default_float_dtype())
    dtype = dt.finfo(dtype).dtype
    k = (arange(n, dtype=dtype) + n // 2) % n - n // 2
    return (k / asarray(d * n, dtype=dtype)).astype(out_dtype)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of ``rfft``'s output: ``[0, 1, ..., n // 2] / (d * n)``."""
    _check_freq_args("rfftfreq", n, d)
    dtype = dt.default_float_dtype() if dtype is None else dtype
    return arange(0, n // 2 + 1, dtype=dtype) / asarray(d * n, dtype=dtype)


def _shift(fn: str, x, axes, sign: int):
    x = as_array(x, fn)
    shape = aval_of(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
        shift = [sign * (n // 2) for n in shape]
    elif isinstance(axes, int):
        shift = sign * (shape[axes] // 2)
    else:
        shift = [sign * (shape[ax] // 2) for ax in axes]
    return roll(x, shift, axes)


def fftshift(x, axes=None):
    """The zero frequency moved to the middle of ``axes`` (all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of ``fftshift``."""
    return _shift("ifftshift", x, axes, -1)
