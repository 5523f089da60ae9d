"""jaxprc.nn.initializers: JAX's weight initializers, drawing the same numbers for the same key.

An initializer is a function ``init(key, shape, dtype=None, out_sharding=None)``;
the factories below build them (``variance_scaling`` and its named cases,
``orthogonal``, ...), as in ``jax.nn.initializers``. jaxprc has no sharding:
``out_sharding`` must be None.
"""
from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from .. import numpy as jnp
from .. import random
from ..ir import dtypes as dt

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
           "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform",
           "zeros"]


@runtime_checkable
class Initializer(Protocol):
    """The type of an initializer: ``(key, shape, dtype=None, out_sharding=None) -> array``."""
    def __call__(self, key, shape, dtype=None, out_sharding=None) -> Any:
        ...


def _default_dtype(dtype, out_sharding, name: str):
    if out_sharding is not None:
        raise NotImplementedError(f"jaxprc.nn.initializers.{name}: jaxprc has no sharding; "
                                  f"out_sharding must be None, got {out_sharding!r}")
    return dt.default_float_dtype() if dtype is None else dtype


def zeros(key, shape, dtype=None, out_sharding=None):
    """An array of zeros (the key is not used)."""
    return jnp.zeros(shape, _default_dtype(dtype, out_sharding, "zeros"))


def ones(key, shape, dtype=None, out_sharding=None):
    """An array of ones (the key is not used)."""
    return jnp.ones(shape, _default_dtype(dtype, out_sharding, "ones"))


def constant(value, dtype=None) -> Initializer:
    """An initializer filling arrays with ``value``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return jnp.full(shape, value, dtype=_default_dtype(dtype, out_sharding, "constant"))
    return init


def uniform(scale=1e-2, dtype=None) -> Initializer:
    """An initializer of uniform values in [0, scale)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _default_dtype(dtype, out_sharding, "uniform")
        return random.uniform(key, shape, dtype) * jnp.array(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
    """An initializer of normal values of mean 0 and standard deviation ``stddev``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _default_dtype(dtype, out_sharding, "normal")
        return random.normal(key, shape, dtype) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
    """An initializer of standard normal values truncated to (lower, upper), times ``stddev``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _default_dtype(dtype, out_sharding, "truncated_normal")
        return random.truncated_normal(key, lower, upper, shape, dtype) * jnp.array(stddev, dtype)
    return init


def _axes_size(shape, axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _compute_fans(shape: Sequence[int], in_axis=-2, out_axis=-1, batch_axis=()) -> tuple[float, float]:
    """(fan_in, fan_out): the input/output sizes times the receptive field (the other axes but batch)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional weights tensor "
                         "with default in_axis. Must be at least 2D or specify in_axis explicitly.")
    in_size, out_size = _axes_size(shape, in_axis), _axes_size(shape, out_axis)
    receptive_field = math.prod(shape) / in_size / out_size / _axes_size(shape, batch_axis)
    return in_size * receptive_field, out_size * receptive_field


def _complex_uniform(key, shape, dtype):
    """Uniform in the complex disk of radius sqrt(2): unit variance."""
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real_dtype)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """Complex normal of unit variance with modulus truncated to ``upper`` (by inverting its CDF)."""
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), dtype))) * random.uniform(key_r, shape, real_dtype).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None) -> Initializer:
    """An initializer of variance ``scale / n`` where ``n`` is the fan given by ``mode``
    ('fan_in', 'fan_out', 'fan_avg', 'fan_geo_avg'), drawn by ``distribution``
    ('truncated_normal', 'normal', 'uniform'; complex dtypes included)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = tuple(int(d) for d in shape)
        dtype = _default_dtype(dtype, out_sharding, "variance_scaling")
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode not in _MODES:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = jnp.array(scale / denominator, dtype=dtype)
        is_float = dt.is_float(dt.canonicalize_dtype(dtype))
        if distribution == "truncated_normal":
            if is_float:      # the constant: the standard deviation of N(0, 1) truncated to (-2, 2)
                stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
            # that of the complex standard normal with modulus truncated to 2
            stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            if is_float:
                return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
    return init


def _named_variance_scaling(name: str, scale: float, mode: str, distribution: str, variance: str):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"``variance_scaling({scale}, {mode!r}, {distribution!r})``: variance {variance}."
    return factory


glorot_uniform = _named_variance_scaling("glorot_uniform", 1.0, "fan_avg", "uniform", "2 / (fan_in + fan_out)")
glorot_normal = _named_variance_scaling("glorot_normal", 1.0, "fan_avg", "truncated_normal", "2 / (fan_in + fan_out)")
lecun_uniform = _named_variance_scaling("lecun_uniform", 1.0, "fan_in", "uniform", "1 / fan_in")
lecun_normal = _named_variance_scaling("lecun_normal", 1.0, "fan_in", "truncated_normal", "1 / fan_in")
he_uniform = _named_variance_scaling("he_uniform", 2.0, "fan_in", "uniform", "2 / fan_in")
he_normal = _named_variance_scaling("he_normal", 2.0, "fan_in", "truncated_normal", "2 / fan_in")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """An initializer of (semi-)orthogonal matrices, ``column_axis`` holding the columns, times ``scale``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _default_dtype(dtype, out_sharding, "orthogonal")
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """An initializer for 3D-5D convolution kernels: an orthogonal matrix at the spatial centre, zeros
    elsewhere (Xiao et al., 2018)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _default_dtype(dtype, out_sharding, "delta_orthogonal")
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dtype).at[(*centre, ...)].set(ortho)
    return init
