"""jaxprc.image: image resampling (``jax.image``): ``resize``, ``scale_and_translate`` and
``ResizeMethod``.

Resampling is separable: along each spatial dimension the image is contracted with a dense
(input size x output size) weight matrix built from the method's kernel, centred on the sample
positions of half-centred pixels, normalised per output pixel. Everything is differentiable in
the image and in the scale and translation.
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from jaxprc import lax
from jaxprc import numpy as jnp
from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import Tracer

__all__ = ["resize", "scale_and_translate", "ResizeMethod"]


class ResizeMethod(enum.Enum):
    """Image resize method: NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys), CUBIC_PYTORCH
    (OpenCV's a = -0.75) or AREA (the average over each output pixel's footprint)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str):
        names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR", "trilinear": "LINEAR",
                 "triangle": "LINEAR", "lanczos3": "LANCZOS3", "lanczos5": "LANCZOS5", "cubic": "CUBIC",
                 "bicubic": "CUBIC", "tricubic": "CUBIC", "cubic-pytorch": "CUBIC_PYTORCH",
                 "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"')
        return ResizeMethod[names[s]]


def _lanczos(radius):
    def kernel(x):
        y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        # near 0 the ratio is 1 (and its gradient finite: the denominator is guarded)
        out = jnp.where(x > 1e-3, jnp.divide(y, jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)), 1)
        return jnp.where(x > radius, 0.0, out)
    return kernel


def _cubic(a):
    """Keys' cubic convolution kernel with parameter ``a`` (-0.5 Keys, -0.75 OpenCV/PyTorch)."""
    def kernel(x):
        out = ((a + 2) * x - (a + 3)) * x * x + 1
        out = jnp.where(x >= 1, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, out)
        return jnp.where(x >= 2, 0.0, out)
    return kernel


def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


_AREA = object()   # not a kernel of distance: weights are overlaps of pixel footprints

_KERNELS = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, _AREA),
}

_MIN_TOTAL_WEIGHT = 1000.0 * float(np.finfo(np.float32).eps)


def _normalise(weights):
    """Each output column divided by its total weight (columns of negligible weight become 0)."""
    total = jnp.sum(weights, axis=0, keepdims=True)
    return jnp.where(jnp.abs(total) > _MIN_TOTAL_WEIGHT, jnp.divide(weights, jnp.where(total != 0, total, 1)), 0)


def _weight_matrix(in_size, out_size, scale, translation, kernel, antialias, edge_padding, radius):
    """The (in_size, out_size) resampling weights of one dimension."""
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    sample = (jnp.arange(out_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    k = 0
    if edge_padding:
        k = radius
        if antialias:
            if isinstance(scale, Tracer):
                raise TypeError("Antialiasing with edge padding requires a static scale.")
            k = math.ceil(radius * max(1.0 / float(scale), 1.0))
    taps = jnp.arange(-k, in_size + k, dtype=dtype)
    if kernel is _AREA:
        left = jnp.arange(out_size, dtype=dtype) * inv_scale - translation * inv_scale
        pix = jnp.arange(in_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum((left + inv_scale)[None, :], (pix + 1.0)[:, None])
                              - jnp.maximum(left[None, :], pix[:, None]))
    else:
        weights = kernel(jnp.abs(sample[None, :] - taps[:, None]) / kernel_scale)
    if edge_padding:     # taps beyond the edge fold onto the edge pixels
        rows = jnp.clip(taps.astype(np.int32), 0, in_size - 1)
        cols = lax.broadcast_in_dim(jnp.arange(out_size), (in_size + 2 * k, out_size), (1,))
        folded = jnp.zeros((in_size, out_size), dtype).at[rows[:, None], cols].add(weights)
        return _normalise(folded)
    weights = _normalise(weights)
    inside = jnp.logical_and(sample >= -0.5, sample <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _scale_and_translate(x, shape, spatial_dims, scale, translation, kernel, antialias, precision,
                         edge_padding=False, radius=None):
    for i, d in enumerate(spatial_dims):
        d = operator.index(d) % x.ndim
        w = _weight_matrix(x.shape[d], shape[d], scale[i], translation[i], kernel, antialias, edge_padding,
                           radius).astype(x.dtype)
        out = lax.dot_general(x, w, (((d,), (0,)), ((), ())), precision=precision)
        perm = list(range(x.ndim - 1))
        perm.insert(d, x.ndim - 1)           # the new dimension goes back to d
        x = lax.transpose(out, perm)
    return x


def _method(method):
    return ResizeMethod.from_string(method) if isinstance(method, str) else method


def _check_shape(shape, image):
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) != image.ndim:
        raise ValueError(f"shape must have length equal to the number of dimensions of x;  {shape} vs "
                         f"{image.shape}")
    return shape


def _inexact(x):
    x = jnp.asarray(x)
    return x if dt.is_inexact(x.dtype) else x.astype(dt.default_float_dtype())


def scale_and_translate(image, shape, spatial_dims, scale, translation, method, antialias=True,
                        precision=lax.Precision.HIGHEST):
    """Resample ``image`` to ``shape``: a point x of ``spatial_dims`` maps to ``x * scale +
    translation`` (half-centred pixels); samples outside the input are zero."""
    image = _inexact(image)
    shape = _check_shape(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    common = jnp.result_type(scale, translation)
    common = common if dt.is_inexact(common) else dt.default_float_dtype()
    scale, translation = scale.astype(common), translation.astype(common)
    return _scale_and_translate(image, shape, tuple(spatial_dims), scale, translation, kernel, antialias,
                                precision, edge_padding=method == ResizeMethod.CUBIC_PYTORCH and not antialias,
                                radius=radius)


def _resize_nearest(x, shape):
    for d in [i for i in range(x.ndim) if x.shape[i] != shape[i]]:
        m, n = x.shape[d], shape[d]
        # float32 positions, as JAX computes them
        offsets = np.floor((np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m) / np.float32(n))
        index = [slice(None)] * x.ndim
        index[d] = offsets.astype(np.int32)
        x = x[tuple(index)]
    return x


def resize(image, shape, method, antialias=True, precision=lax.Precision.HIGHEST):
    """``image`` resampled to ``shape`` (every dimension whose size changes is resampled)."""
    image = jnp.asarray(image)
    shape = _check_shape(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image = _inexact(image)
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    dims = tuple(i for i in range(len(shape)) if image.shape[i] != shape[i])
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _scale_and_translate(image, shape, dims, scale, [0.0] * len(dims), kernel, antialias, precision,
                                edge_padding=method == ResizeMethod.CUBIC_PYTORCH and not antialias,
                                radius=radius)
