"""Convolutions: conv_general_dilated (XLA's Conv) and JAX's helpers on top of it.

Dimension numbers are kept as ``ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)``: each
spec lists the array's dimensions as (batch or output feature, feature or input feature,
spatial...), the spatial dimensions in the kernel's order. The primitive is bilinear; each
transpose is itself a convolution (the gradient convolutions), and batching folds the vmapped
axis into the batch or feature dimensions (with group counts), as JAX does.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple, Union

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, ShapedArray, param_type
from jaxprc.ir.params import DType, Enum, Int, OneOf, Record, Tuple
from jaxprc.ir.shape_poly import is_symbolic_dim, non_negative_dim
from jaxprc.passes.jvp import aval_of

from .contractions import Precision, _precision_attr, canonicalize_precision
from .elementwise import NUM
from .support.operands import aval, ints
from .shapes import DIMS, type_error as _type_error

__all__ = ["conv_general_dilated", "conv", "conv_with_general_padding", "conv_transpose",
           "conv_general_dilated_patches", "conv_general_dilated_local", "conv_dimension_numbers",
           "ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple",
           "padtype_to_pads", "conv_general_dilated_p"]


@param_type
class ConvDimensionNumbers(NamedTuple):
    """The dimensions of a convolution's operands and result, each as
    ``(batch, feature, spatial...)`` (the kernel: ``(out feature, in feature, spatial...)``)."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


# ----------------------------------------------------------- shape helpers

def _dilate(shape, dilation):
    """Sizes after inserting ``dilation - 1`` holes between elements (0 stays 0)."""
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def _stride_dim(size, window, stride):
    return non_negative_dim((size - window) // stride + 1)     # (size may be symbolic)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """The (low, high) pads of ``'VALID'``, ``'SAME'`` or ``'SAME_LOWER'`` padding: SAME keeps
    ``ceil(in / stride)`` outputs, the odd pad at the end (at the start for SAME_LOWER)."""
    if not isinstance(padding, str):
        raise TypeError(f"padtype_to_pads: padding must be 'VALID', 'SAME' or 'SAME_LOWER', got {padding!r}")
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', "
                           f"got {padding}.")
    if any(int(s) < 1 for s in window_strides):
        raise ValueError(f"padtype_to_pads: window_strides must be positive, got {tuple(window_strides)}")
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        size = size if is_symbolic_dim(size) else int(size)      # (a symbolic size: often a constant total)
        total = non_negative_dim((-(-size // int(stride)) - 1) * int(stride) + int(window) - size)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) specs of string dimension numbers like ``('NHWC', 'HWIO', 'NHWC')``."""
    specs = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(pairs):
        if not specs[i].count(a) == specs[i].count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {specs[i]}.")
        if len(set(specs[i])) != len(specs[i]):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate characters, "
                            f"got {specs[i]}.")
    spatial = [set(s) - set(p) for s, p in zip(specs, pairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError(f"convolution dimension_numbers elements must each have the same set of "
                        f"spatial characters, got {tuple(specs)}.")
    rhs = specs[1]

    def perm(spec, pair):
        rest = sorted((i for i, c in enumerate(spec) if c not in pair), key=lambda i: rhs.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1]), *rest)
    return tuple(perm(s, p) for s, p in zip(specs, pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """``ConvDimensionNumbers`` from None (``NC...``, ``OI...``, ``NC...``), string triples or itself."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(ints(s) for s in dimension_numbers))
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} and "
                        f"{len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise TypeError(f"convolution dimension_numbers must be tuple/list or None, got "
                        f"{type(dimension_numbers)}.")
    if len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if not all(isinstance(s, str) for s in dimension_numbers):
        raise TypeError(f"convolution dimension_numbers elements must be strings, got "
                        f"{tuple(map(type, dimension_numbers))}.")
    for i, s in enumerate(dimension_numbers):
        if len(s) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim of lhs "
                            f"and rhs, got {len(s)} for lhs and rhs shapes {tuple(lhs_shape)} and "
                            f"{tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The result shape of a convolution of operands in (N, C, spatial...) order."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, "
                        f"got {len(pads)}.")
    padded = [d + int(lo) + int(hi) for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding dimension: "
                         f"got padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(_stride_dim(p, int(k), int(s)) for p, k, s in zip(padded, rhs_shape[2:], strides))
    return (lhs_shape[0] // batch_group_count, int(rhs_shape[0])) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm), window_strides, padding)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


def _conv_transpose_padding(k, s, padding):
    """The (before, after) pads of one dimension of conv_transpose given the forward conv's."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    elif isinstance(padding, tuple):
        before, after = (k - p - 1 for p in padding)
        total = before + after
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return before, total - before


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), int(s), padding) for k, s in zip(rhs_t[2:], window_strides)]
    totals = [int(np.sum(p)) for p in padding]
    space = [(int(i) - 1) * int(s) - int(k) + 2 + p
             for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, totals)]
    out = (int(lhs_t[0]), int(rhs_t[0]), *space)
    return tuple(int(d) for d in np.take(out, np.argsort(out_perm)))


# -------------------------------------------------------------- primitive

conv_general_dilated_p = Primitive("conv_general_dilated")
_POSITIVE = Tuple(Int(min=1))
conv_general_dilated_p.def_params(
    window_strides=_POSITIVE, padding=Tuple(Tuple(Int(), length=2)), lhs_dilation=_POSITIVE,
    rhs_dilation=_POSITIVE,
    dimension_numbers=Record(ConvDimensionNumbers, **dict.fromkeys(ConvDimensionNumbers._fields, DIMS)),
    feature_group_count=Int(min=1), batch_group_count=Int(min=1),
    precision=OneOf(None, Enum(Precision), Tuple(Enum(Precision), length=2)),
    preferred_element_type=OneOf(None, DType()))


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                        feature_group_count, batch_group_count, precision, preferred_element_type):
    name, avals = "conv_general_dilated", [lhs, rhs]

    def fail(expected):
        return _type_error(name, avals, expected, dimension_numbers=dimension_numbers,
                           feature_group_count=feature_group_count, batch_group_count=batch_group_count)
    if lhs.dtype != rhs.dtype or not NUM(lhs.dtype):
        raise fail("operands of one numeric dtype (promotion is explicit)")
    n = lhs.ndim
    if rhs.ndim != n or n < 2:
        raise fail("lhs and rhs of equal rank >= 2")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if any(sorted(s) != list(range(n)) for s in dimension_numbers):
        raise fail(f"dimension numbers that are each a permutation of range({n})")
    for what, v in (("window_strides", window_strides), ("padding", padding), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != n - 2:
            raise fail(f"{what} of length {n - 2} (one per spatial dimension), got {v}")
        if what != "padding" and any(d < 1 for d in v):
            raise fail(f"positive {what}, got {v}")
    c_in, c_k, c_out = lhs.shape[lhs_spec[1]], rhs.shape[rhs_spec[1]], rhs.shape[rhs_spec[0]]
    if feature_group_count < 1 or batch_group_count < 1:
        raise fail("positive feature_group_count and batch_group_count")
    if feature_group_count > 1 and batch_group_count > 1:
        raise fail("at most one of feature_group_count and batch_group_count > 1")
    if c_in % feature_group_count or c_in // feature_group_count != c_k:
        raise fail(f"lhs features ({c_in}) = feature_group_count * rhs input features ({c_k})")
    if c_out % feature_group_count or c_out % batch_group_count:
        raise fail(f"rhs output features ({c_out}) divisible by the group counts")
    if lhs.shape[lhs_spec[0]] % batch_group_count:
        raise fail(f"lhs batch ({lhs.shape[lhs_spec[0]]}) divisible by batch_group_count")
    lhs_t = _dilate(np.take(lhs.shape, lhs_spec), (1, 1, *lhs_dilation))
    rhs_t = _dilate(np.take(rhs.shape, rhs_spec), (1, 1, *rhs_dilation))
    if any(d + lo + hi < 0 for d, (lo, hi) in zip(lhs_t[2:], padding)):
        raise fail(f"padding {padding} no more negative than the dilated lhs is long")
    out_t = conv_shape_tuple(lhs_t, rhs_t, window_strides, padding, batch_group_count)
    shape = tuple(out_t[i] for i in np.argsort(out_spec))
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    weak = lhs.weak_type and rhs.weak_type and preferred_element_type is None
    return ShapedArray(shape, dtype, weak)


# --------------------------------------------------------------- builders

def _canonical_padding(padding, name):
    try:
        return tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (ValueError, TypeError) as e:
        raise ValueError(f"padding argument to {name} should be a string or a sequence of (low, high) "
                         f"pairs, got {padding}") from e


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """General n-dimensional convolution with strides, padding, dilations and groups (XLA's Conv)."""
    lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nspatial = len(lhs_shape) - 2
    if lhs_dilation is None:
        lhs_dilation = (1,) * nspatial
    elif isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise ValueError("String padding is not implemented for transposed convolution using this op. "
                         "Please either exactly specify the required padding or use conv_transpose.")
    rhs_dilation = (1,) * nspatial if rhs_dilation is None else rhs_dilation
    if isinstance(padding, str):
        window = _dilate(np.take(rhs_shape, dnums.rhs_spec)[2:], rhs_dilation)
        padding = padtype_to_pads(np.take(lhs_shape, dnums.lhs_spec)[2:], window, window_strides, padding)
    padding = _canonical_padding(padding, "conv_general_dilated")
    pet = None if preferred_element_type is None else dt.canonicalize_dtype(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=ints(window_strides), padding=padding, lhs_dilation=ints(lhs_dilation),
        rhs_dilation=ints(rhs_dilation), dimension_numbers=dnums, feature_group_count=int(feature_group_count),
        batch_group_count=int(batch_group_count), precision=canonicalize_precision(precision),
        preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW/OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=None,
                              preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_DEFAULT_DNUMS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                            5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """A fractionally strided convolution (the lhs dilated by ``strides``); with
    ``transpose_kernel`` the kernel is flipped and its feature dimensions swapped, which makes it
    the gradient of ``conv`` with the same kernel."""
    lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
    ndim = len(lhs_shape)
    if ndim != len(rhs_shape) or ndim < 2:
        raise TypeError(f"conv_transpose: lhs and rhs must have one rank >= 2, got {lhs_shape} and {rhs_shape}")
    if dimension_numbers is None:
        if ndim not in _TRANSPOSE_DEFAULT_DNUMS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_DEFAULT_DNUMS[ndim]
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    k_spatial = np.take(rhs_shape, dn.rhs_spec)[2:]
    rhs_dilation = (1,) * (ndim - 2) if rhs_dilation is None else rhs_dilation
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        per_dim = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
        window = _dilate(k_spatial, rhs_dilation)
        pads = tuple(_conv_transpose_padding(int(k), int(s), p) for k, s, p in zip(window, strides, per_dim))
    else:
        pads = padding
    if transpose_kernel:
        rhs = lax.rev(rhs, dn.rhs_spec[2:])
        perm = list(range(ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = lax.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), pads, strides, rhs_dilation, dn,
                                precision=precision, preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution sees, flattened into the output feature dimension in the order
    ``c`` then the kernel's spatial dimensions (a grouped convolution with an identity kernel)."""
    lhs_aval = aval(lhs)
    filter_shape = ints(filter_shape)
    dn = conv_dimension_numbers(lhs_aval.shape, (1, 1) + filter_shape, dimension_numbers)
    size = math.prod(filter_shape)
    channels = lhs_aval.shape[dn.lhs_spec[1]]
    eye = np.broadcast_to(np.eye(size, dtype=lhs_aval.dtype), (channels, size, size))
    kernel = eye.reshape((channels * size, 1) + filter_shape)
    kernel = np.moveaxis(kernel, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    if precision is not None:
        precision = (canonicalize_precision(precision)[0], Precision.DEFAULT)
    return conv_general_dilated(lhs, np.ascontiguousarray(kernel), window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape, lhs_dilation=None,
                               rhs_dilation=None, dimension_numbers=None, precision=None):
    """An unshared convolution: one kernel per output position (``rhs``'s spatial dimensions are
    the output's, its ``I`` dimension the flattened patch), a locally connected layer."""
    pair = canonicalize_precision(precision)
    lhs_precision = None if pair is None else pair[0]
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation,
                                           rhs_dilation, dimension_numbers, lhs_precision)
    _, rhs_spec, out_spec = conv_dimension_numbers(aval(lhs).shape, (1, 1) + ints(filter_shape),
                                                   dimension_numbers)
    out_spatial, rhs_spatial = list(out_spec[2:]), list(rhs_spec[2:])
    order = sorted(range(len(out_spatial)), key=lambda k: out_spatial[k])
    dn = (((out_spec[1],), (rhs_spec[1],)), (tuple(sorted(out_spatial)), tuple(rhs_spatial[k] for k in order)))
    out = lax.dot_general(patches, rhs, dn, precision=precision)
    # dims now: spatial (sorted), batch, out feature; put batch and feature where out_spec says
    ndim = aval_of(out).ndim
    rest = [d for d in range(ndim) if d not in (out_spec[0], out_spec[1])]
    perm = [0] * ndim
    for src, dst in zip(range(ndim), rest + [out_spec[0], out_spec[1]]):
        perm[dst] = src
    return lax.transpose(out, perm)


# -------------------------------------------------------------------- jvp

ad.defjvp_bilinear(conv_general_dilated_p)


# -------------------------------------------------------------- transpose

def _reshape_axis_into(src, dst, x):
    """Merge axis ``src`` into axis ``dst`` as its major part."""
    shape = aval_of(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [s for i, s in enumerate(shape) if i != src]
    new[dst] *= shape[src]
    return lax.reshape(x, new, perm)


def _reshape_axis_out_of(src, major, x):
    """Split axis ``src`` into (``major``, rest)."""
    shape = list(aval_of(x).shape)
    shape[src:src + 1] = [major, shape[src] // major]
    return lax.reshape(x, shape)


def _swap_spec(spec):
    return (spec[1], spec[0], *spec[2:])


def _vjp_lhs_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation):
    lhs_d, rhs_d, out_d = _dilate(in_shape, lhs_dilation), _dilate(window, rhs_dilation), _dilate(out_shape, strides)
    before = [k - lo - 1 for k, (lo, _) in zip(rhs_d, padding)]
    after = [i + k - 1 - o - b for i, k, o, b in zip(lhs_d, rhs_d, out_d, before)]
    return tuple(zip(before, after))


def _vjp_rhs_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation):
    lhs_d, rhs_d, out_d = _dilate(in_shape, lhs_dilation), _dilate(window, rhs_dilation), _dilate(out_shape, strides)
    lows = [lo for lo, _ in padding]
    highs = [o - i + k - lo - 1 for o, i, k, lo in zip(out_d, lhs_d, rhs_d, lows)]
    return tuple(zip(lows, highs))


def _transpose_lhs(g, lhs_aval, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, precision, preferred_element_type):
    """The input gradient: g convolved with the flipped kernel (in/out features swapped), the
    forward strides becoming lhs dilation; groups move into the kernel's input features."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_shape, g_shape = aval_of(rhs).shape, aval_of(g).shape
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], _reshape_axis_out_of(rhs_spec[0], groups, rhs))
    pads = _vjp_lhs_padding(np.take(lhs_aval.shape, lhs_spec[2:]), np.take(rhs_shape, rhs_spec[2:]),
                            window_strides, np.take(g_shape, out_spec[2:]), padding, lhs_dilation, rhs_dilation)
    kernel = lax.rev(rhs, rhs_spec[2:])
    if aval_of(kernel).dtype != aval_of(g).dtype:
        kernel = lax.convert_element_type(kernel, aval_of(g).dtype)
    out = conv_general_dilated(g, kernel, lhs_dilation, pads, window_strides, rhs_dilation,
                               ConvDimensionNumbers(out_spec, _swap_spec(rhs_spec), lhs_spec),
                               feature_group_count=groups, precision=precision,
                               preferred_element_type=preferred_element_type)
    if batch_group_count > 1:
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], _reshape_axis_out_of(lhs_spec[1], batch_group_count, out))
    if aval_of(out).dtype != lhs_aval.dtype:
        out = lax.convert_element_type(out, lhs_aval.dtype)
    return out


def _transpose_rhs(g, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, precision, preferred_element_type):
    """The kernel gradient: lhs convolved with g, batch and feature roles swapped (so feature
    groups become batch groups and back), the forward strides becoming rhs dilation."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape, g_shape = aval_of(lhs).shape, aval_of(g).shape
    pads = _vjp_rhs_padding(np.take(lhs_shape, lhs_spec[2:]), np.take(rhs_aval.shape, rhs_spec[2:]),
                            window_strides, np.take(g_shape, out_spec[2:]), padding, lhs_dilation, rhs_dilation)
    if aval_of(lhs).dtype != aval_of(g).dtype:
        lhs = lax.convert_element_type(lhs, aval_of(g).dtype)
    out = conv_general_dilated(lhs, g, rhs_dilation, pads, lhs_dilation, window_strides,
                               ConvDimensionNumbers(_swap_spec(lhs_spec), _swap_spec(out_spec), _swap_spec(rhs_spec)),
                               feature_group_count=batch_group_count, batch_group_count=feature_group_count,
                               precision=precision, preferred_element_type=preferred_element_type)
    if aval_of(out).dtype != rhs_aval.dtype:
        out = lax.convert_element_type(out, rhs_aval.dtype)
    return out


def _conv_transpose_rule(ct, lhs, rhs, **params):
    lhs_lin, rhs_lin = ad.is_undefined_primal(lhs), ad.is_undefined_primal(rhs)
    if lhs_lin and rhs_lin:
        raise ValueError("transpose of conv_general_dilated: both operands are linear")
    if isinstance(ct, ad.Zero) or 0 in aval_of(ct).shape:
        return [ad.Zero(lhs.aval) if lhs_lin else None, ad.Zero(rhs.aval) if rhs_lin else None]
    if lhs_lin:
        return [_transpose_lhs(ct, lhs.aval, rhs, **params), None]
    return [None, _transpose_rhs(ct, lhs, rhs.aval, **params)]


ad.primitive_transposes[conv_general_dilated_p] = _conv_transpose_rule


# --------------------------------------------------------------- batching

def _move_group_axis(x, bdim, spec_dim, groups):
    """Fold the batch axis ``bdim`` into ``spec_dim`` inside each of its ``groups`` groups."""
    x = _reshape_axis_out_of(spec_dim + int(bdim <= spec_dim), groups, x)
    x = _reshape_axis_into(bdim + int(spec_dim < bdim), spec_dim + 1, x)
    return _reshape_axis_into(spec_dim, spec_dim, x)


def _conv_batch_rule(args, dims, **params):
    (lhs, rhs), (ld, rd) = args, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    size = aval_of(lhs).shape[ld] if ld is not None else aval_of(rhs).shape[rd]
    if size == 0:
        unbatched = [ShapedArray(tuple(s for i, s in enumerate(aval_of(x).shape) if i != d), aval_of(x).dtype)
                     for x, d in ((lhs, ld), (rhs, rd))]
        out = _conv_abstract_eval(*unbatched, **params)
        return lax.full((0, *out.shape), 0, out.dtype), 0
    bind = lambda l, r, **kw: conv_general_dilated_p.bind(l, r, **{**params, **kw})
    if ld is not None and rd is not None:
        if bgc > 1:
            new_lhs, kw = _reshape_axis_into(ld, lhs_spec[0], lhs), dict(batch_group_count=bgc * size)
        else:
            new_lhs, kw = _reshape_axis_into(ld, lhs_spec[1], lhs), dict(feature_group_count=fgc * size)
        out = bind(new_lhs, _reshape_axis_into(rd, rhs_spec[0], rhs), **kw)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if ld is not None:
        if bgc == 1:
            out = bind(_reshape_axis_into(ld, lhs_spec[0], lhs), rhs)
        else:
            out = bind(_move_group_axis(lhs, ld, lhs_spec[0], bgc), rhs)
        return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    if fgc == 1 and bgc == 1:
        out = bind(lhs, _reshape_axis_into(rd, rhs_spec[0], rhs))
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    groups = max(fgc, bgc)
    out = bind(lhs, _move_group_axis(rhs, rd, rhs_spec[0], groups))
    out = _reshape_axis_out_of(out_spec[1] + 1, size, _reshape_axis_out_of(out_spec[1], groups, out))
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


batching.primitive_batchers[conv_general_dilated_p] = _conv_batch_rule


# --------------------------------------------------------------- lowering

def _complex_conv(lhs, rhs, **params):
    """A complex convolution from three real ones (Gauss's trick), as XLA's CPU backend lacks one."""
    pet = params["preferred_element_type"]
    params = dict(params, preferred_element_type=None if pet is None else np.finfo(pet).dtype)
    conv_ = lambda a, b: conv_general_dilated_p.bind(a, b, **params)
    xr, xi, yr, yi = lax.real(lhs), lax.imag(lhs), lax.real(rhs), lax.imag(rhs)
    k1 = conv_(lax.add(xr, xi), yr)
    k2 = conv_(xr, lax.sub(yi, yr))
    k3 = conv_(xi, lax.add(yr, yi))
    return lax.complex(lax.sub(k1, k3), lax.add(k1, k2))


def _conv_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, precision, preferred_element_type):
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
                  feature_group_count=feature_group_count, batch_group_count=batch_group_count,
                  precision=precision, preferred_element_type=preferred_element_type)
    if dt.is_complex(ctx.avals_in[0].dtype):
        return mlir.lower_fun(_complex_conv, multiple_results=False)(ctx, lhs, rhs, **params)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    dnums = hlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
        input_spatial_dimensions=list(lhs_spec[2:]), kernel_output_feature_dimension=rhs_spec[0],
        kernel_input_feature_dimension=rhs_spec[1], kernel_spatial_dimensions=list(rhs_spec[2:]),
        output_batch_dimension=out_spec[0], output_feature_dimension=out_spec[1],
        output_spatial_dimensions=list(out_spec[2:]))
    pads = np.asarray(padding, np.int64).reshape(len(padding), 2)
    i64 = lambda v: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
    return hlo.convolution(
        mlir.aval_to_ir_type(ctx.avals_out[0]), lhs, rhs, dimension_numbers=dnums,
        feature_group_count=i64(feature_group_count), batch_group_count=i64(batch_group_count),
        window_strides=list(window_strides),
        padding=ir.DenseIntElementsAttr.get(pads, type=ir.IntegerType.get_signless(64), shape=pads.shape),
        lhs_dilation=list(lhs_dilation), rhs_dilation=list(rhs_dilation),
        window_reversal=ir.DenseBoolArrayAttr.get([False] * len(window_strides)),
        precision_config=_precision_attr(precision))


mlir.register_lowering(conv_general_dilated_p, _conv_lowering)


# ---------------------------------------------------------- jet (Taylor series)
jet.defbilinear(conv_general_dilated_p)
