"""Windowed-FFT spectral analysis of jax.scipy.signal: ``stft``, ``istft``, ``csd``, ``welch``.

A signal is cut into segments of ``nperseg`` samples ``nperseg - noverlap`` apart (one gather
with a static index table), each detrended, windowed and transformed; ``csd``/``welch`` average
the (cross) periodograms, ``istft`` inverts by windowed overlap-add (one scatter-add) divided by
the summed squared window. Numbers follow JAX (hence scipy) including its scalings, boundary
extensions and padding.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from jaxprc import numpy as jnp
from jaxprc.ir import dtypes as dt
from jaxprc.numpy import fft as jfft

from ..numpy.convolve import promote_no_broadcast
from .signal import detrend

__all__ = ["stft", "istft", "csd", "welch"]


def _window(window, nperseg, dtype):
    """The window as an array of nperseg samples: 'hann' (periodic) here, other names through
    scipy's get_window when scipy is installed (as JAX does), or the given 1-D array."""
    if isinstance(window, str) and window == "hann":
        win = np.sin(np.linspace(0, np.pi, nperseg, endpoint=False)) ** 2 if nperseg > 1 else np.ones(1)
    elif isinstance(window, (str, tuple)):
        try:
            from scipy.signal import get_window
        except ImportError as err:
            raise ImportError(f"scipy must be available to use window={window!r}") from err
        win = get_window(window, nperseg)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        return win.astype(dtype)
    return jnp.asarray(win, dtype=dtype)


def _triage_segments(window, nperseg, input_length, dtype):
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else int(nperseg)
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, using nperseg={input_length}")
            n = input_length
        return _window(window, n, dtype), n
    win = _window(window, None, dtype)
    n = win.size if nperseg is None else int(nperseg)
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


def _odd_ext(x, n):
    left = 2 * x[..., :1] - x[..., n:0:-1]
    right = 2 * x[..., -1:] - x[..., -2:-(n + 2):-1]
    return jnp.concatenate([left, x, right], axis=-1)


def _pad_last(mode, **kw):
    return lambda x, n: jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode, **kw)


_BOUNDARIES = {"even": _pad_last("reflect"), "odd": _odd_ext, "constant": _pad_last("edge"),
               "zeros": _pad_last("constant", constant_values=0.0), None: lambda x, n: x}


def _segments(x, nperseg, noverlap):
    """(..., n) -> (..., segments, nperseg)."""
    n = x.shape[-1]
    starts = np.arange(0, n - nperseg + 1, nperseg - noverlap)
    return x[..., starts[:, None] + np.arange(nperseg)[None, :]]


def _fft_segments(x, win, detrend_func, nperseg, noverlap, nfft, sides):
    if np.issubdtype(x.dtype, np.integer):
        x = x.astype(win.dtype)
    seg = detrend_func(_segments(x, nperseg, noverlap))
    if dt.is_complex(win.dtype) and not dt.is_complex(seg.dtype):
        seg = seg.astype(_complex_dtype(seg.dtype))
    seg = win * seg
    return jfft.fft(seg, n=nfft) if sides == "twosided" else jfft.rfft(seg.real, n=nfft)


def _detrend_func(detrend_type):
    if isinstance(detrend_type, str):
        return lambda d: detrend(d, axis=-1, type=detrend_type)
    if callable(detrend_type):
        return detrend_type
    if not detrend_type:
        return lambda d: d
    raise ValueError(f"Unsupported detrend type: {detrend_type}")


def _complex_dtype(dtype):
    return np.result_type(dtype, np.complex64)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided, scaling,
              axis, mode, boundary=None, padded=False):
    """(frequencies, segment times, per-segment spectra on ``axis``, segments last)."""
    fn = "stft" if mode == "stft" else "csd"
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: {list(_BOUNDARIES)}")
    if y is None:
        (x,) = promote_no_broadcast(fn, x)
        ys = x
        outer = tuple(s for i, s in enumerate(x.shape) if i != operator.index(axis) % x.ndim)
    else:
        x, ys = promote_no_broadcast(fn, x, y)
        if x.ndim != ys.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {ys.ndim}).")
        drop = lambda s: tuple(v for i, v in enumerate(s) if i != operator.index(axis) % x.ndim)
        try:
            outer = np.broadcast_shapes(drop(x.shape), drop(ys.shape))
        except ValueError as err:
            raise ValueError("x and y cannot be broadcast together.") from err
    axis = operator.index(axis) % x.ndim
    result_dtype = _complex_dtype(x.dtype)
    freq_dtype = np.finfo(result_dtype).dtype
    if nperseg is not None and int(nperseg) < 1:
        raise ValueError("nperseg must be a positive integer")
    win, nperseg = _triage_segments(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nfft = nperseg if nfft is None else int(nfft)
    if x.size == 0 or ys.size == 0:
        shape = outer[:axis] + (min(x.shape[axis], ys.shape[axis]),) + outer[axis:]
        return jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype), jnp.zeros(shape, result_dtype)
    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        ys = jnp.moveaxis(ys, axis, -1)
        n = max(x.shape[-1], ys.shape[-1])     # the shorter one is zero-padded
        grow = lambda a: jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, n - a.shape[-1])])
        x, ys = grow(x), grow(ys)
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    ext = _BOUNDARIES[boundary]
    x = ext(x, nperseg // 2)
    if y is not None:
        ys = ext(ys, nperseg // 2)
    if padded:
        nadd = (-(x.shape[-1] - nperseg) % nstep) % nperseg
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        if y is not None:
            ys = jnp.pad(ys, [(0, 0)] * (ys.ndim - 1) + [(0, nadd)])
    detrend_func = _detrend_func(detrend_type)
    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    sides = "onesided" if return_onesided else "twosided"
    if return_onesided and (dt.is_complex(x.dtype) or (y is not None and dt.is_complex(ys.dtype))):
        sides = "twosided"
        warnings.warn("Input data is complex, switching to return_onesided=False")
    freqs = (jfft.fftfreq(nfft, 1 / fs, dtype=freq_dtype) if sides == "twosided"
             else jfft.rfftfreq(nfft, 1 / fs, dtype=freq_dtype))
    spec = lambda a: _fft_segments(a, win, detrend_func, nperseg, noverlap, nfft, sides)
    result = spec(x)
    if y is not None:
        result = jnp.conjugate(result) * spec(ys)
    elif mode == "psd":
        result = jnp.conjugate(result) * result
    result = result * scale
    if sides == "onesided" and mode == "psd":     # fold the negative frequencies in
        end = None if nfft % 2 else -1
        result = result.at[..., 1:end].multiply(2)
    time = jnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nstep, dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = result.real
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """Short-time Fourier transform: ``(frequencies, times, Zxx)``, frequencies on ``axis``
    and segments last (``scipy.signal.stft``)."""
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
        return_onesided=True, scaling="density", axis=-1, average="mean"):
    """Cross power spectral density by Welch's method: ``(frequencies, Pxy)``, the segments'
    periodograms averaged by mean or bias-corrected median (``scipy.signal.csd``)."""
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                              scaling, axis, "psd")
    if y is not None:
        pxy = pxy + 0j
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                n = pxy.shape[-1]
                bias = 1 + sum(1.0 / (k + 1) - 1.0 / k for k in range(2, n, 2))
                if dt.is_complex(pxy.dtype):
                    pxy = _median_last(jnp.real(pxy)) + 1j * _median_last(jnp.imag(pxy))
                else:
                    pxy = _median_last(pxy)
                pxy = pxy / np.asarray(bias, dtype=np.finfo(pxy.dtype).dtype)
            elif average == "mean":
                pxy = pxy.mean(axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def _median_last(a):
    """The median over the last axis (NaN when any entry is NaN, as sorting puts NaNs last)."""
    n = a.shape[-1]
    a = jnp.sort(a, axis=-1)
    m = (a[..., (n - 1) // 2] + a[..., n // 2]) / 2
    return jnp.where(jnp.isnan(a[..., -1]), np.nan, m)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
          return_onesided=True, scaling="density", axis=-1, average="mean"):
    """Power spectral density by Welch's method: ``(frequencies, Pxx)`` (``scipy.signal.welch``)."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
                     average=average)
    return freqs, pxx.real


def _overlap_add(frames, step):
    """(..., frames, length) -> (..., step * (frames - 1) + length), overlapping frames summed."""
    *batch, nframes, length = frames.shape
    idx = np.arange(nframes)[:, None] * step + np.arange(length)[None, :]
    out = jnp.zeros((*batch, step * (nframes - 1) + length), frames.dtype)
    return out.at[..., idx].add(frames)


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, input_onesided=True,
          boundary=True, time_axis=-1, freq_axis=-2):
    """Inverse short-time Fourier transform by windowed overlap-add: ``(times, x)``
    (``scipy.signal.istft``)."""
    Zxx = jnp.asarray(Zxx)
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis, time_axis = operator.index(freq_axis) % Zxx.ndim, operator.index(time_axis) % Zxx.ndim
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    Zxx = Zxx.astype(_complex_dtype(Zxx.dtype))
    n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
    nperseg = int(nperseg or n_default)
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0)
    nfft = int(nfft)
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = int(noverlap or nperseg // 2)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    outer = tuple(i for i in range(Zxx.ndim) if i not in (time_axis, freq_axis))
    Zxx = jnp.transpose(Zxx, outer + (freq_axis, time_axis))
    ifunc = jfft.irfft if input_onesided else jfft.ifft
    xsubs = ifunc(Zxx, axis=-2, n=nfft)[..., :nperseg, :]
    win = _window(window, nperseg, xsubs.dtype)
    if win.shape[0] != nperseg:
        raise ValueError(f"window must have length of {nperseg}")
    xsubs = xsubs * win.sum()                     # undoes the 'spectrum' scaling
    frames = jnp.swapaxes(xsubs * win[:, None], -2, -1)
    x = _overlap_add(frames, nperseg - noverlap)
    norm = _overlap_add(jnp.broadcast_to(win * win, (xsubs.shape[-1], nperseg)), nperseg - noverlap)
    if boundary:
        x, norm = x[..., nperseg // 2:-(nperseg // 2)], norm[..., nperseg // 2:-(nperseg // 2)]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return time, x
