"""Stax: neural-network layers as (init_fun, apply_fun) pairs, to the API of
``jax.example_libraries.stax``.

``init_fun(rng, input_shape) -> (output_shape, params)``;
``apply_fun(params, inputs, **kwargs) -> outputs`` (``rng=`` for stochastic layers). Combinators
(``serial``, ``parallel``, ``shape_dependent``) build layers from layers.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import jaxprc.numpy as jnp
from jaxprc import lax, random
from jaxprc.nn.initializers import glorot_normal, normal, ones, zeros
from jaxprc.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize

__all__ = ["Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose", "ConvTranspose",
           "BatchNorm", "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus", "Sigmoid",
           "Elu", "LeakyRelu", "Selu", "Gelu", "MaxPool", "SumPool", "AvgPool", "Flatten", "Identity",
           "FanOut", "FanInSum", "FanInConcat", "Dropout", "serial", "parallel", "shape_dependent",
           "glorot", "randn", "logsoftmax", "relu", "log_softmax", "softmax", "softplus", "sigmoid", "elu",
           "leaky_relu", "selu", "gelu", "standardize", "glorot_normal", "normal", "ones", "zeros"]


# The initializers stax uses are jax.nn.initializers', as in JAX's stax.

glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


# ------------------------------------------------------------------ layers

def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: inputs @ W + b."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        return input_shape[:-1] + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _conv_layer(shape_fn, conv_fn):
    """A convolution-like layer: kernel laid out by rhs_spec, bias broadcast along out_spec's C."""
    def make(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID", W_init=None,
             b_init=normal(1e-6)):
        lhs_spec, rhs_spec, out_spec = dimension_numbers
        one = (1,) * len(filter_shape)
        strides = strides or one
        W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

        def init_fun(rng, input_shape):
            spatial = iter(filter_shape)
            kernel_shape = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(spatial)
                            for c in rhs_spec]
            output_shape = shape_fn(input_shape, kernel_shape, strides, padding, dimension_numbers)
            bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
            k1, k2 = random.split(rng)
            return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

        def apply_fun(params, inputs, **kwargs):
            W, b = params
            return conv_fn(inputs, W, strides, padding, one, dimension_numbers) + b
        return init_fun, apply_fun
    return make


GeneralConv = _conv_layer(
    lax.conv_general_shape_tuple,
    lambda x, W, strides, padding, one, dn: lax.conv_general_dilated(x, W, strides, padding, one, one,
                                                                     dimension_numbers=dn))
GeneralConv.__name__ = "GeneralConv"
GeneralConv.__doc__ = "A general convolution layer (``lax.conv_general_dilated``)."
Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))

GeneralConvTranspose = _conv_layer(
    lax.conv_transpose_shape_tuple,
    lambda x, W, strides, padding, one, dn: lax.conv_transpose(x, W, strides, padding, dimension_numbers=dn))
GeneralConvTranspose.__name__ = "GeneralConvTranspose"
GeneralConvTranspose.__doc__ = "A general transposed-convolution layer (``lax.conv_transpose``)."
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros, gamma_init=ones):
    """Batch normalisation over ``axis`` with learned shift (beta) and scale (gamma)."""
    axis = (axis,) if jnp.isscalar(axis) else axis

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        ed = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        if scale:
            return gamma[ed] * z
        return z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying ``fun`` to its inputs."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _pooling_layer(reducer, init_val, rescaler=None):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """A pooling layer over the spatial dimensions (N and C of ``spec`` untouched)."""
        strides = strides or (1,) * len(window_shape)
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        non_spatial = (0, len(window_shape) + 1) if spec is None else (spec.index("N"), spec.index("C"))
        for i in sorted(non_spatial):
            window_shape = window_shape[:i] + (1,) + window_shape[i:]
            strides = strides[:i] + (1,) + strides[i:]

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, window_shape, strides, padding)
            ones_ = (1,) * len(window_shape)
            return lax.reduce_window_shape_tuple(input_shape, window_shape, strides, pads, ones_, ones_), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, window_shape, strides, padding)
            return rescale(out, inputs, spec) if rescale else out
        return init_fun, apply_fun
    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -np.inf)
SumPool = _pooling_layer(lax.add, 0.)


def _normalize_by_window_size(dims, strides, padding):
    """Divide by the number of in-bounds elements of each window (padding is not counted)."""
    def rescale(outputs, inputs, spec):
        non_spatial = (0, inputs.ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
        spatial = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in non_spatial)
        sizes = lax.reduce_window(jnp.ones(spatial, dtype=inputs.dtype), 0., lax.add, dims, strides, padding)
        for i in sorted(non_spatial):
            sizes = jnp.expand_dims(sizes, i)
        return outputs / sizes
    return rescale


AvgPool = _pooling_layer(lax.add, 0., _normalize_by_window_size)


def _flatten():
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()
    return init_fun, lambda params, inputs, **kwargs: jnp.reshape(inputs, (inputs.shape[0], -1))


Flatten = _flatten()
Identity = (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs)


def FanOut(num):
    """``num`` copies of the input."""
    return (lambda rng, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kwargs: [inputs] * num)


FanInSum = (lambda rng, input_shape: (input_shape[0], ())), (lambda params, inputs, **kwargs: sum(inputs))


def FanInConcat(axis=-1):
    """The inputs concatenated along ``axis``."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return input_shape[0][:ax] + (size,) + input_shape[0][ax + 1:], ()
    return init_fun, lambda params, inputs, **kwargs: jnp.concatenate(inputs, axis)


def Dropout(rate, mode="train"):
    """Keeps each input with probability ``rate`` (scaled by 1/rate) in 'train' mode; needs ``rng=``."""
    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key argument. That is, "
                             "instead of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, rng)` "
                             "where `rng` is a PRNG key (e.g. from `jaxprc.random.key`).")
        if mode == "train":
            keep = random.bernoulli(rng, rate, inputs.shape)
            return jnp.where(keep, inputs / rate, 0)
        return inputs
    return (lambda rng, input_shape: (input_shape, ())), apply_fun


# ------------------------------------------------------------- combinators

def _split_or_none(rng, n):
    return random.split(rng, n) if rng is not None else (None,) * n


def serial(*layers):
    """The layers composed in sequence."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rngs = _split_or_none(kwargs.pop("rng", None), len(layers))
        for fun, param, rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """The layers side by side: a sequence of inputs to a sequence of outputs."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(layers))
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params, inputs, **kwargs):
        rngs = _split_or_none(kwargs.pop("rng", None), len(layers))
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built by ``make_layer(input_shape)`` once the input shape is known."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
