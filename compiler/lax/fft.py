"""The ``fft`` primitive: discrete Fourier transforms over the last 1-3 axes (``stablehlo.fft``).

``fft_type`` picks the transform: FFT and IFFT map complex to complex, RFFT
maps real ``(..., n)`` to the half spectrum ``(..., n // 2 + 1)``, IRFFT maps a
half spectrum back to real ``(..., n)``; ``fft_lengths`` are the transformed
trailing axes' logical sizes. Every kind is linear: its jvp is itself, and its
transpose is an FFT of the cotangent (with the Hermitian weights of the half
spectrum for RFFT/IRFFT).
"""
from __future__ import annotations

import enum
import math

import numpy as np

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir.shape_poly import is_constant_shape, is_symbolic_dim
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, param_type
from jaxprc.ir.params import Enum, Size, Tuple
from jaxprc.passes.vmap import moveaxis

from . import elementwise as ew
from .support.operands import aval
from .shapes import broadcast_in_dim, type_error

__all__ = ["fft", "fft_p", "FftType"]


@param_type
class FftType(enum.IntEnum):
    """Which transform ``fft`` computes."""
    FFT = 0      # complex -> complex, forward
    IFFT = 1     # complex -> complex, inverse (scaled by 1/n)
    RFFT = 2     # real -> half spectrum
    IRFFT = 3    # half spectrum -> real


# ----------------------------------------------------------------- primitive

fft_p = Primitive("fft")
fft_p.def_params(fft_type=Enum(FftType), fft_lengths=Tuple(Size(min=0)))

_REAL_OF = {dt.complex64: dt.float32, dt.complex128: dt.float64}
_COMPLEX_OF = {dt.float32: dt.complex64, dt.float64: dt.complex128}


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    def fail(expected):
        return type_error("fft", [x], expected, fft_type=fft_type.name, fft_lengths=fft_lengths)
    k = len(fft_lengths)
    if not 1 <= k <= 3 or k > x.ndim:
        raise fail("1 to 3 fft_lengths, no more than the operand's rank")
    minor = x.shape[-k:]
    if fft_type == FftType.RFFT:
        if x.dtype not in _COMPLEX_OF:
            raise fail("a real operand (f32 or f64) for RFFT")
        if minor != fft_lengths:
            raise fail("trailing dimensions equal to fft_lengths")
        return x.update(shape=x.shape[:-k] + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,),
                        dtype=_COMPLEX_OF[x.dtype])
    if x.dtype not in _REAL_OF:
        raise fail(f"a complex operand (c64 or c128) for {fft_type.name}")
    if fft_type == FftType.IRFFT:
        if minor[:-1] != fft_lengths[:-1] or minor[-1] != fft_lengths[-1] // 2 + 1:
            raise fail("trailing dimensions equal to fft_lengths, the last one n // 2 + 1 (a half spectrum)")
        return x.update(shape=x.shape[:-k] + fft_lengths, dtype=_REAL_OF[x.dtype])
    if minor != fft_lengths:
        raise fail("trailing dimensions equal to fft_lengths")
    return x


# ------------------------------------------------------------------ builder

def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str) and fft_type.upper() in FftType.__members__:
        return FftType[fft_type.upper()]
    raise TypeError(f"fft: unknown FFT type {fft_type!r}; expected an FftType or one of "
                    "'fft', 'ifft', 'rfft', 'irfft'")


def fft(x, fft_type, fft_lengths):
    """The ``fft_type`` transform of ``x`` over its last ``len(fft_lengths)`` axes (JAX's
    ``lax.fft``): the operand is converted to the transform's input dtype first (real for RFFT,
    complex otherwise); no lengths at all is the identity (after conversion)."""
    typ = _fft_type(fft_type)
    a = aval(x)
    if typ == FftType.RFFT:
        if dt.is_complex(a.dtype):
            raise ValueError("fft: only real valued inputs supported for rfft")
        dtype = dt.to_inexact_dtype(a.dtype)
    else:
        dtype = _to_complex(a.dtype)
    x = ew.convert_element_type(x, dtype)
    lengths = tuple(n if is_symbolic_dim(n) else int(n) for n in fft_lengths)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)


def _to_complex(dtype):
    """The complex dtype holding ``dtype``'s values (JAX's ``to_complex_dtype``)."""
    if dt.is_complex(dtype):
        return dtype
    return dt.complex128 if dt.to_inexact_dtype(dtype) == dt.float64 else dt.complex64


# --------------------------------------------------------- jvp and transpose

ad.defjvp_linear(fft_p)


def _hermitian_weights(like, n: int, scale: float = 1.0):
    """Half-spectrum weights along the last axis of ``like`` (broadcast to its shape and dtype):
    1 at DC (and at Nyquist when ``n`` is even), 2 elsewhere: how many entries of the full
    spectrum each half-spectrum entry stands for; times ``scale``."""
    a = aval(like)
    w = np.full(a.shape[-1], 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return broadcast_in_dim((w * scale).astype(a.dtype), a.shape, (a.ndim - 1,))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if isinstance(ct, ad.Zero):
        return [ad.Zero(x.aval)]
    n = math.prod(fft_lengths)
    if fft_type == FftType.RFFT:
        # x -> Re(sum_k ct_k e^{-2pi i kn/N}) over the full spectrum, of which the half
        # spectrum holds each interior entry once: IRFFT of conj(ct) with weights undone.
        spectrum = ew.div(ew.conj(ct), _hermitian_weights(ct, fft_lengths[-1]))
        return [ew.mul(fft_p.bind(spectrum, fft_type=FftType.IRFFT, fft_lengths=fft_lengths),
                       np.asarray(n, x.aval.dtype))]
    if fft_type == FftType.IRFFT:
        # The half-spectrum entries that stand for two entries of the full one count twice;
        # conj: JAX's convention for cotangents of complex values.
        spectrum = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
        return [ew.conj(ew.mul(spectrum, _hermitian_weights(spectrum, fft_lengths[-1], 1 / n)))]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]   # the DFT matrix is symmetric


ad.primitive_transposes[fft_p] = _fft_transpose


# ------------------------------------------------------------------ batching

def _fft_batch_rule(args, dims, *, fft_type, fft_lengths):
    """The transform acts on the trailing axes: the batch axis goes in front."""
    (x,), (d,) = args, dims
    return fft_p.bind(moveaxis(x, d, 0), fft_type=fft_type, fft_lengths=fft_lengths), 0


batching.primitive_batchers[fft_p] = _fft_batch_rule


# ------------------------------------------------------------------ lowering

def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    (out,) = ctx.avals_out
    if not is_constant_shape(fft_lengths):      # a symbolic length (export): JAX's refusal
        raise NotImplementedError("Shape polymorphism for FFT with non-constant fft_length is not "
                                  "implemented for TPU and GPU")
    if out.size == 0:     # XLA rejects transforms of empty arrays: the result is empty too
        return mlir.zeros(out)
    return hlo.fft(x, hlo.FftTypeAttr.get(fft_type.name), list(fft_lengths))


def _fft_lowering_gpu(ctx, x, *, fft_type, fft_lengths):
    """cuFFT's multi-dimensional C2R transform assumes Hermitian symmetry along every axis, numpy
    (and XLA on CPU) only along the last: an N-D IRFFT is an (N-1)-D IFFT over the outer axes,
    then a 1-D IRFFT."""
    (out,) = ctx.avals_out
    if fft_type != FftType.IRFFT or len(fft_lengths) == 1 or out.size == 0:
        return _fft_lowering(ctx, x, fft_type=fft_type, fft_lengths=fft_lengths)
    rank = ctx.avals_in[0].ndim
    first = rank - len(fft_lengths)
    to_front = list(range(rank))
    to_front.insert(first, to_front.pop())       # the half-spectrum axis before the outer ones
    x = hlo.transpose(x, to_front)
    x = hlo.fft(x, hlo.FftTypeAttr.get("IFFT"), list(fft_lengths[:-1]))
    back = list(range(rank))
    back.append(back.pop(first))
    x = hlo.transpose(x, back)
    return hlo.fft(x, hlo.FftTypeAttr.get("IRFFT"), [fft_lengths[-1]])


mlir.register_lowering(fft_p, _fft_lowering)
mlir.register_lowering(fft_p, _fft_lowering_gpu, platform="cuda")
mlir.register_lowering(fft_p, _fft_lowering_gpu, platform="rocm")


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(fft_p)
