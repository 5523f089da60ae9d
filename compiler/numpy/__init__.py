"""jaxprc.numpy: the widely used part of jax.numpy, traced into jaxprc's IR.

Numpy broadcasting is explicit ``broadcast_in_dim`` and promotion is JAX's
lattice with weak types (``jaxprc.ir.dtypes``); see ``_util.promote``.
Importing this package installs the array operators and methods on tracers
and device arrays (``jaxprc.array_methods``).
"""
from ._dtypes import (bfloat16, bool_, can_cast, complex64, complex128, complex_, complexfloating,
                      dtype, finfo, float0, float16, float32, float64, float_, floating, generic, iinfo,
                      inexact, int8, int16, int32, int64, int_, integer, isdtype, issubdtype, number,
                      promote_types, result_type, signedinteger, uint, uint8, uint16, uint32, uint64,
                      unsignedinteger)
from ._dtypes import (float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, float8_e3m4, float8_e4m3, float8_e4m3b11fnuz,
                      float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, int1, int2,
                      int4, uint1, uint2, uint4)
from ..dtypes import issubdtype  # noqa: F811 - jax.dtypes's, which knows typed-key dtypes (as JAX's jnp)
from .creation import (arange, array, asarray, empty, empty_like, eye, full, full_like, identity,
                       linspace, ones, ones_like, tri, zeros, zeros_like)
from .ufuncs import (abs, absolute, acos, acosh, add, arccos, arccosh, arcsin, arcsinh, arctan, arctan2,
                     arctanh, around, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_count,
                     bitwise_not, bitwise_or, bitwise_xor, cbrt, ceil, conj, conjugate, copysign, cos,
                     cosh, deg2rad, degrees, divide, divmod, equal, exp, exp2, expm1, fix, float_power,
                     floor, floor_divide, fmax, fmin, fmod, greater, greater_equal, heaviside, hypot,
                     imag, invert, isfinite, isinf, isnan, isneginf, isposinf, left_shift, less, less_equal, log, log1p,
                     log2, log10, logaddexp, logaddexp2, logical_and, logical_not, logical_or, logical_xor,
                     maximum, minimum, mod, multiply, nan_to_num, negative, nextafter, not_equal,
                     positive, power, rad2deg, radians, real, reciprocal, remainder, right_shift,
                     rint, round, sign, signbit, sin, sinc, sinh, sqrt, square, subtract, tan, tanh,
                     true_divide, trunc)
from .reductions import (all, amax, amin, any, argmax, argmin, count_nonzero, cumprod, cumsum,
                         cumulative_prod, cumulative_sum, max, mean, min, nanmax, nanmean, nanmin,
                         nanprod, nansum, prod, ptp, std, sum, var)
from .shape_ops import (array_split, atleast_1d, atleast_2d, atleast_3d, broadcast_arrays, broadcast_to,
                        column_stack, concat, concatenate, diff, dstack, expand_dims, flip, fliplr,
                        flipud, hsplit, hstack, matrix_transpose, meshgrid, moveaxis, ndim, pad,
                        permute_dims, ravel, repeat, reshape, roll, shape, size, split, squeeze, stack, swapaxes,
                        tile, transpose, unstack, vsplit, vstack)
from ._util import broadcast_shapes
from .selection import argsort, clip, diag, diagonal, searchsorted, select, sort, trace, tril, triu, where
from .products import dot, einsum, inner, kron, matmul, outer, tensordot, vdot, vecdot
from .indexing import argwhere, flatnonzero, nonzero, take, take_along_axis
from . import linalg
from . import fft
from .convolve import convolve, correlate
from .math_extra import (angle, bitwise_invert, bitwise_left_shift, bitwise_right_shift, fabs, frexp, gcd, i0,
                         iscomplex, iscomplexobj, isreal, isrealobj, lcm, ldexp, modf, pow, sort_complex, spacing)
from .statistics import (average, bincount, corrcoef, cov, digitize, histogram, histogram2d, histogram_bin_edges,
                         histogramdd, median, nanargmax, nanargmin, nancumprod, nancumsum, nanmedian,
                         nanpercentile, nanquantile, nanstd, nanvar, percentile, quantile)
from .setops import (intersect1d, isin, setdiff1d, setxor1d, union1d, unique, unique_all, unique_counts,
                     unique_inverse, unique_values)
from .editing import (append, argpartition, array_equiv, block, choose, compress, copy, cross,
                      delete, diagflat, dsplit, ediff1d, extract, fill_diagonal, insert, lexsort, matvec, packbits,
                      partition, place, put, put_along_axis, resize, rollaxis, rot90, trim_zeros, unpackbits, vander,
                      vecmat)
from .index_tricks import (c_, diag_indices, diag_indices_from, index_exp, indices, ix_, mask_indices, mgrid, ogrid,
                           r_, ravel_multi_index, s_, tril_indices, tril_indices_from, triu_indices,
                           triu_indices_from, unravel_index)
from .numeric import geomspace, gradient, interp, logspace, trapezoid, unwrap
from .windows import bartlett, blackman, hamming, hanning, kaiser
from .polynomial import poly, polyadd, polyder, polydiv, polyfit, polyint, polymul, polysub, polyval, roots
from .functional import apply_along_axis, apply_over_axes, frompyfunc, piecewise, ufunc, vectorize
# JAX's ufuncs (jnp.add.reduce, jnp.multiply.outer, ...) replace the plain functions of the same names.
from .functional import (add, bitwise_and, bitwise_or, bitwise_xor, logaddexp, logaddexp2, logical_and, logical_or,
                         logical_xor, maximum, minimum, multiply, negative, subtract)
from .host import (ComplexWarning, array_repr, array_str, bool, cdouble, character, csingle, double, einsum_path,
                   flexible, from_dlpack, frombuffer, fromfile, fromfunction, fromiter, fromstring, get_printoptions,
                   iterable, load, object_, printoptions, save, savez, set_printoptions, single)

import numpy as _np

pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None
ndarray = None   # set to jaxprc.Array by array_methods.install() when the runtime is present


def isscalar(element) -> bool:
    return ndim(element) == 0 if not isinstance(element, (list, tuple)) else False


def astype(x, dtype, /, *, copy: bool = False, device=None):
    return asarray(x).astype(dtype)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return all(isclose(a, b, rtol, atol, equal_nan))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + rtol * |b|`` in the common inexact type (integers too, as in JAX); the
    tolerances are strongly typed, so the result is never weak."""
    from ._util import promote
    (a, b), dtype, _ = promote("isclose", a, b, to_inexact=True)
    real_dtype = real(zeros((), dtype)).dtype
    rtol, atol = asarray(rtol, real_dtype), asarray(atol, real_dtype)
    in_range = less_equal(absolute(subtract(a, b)), add(atol, multiply(rtol, absolute(b))))
    close = logical_or(equal(a, b), logical_and(isfinite(b), in_range))
    return logical_or(close, logical_and(isnan(a), isnan(b))) if equal_nan else close


def array_equal(a1, a2, equal_nan=False):
    if shape(a1) != shape(a2):
        return asarray(False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all(eq)


from .. import array_methods as _array_methods  # noqa: E402

_array_methods.install()
