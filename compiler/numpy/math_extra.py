"""Elementwise functions built from the ufuncs: exponent/mantissa arithmetic (frexp, ldexp,
spacing), integer gcd/lcm, complex predicates, the Bessel function i0 and numpy's aliases.

frexp and ldexp work on the bit pattern with exact power-of-two scalings, so they are
exact for subnormals and the extremes of the exponent range, and differentiate as the
multiplications they are (no custom rule needed).
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc.ir import dtypes as dt

from ._util import aval_of, convert, located, promote
from .creation import as_array
from . import ufuncs as uf
from .selection import where

pow = uf.power
bitwise_invert = uf.invert
bitwise_left_shift = uf.left_shift
bitwise_right_shift = uf.right_shift

_BITS_INT = {2: dt.int16, 4: dt.int32, 8: dt.int64}


def _real_inexact(fn, x):
    (x,), dtype, _ = promote(fn, as_array(x, fn), to_inexact=True)
    if dt.is_complex(dtype):
        raise TypeError(f"{located(fn)} does not support complex inputs (got {dtype.name})")
    return x, dtype


def _pow2(k, dtype):
    """2**k exactly, for integer ``k`` in the normal exponent range of ``dtype`` (built from bits)."""
    info = dt.finfo(dtype)
    bits = _BITS_INT[dtype.itemsize]
    biased = uf.add(convert(k, bits), 1 - info.minexp)
    return lax.bitcast_convert_type(lax.shift_left(biased, convert(info.nmant, bits)), dtype)


def _scale(x, k, parts: int):
    """x * 2**k in ``parts`` exact power-of-two steps, so no factor leaves the normal range."""
    dtype = aval_of(x).dtype
    for i in range(parts, 0, -1):
        step = uf.floor_divide(k, i)
        x = uf.multiply(x, _pow2(step, dtype))
        k = uf.subtract(k, step)
    return x


def frexp(x, /):
    """``(m, e)`` with ``x = m * 2**e`` and ``0.5 <= |m| < 1``; zeros, infinities and NaN give
    ``(x, 0)``. The exponent is int32. Read from the bits in integer arithmetic, so subnormals
    are exact even where XLA flushes them to zero in float arithmetic."""
    x, dtype = _real_inexact("frexp", x)
    info = dt.finfo(dtype)
    bits = _BITS_INT[dtype.itemsize]
    c = lambda v: convert(v, bits)
    b = lax.bitcast_convert_type(lax.stop_gradient(x), bits)
    mant_mask = (1 << info.nmant) - 1
    field = uf.bitwise_and(lax.shift_right_logical(b, c(info.nmant)), c((1 << info.nexp) - 1))
    mant = uf.bitwise_and(b, c(mant_mask))
    # A subnormal's mantissa is shifted up until its leading bit is the implicit one.
    shift = uf.subtract(lax.clz(mant), c(8 * dtype.itemsize - info.nmant - 1))
    subnormal = uf.equal(field, 0)
    mant = where(subnormal, uf.bitwise_and(lax.shift_left(mant, shift), c(mant_mask)), mant)
    e = where(subnormal, uf.subtract(c(info.minexp + 1), shift), uf.add(field, c(info.minexp)))
    sign = uf.bitwise_and(b, c(-1 << (8 * dtype.itemsize - 1)))
    m = lax.bitcast_convert_type(uf.bitwise_or(uf.bitwise_or(sign, lax.shift_left(c(-info.minexp), c(info.nmant))),
                                               mant), dtype)
    special = uf.logical_or(uf.equal(field, c((1 << info.nexp) - 1)),
                            uf.logical_and(subnormal, uf.equal(uf.bitwise_and(b, c(mant_mask)), 0)))
    e = convert(where(special, c(0), e), dt.int32)
    # m's derivative is 2**-e: carried by a term that is zero in value.
    m = uf.add(m, _scale(uf.subtract(x, lax.stop_gradient(x)), uf.negative(convert(e, bits)), 2))
    return where(special, x, m), e


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` for integer ``x2``, without the overflow of computing 2**x2 first."""
    a1, a2 = aval_of(as_array(x1, "ldexp")), aval_of(as_array(x2, "ldexp"))
    if dt.is_complex(a1.dtype) or dt.is_inexact(a2.dtype):
        raise ValueError(f"{located('ldexp')}: not supported for input types ({a1.dtype.name}, "
                         f"{a2.dtype.name}); x1 must be real and x2 an integer")
    (x1,), dtype, _ = promote("ldexp", x1, to_inexact=True)
    info = dt.finfo(dtype)
    bits = _BITS_INT[dtype.itemsize]
    m, e = frexp(x1)
    # Beyond this bound the result is 0 or inf anyway; clamping keeps the steps in range.
    bound = 2 * (info.maxexp + info.nmant + 3)
    x2 = as_array(x2, "ldexp")
    k2 = uf.minimum(x2, convert(bound, a2.dtype)) if not dt.is_bool(a2.dtype) else x2
    if dt.is_signed(a2.dtype):
        k2 = uf.maximum(k2, convert(-bound, a2.dtype))
    k = uf.add(convert(k2, dt.int32), e)
    k = lax.clamp(convert(info.minexp - info.nmant - 3, dt.int32), k, convert(info.maxexp + 2, dt.int32))
    out = _scale(m, convert(k, bits), 3)
    return where(uf.logical_or(uf.isinf(x1), uf.equal(x1, 0)), x1, out)


def spacing(x, /):
    """Distance from ``x`` to the next representable number away from zero (signed like ``x``).
    Constant on each binade, so its derivative is 0 (JAX defines none)."""
    x, dtype = _real_inexact("spacing", x)
    x = lax.stop_gradient(x)
    if dtype == dt.float16:      # as numpy (and JAX) do for float16
        return uf.subtract(uf.nextafter(x, convert(np.inf, dtype)), x)
    step = uf.subtract(uf.nextafter(x, uf.copysign(convert(np.inf, dtype), x)), x)
    tiny = uf.copysign(convert(dt.finfo(dtype).smallest_subnormal, dtype), x)
    return where(uf.equal(step, 0), tiny, step)


def modf(x, /, out=None):
    """``(fractional part, integral part)``, both with the sign of ``x``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    x, _ = _real_inexact("modf", x)
    whole = where(uf.greater_equal(x, 0), uf.floor(x), uf.ceil(x))
    return uf.subtract(x, whole), whole


def fabs(x, /):
    """Absolute value as a float (booleans and integers become the default float)."""
    x, _ = _real_inexact("fabs", x)
    return uf.absolute(x)


def angle(z, deg: bool = False):
    """The argument of complex ``z`` (``atan2(imag, real)``), in degrees if ``deg``."""
    z = as_array(z, "angle")
    re, im = uf.real(z), uf.imag(z)
    a = aval_of(z)
    if not dt.is_inexact(aval_of(re).dtype) or (dt.is_float(a.dtype) and a.ndim == 0):
        re, im = convert(re, dt.default_float_dtype()), convert(im, dt.default_float_dtype())
    out = lax.atan2(im, re)
    return uf.degrees(out) if deg else out


_UNSIGNED = {dt.int8: dt.uint8, dt.int16: dt.uint16, dt.int32: dt.uint32, dt.int64: dt.uint64}


def _integer_pair(fn, x1, x2):
    """|x1| and |x2| in the unsigned type of their common dtype (so |iinfo.min| is exact and
    Euclid's loop cannot meet a negative value), and that common dtype."""
    (x1, x2), dtype, weak = promote(fn, as_array(x1, fn), as_array(x2, fn))
    if not dt.is_int(dtype):
        raise ValueError(f"Arguments to jax.numpy.{fn} must be integers (got {dtype.name}).")
    udtype = _UNSIGNED.get(dtype, dtype)
    return convert(uf.absolute(x1), udtype), convert(uf.absolute(x2), udtype), (dtype, weak)


def _gcd(a, b):
    def cond(ab):
        from .reductions import any
        return any(uf.not_equal(ab[1], 0))

    def body(ab):
        a, b = ab
        nz = uf.not_equal(b, 0)
        a, b = where(nz, b, a), where(nz, lax.rem(a, where(nz, b, convert(1, aval_of(b).dtype))), b)
        return where(uf.less(a, b), b, a), where(uf.less(a, b), a, b)
    return lax.while_loop(cond, body, (a, b))[0]


def gcd(x1, x2):
    """Greatest common divisor of ``|x1|`` and ``|x2|`` (Euclid's algorithm in one while loop)."""
    a, b, dtype = _integer_pair("gcd", x1, x2)
    return convert(_gcd(a, b), *dtype)


def lcm(x1, x2):
    """Least common multiple of ``|x1|`` and ``|x2|``; 0 when either is 0 (wrapping on overflow)."""
    a, b, dtype = _integer_pair("lcm", x1, x2)
    d = _gcd(a, b)
    zero = uf.equal(d, 0)
    out = where(zero, d, uf.multiply(a, uf.floor_divide(b, where(zero, convert(1, aval_of(d).dtype), d))))
    return convert(out, *dtype)


def iscomplexobj(x) -> bool:
    if x is None:
        return False
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = aval_of(as_array(x, "iscomplexobj")).dtype
    return dt.is_complex(np.dtype(dtype))


def isrealobj(x) -> bool:
    return not iscomplexobj(x)


def iscomplex(x):
    """Elementwise: a nonzero imaginary part."""
    x = as_array(x, "iscomplex")
    return uf.not_equal(uf.imag(x), 0)


def isreal(x):
    """Elementwise: a zero imaginary part."""
    x = as_array(x, "isreal")
    return uf.equal(uf.imag(x), 0)


def sort_complex(a):
    """Sorted along the last axis (real part first, then imaginary), as a complex array."""
    from .selection import sort
    a = sort(as_array(a, "sort_complex"), axis=-1)
    dtype = aval_of(a).dtype
    to = dt.complex128 if dtype in (dt.float64, dt.complex128) else dt.complex64
    return convert(a, to)


def i0(x):
    """Modified Bessel function of the first kind, order 0 (real inputs): ``exp(|x|) i0e(|x|)``
    through lax.bessel_i0e, as in JAX; its derivative is 0 at 0 (the kink of ``|x|``), as in JAX."""
    if dt.is_complex(aval_of(as_array(x, "i0")).dtype):
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {aval_of(x).dtype}")
    x, dtype = _real_inexact("i0", x)
    return _i0(x)


@custom_jvp
def _i0(x):
    ax = uf.absolute(x)
    return uf.multiply(uf.exp(ax), lax.bessel_i0e(ax))


@_i0.defjvp
def _i0_jvp(primals, tangents):
    from jaxprc import jvp
    out, t_out = jvp(_i0.fun, primals, tangents)
    return out, where(uf.equal(primals[0], 0), convert(0, aval_of(out).dtype), t_out)
