"""jaxprc.scipy.signal: N-dimensional convolution and correlation, and detrending
(``jax.scipy.signal``).

The direct method ('direct', and 'auto' as in JAX) is one ``conv_general_dilated`` of the two
arrays as a single-channel image and kernel; ``fftconvolve`` and ``method='fft'`` multiply the
spectra (real FFTs for real inputs) at the full output size, then slice, as JAX does.
"""
from __future__ import annotations

import operator

import numpy as np

from jaxprc import lax
from jaxprc import numpy as jnp
from jaxprc.numpy import fft as jfft
from jaxprc import vmap as _vmap
from jaxprc.ir import dtypes as dt

from ..numpy._util import aval_of
from ..numpy.convolve import promote_no_broadcast

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "fftconvolve", "detrend"]

_MODES = ("full", "same", "valid")


def _flip(x):
    return lax.rev(x, tuple(range(aval_of(x).ndim)))


def _conj(x):
    return lax.conj(x) if dt.is_complex(aval_of(x).dtype) else x


def _convolve_nd(in1, in2, mode, precision, fn):
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    in1, in2 = promote_no_broadcast(fn, in1, in2)
    s1, s2 = aval_of(in1).shape, aval_of(in2).shape
    if len(s1) != len(s2):
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if 0 in s1 or 0 in s2:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes {s1} and {s2}.")
    no_swap, swap = all(a >= b for a, b in zip(s1, s2)), all(a <= b for a, b in zip(s1, s2))
    if not (no_swap or swap):
        raise ValueError("One input must be smaller than the other in every dimension.")
    original = s2
    if swap:
        in1, in2 = in2, in1
    kernel = aval_of(in2).shape
    if mode == "valid":
        padding = [(0, 0)] * len(kernel)
    elif mode == "same":     # centred on in1's original shape, as scipy
        padding = [(k - 1 - (o - 1) // 2, k - o + (o - 1) // 2) for k, o in zip(kernel, original)]
    else:
        padding = [(k - 1, k - 1) for k in kernel]
    lhs = lax.reshape(in1, (1, 1, *aval_of(in1).shape))
    rhs = lax.reshape(_flip(in2), (1, 1, *kernel))
    out = lax.conv_general_dilated(lhs, rhs, (1,) * len(kernel), padding, precision=precision)
    return lax.reshape(out, aval_of(out).shape[2:])


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """N-dimensional convolution (``scipy.signal.convolve``)."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    return _convolve_nd(in1, in2, mode, precision, "convolve")


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """N-dimensional cross-correlation (``scipy.signal.correlate``): a convolution with ``in2``
    flipped and conjugated."""
    in2 = promote_no_broadcast("correlate", in2, to_inexact=False)[0]
    return convolve(in1, _flip(_conj(in2)), mode, method, precision)


def _check_2d(fn, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{fn}() only supports boundary='fill', fillvalue=0")
    if aval_of(in1, fn).ndim != 2 or aval_of(in2, fn).ndim != 2:
        raise ValueError(f"{fn}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(in1, in2, mode, precision, "convolve2d")


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """2-D cross-correlation (``scipy.signal.correlate2d``), with scipy's choice of which input
    slides when in2 is the larger one."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = promote_no_broadcast("correlate2d", in1, in2)
    s1, s2 = aval_of(in1).shape, aval_of(in2).shape
    swap = all(a <= b for a, b in zip(s1, s2))
    same_shape = s1 == s2
    nd = lambda a, b: _convolve_nd(a, b, mode, precision, "correlate2d")
    if mode == "same" or (mode == "valid" and not (swap and not same_shape)) or (mode == "full" and not swap):
        return _flip(nd(_flip(in1), _conj(in2)))
    out = nd(_flip(in2), _conj(in1))
    return _conj(out) if mode == "full" else out


def _fftconvolve_unbatched(a, b, mode):
    sa, sb = aval_of(a).shape, aval_of(b).shape
    full = tuple(x + y - 1 for x, y in zip(sa, sb))
    if mode == "valid":
        no_swap, swap = all(x >= y for x, y in zip(sa, sb)), all(x <= y for x, y in zip(sa, sb))
        if not (no_swap or swap):
            raise ValueError("For 'valid' mode, One input must be at least as large as the other in "
                             "every dimension.")
        if swap:
            a, b, sa, sb = b, a, sb, sa
    if all(x == 1 or y == 1 for x, y in zip(sa, sb)):   # an outer product: no transform needed
        conv = a * b
    else:
        complex_in = dt.is_complex(aval_of(a).dtype)
        fft, ifft = (jfft.fftn, jfft.ifftn) if complex_in else (jfft.rfftn, jfft.irfftn)
        conv = ifft(fft(a, full) * fft(b, full), full)
    out = {"full": full, "same": sa, "valid": tuple(x - y + 1 for x, y in zip(sa, sb))}[mode]
    start = [(f - o) // 2 for f, o in zip(full, out)]
    return lax.slice(conv, start, [s + o for s, o in zip(start, out)])


def fftconvolve(in1, in2, mode="full", axes=None):
    """``scipy.signal.fftconvolve``: convolution over ``axes`` (all by default) through the FFT,
    the other axes mapped (they must match)."""
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")
    in1, in2 = promote_no_broadcast("fftconvolve", in1, in2)
    s1, s2 = aval_of(in1).shape, aval_of(in2).shape
    if len(s1) != len(s2):
        raise ValueError("in1 and in2 should have the same dimensionality")

    def fun(a, b):
        return _fftconvolve_unbatched(a, b, mode)
    if axes is not None:
        axes = (axes,) if not isinstance(axes, (tuple, list)) else axes
        axes = {operator.index(a) % len(s1) for a in axes}
        mapped = sorted(set(range(len(s1))) - axes)
        if any(s1[i] != s2[i] for i in mapped):
            raise ValueError(f"mapped axes must have same shape; got in1.shape={s1} in2.shape={s2} axes={tuple(axes)}")
        for ax in mapped:
            fun = _vmap(fun, in_axes=ax, out_axes=ax)
    return fun(in1, in2)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """``data`` less its mean (``type='constant'``) or less its least-squares line on each segment
    between the breakpoints ``bp`` (``'linear'``), along ``axis`` (``scipy.signal.detrend``)."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    x = promote_no_broadcast("detrend", data)[0]
    if type == "constant":
        return x - x.mean(axis, keepdims=True)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, bp, n]))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data along given axis.")
    x = jnp.moveaxis(x, axis, 0)
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        y = x[lo:hi]
        if hi - lo == 1:          # a line through one point: nothing is left
            pieces.append(jnp.zeros_like(y))
            continue
        # the line c0 + c1 t, t = (1..m)/m, in closed form (the normal equations of two unknowns)
        t = np.arange(1, hi - lo + 1) / (hi - lo)
        t = (t - t.mean()).reshape((-1,) + (1,) * (y.ndim - 1)).astype(np.finfo(y.dtype).dtype)
        centred = y - y.mean(0, keepdims=True)
        slope = (t * centred).sum(0, keepdims=True) / float((t * t).sum())
        pieces.append(centred - slope * t)
    return jnp.moveaxis(jnp.concatenate(pieces, 0), 0, axis)


from ._spectral import csd, istft, stft, welch  # noqa: E402  (they use detrend above)

__all__ += ["stft", "istft", "csd", "welch"]
