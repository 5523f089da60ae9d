"""Common activation functions and softmax-style reductions, as in jax.nn.

Definitions on jaxprc.numpy; ``relu`` and ``softplus`` carry custom JVP rules
(relu's gradient at 0 is 0; softplus's derivative is the sigmoid, without overflow).
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from jaxprc import lax
from jaxprc.api import jit
from jaxprc.transformations.custom_derivatives import custom_jvp
from jaxprc import numpy as jnp
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import DimExpr
from jaxprc.ir.tracing import ConcretizationTypeError, Tracer
from jaxprc.lax import elementwise as ew
from jaxprc.numpy._util import aval_of, convert, promote
from jaxprc.numpy.creation import as_array

__all__ = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "silu", "swish", "gelu", "elu",
           "celu", "selu", "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu", "soft_sign",
           "log_softmax", "softmax", "logsumexp", "one_hot", "standardize", "hard_swish"]


def _inexact(fn, x):
    (x,), dtype, weak = promote(fn, x, to_inexact=True)
    return x, dtype, weak


@custom_jvp
def relu(x):
    """``max(x, 0)``; its derivative at 0 is 0."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda t, ans, x: jnp.where(jnp.asarray(x) > 0, t, jnp.zeros_like(t)))


@custom_jvp
def relu6(x):
    """``min(max(x, 0), 6)``; its derivative is 0 at both kinks, 0 and 6 (as JAX's)."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda t, ans, x: jnp.where(jnp.logical_and(jnp.asarray(x) > 0, jnp.asarray(x) < 6),
                                          t, jnp.zeros_like(t)))


def sigmoid(x):
    """``1 / (1 + exp(-x))`` (the ``logistic`` primitive; floating inputs only, as in JAX)."""
    return ew.logistic_p.bind(jnp.asarray(x))


def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``, without overflow."""
    return jnp.negative(softplus(jnp.negative(x)))


@jit         # as in JAX: a unit for transposition (see mish)
def softplus(x):
    """``log(1 + exp(x))`` without overflow (its derivative is logaddexp's: sigmoid(x))."""
    return jnp.logaddexp(x, 0)


def silu(x):
    """``x * sigmoid(x)`` (also called swish)."""
    x = jnp.asarray(x)              # not promoted: integer input is an error, as in JAX
    return jnp.multiply(x, sigmoid(x))


swish = silu


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit: the tanh approximation by default, the erf form otherwise.

    The exact form is ``x/2 * erfc(-x/sqrt(2))``: erfc keeps the tiny negative values of the far
    left tail (1 + erf(x) would round them to -0). Both forms multiply in JAX's order so the
    float32 results agree bit for bit."""
    # The constants are strongly typed numpy values, so the result is never weak (as in JAX).
    x, dtype, _ = _inexact("gelu", x)
    if approximate:
        c = convert(np.sqrt(2 / np.pi), dtype)
        inner = jnp.multiply(c, jnp.add(x, jnp.multiply(0.044715, jnp.power(x, 3))))
        return jnp.multiply(x, jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner))))
    half_x = jnp.multiply(0.5, x)
    return jnp.multiply(half_x, ew.erfc_p.bind(jnp.multiply(jnp.negative(x), convert(np.sqrt(0.5), dtype))))


def elu(x, alpha=1.0):
    """``x`` for positive ``x``, ``alpha * (exp(x) - 1)`` otherwise (exp only of non-positive values)."""
    x = as_array(x, "elu")        # (an integer x meets the float 0.0: JAX's promotion, not to_inexact)
    safe = jnp.where(jnp.greater(x, 0), 0.0, x)
    return jnp.where(jnp.greater(x, 0), x, jnp.multiply(alpha, jnp.expm1(safe)))


def celu(x, alpha=1.0):
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    x = as_array(x, "celu")
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def selu(x):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return jnp.multiply(scale, elu(x, alpha))


def leaky_relu(x, negative_slope=1e-2):
    """``x`` where ``x >= 0``, ``negative_slope * x`` elsewhere."""
    x = as_array(x, "leaky_relu")
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


def hard_tanh(x):
    """``x`` clipped to [-1, 1]; the slope is 1 on the closed interval, so 1 at ±1 (as JAX's)."""
    x = jnp.asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def hard_sigmoid(x):
    """``relu6(x + 3) / 6``, a piecewise-linear sigmoid."""
    return jnp.divide(relu6(jnp.add(x, 3.0)), 6.0)


def hard_silu(x):
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def soft_sign(x):
    """``x / (|x| + 1)``."""
    return jnp.divide(x, jnp.add(jnp.abs(x), 1))


def _max(x, axis, where=None):
    """The (gradient-free) maximum along ``axis``, kept as a size-1 axis."""
    # -inf as initial (as in JAX) so empty or fully masked slices have a maximum. Only there: op by
    # op, an -inf initial would be a value of its own, which debug_infs reports (JAX's is inside
    # the jitted reduction).
    empty = aval_of(x, "max").size == 0
    initial = -np.inf if where is not None or empty else None
    return lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True, where=where, initial=initial))


def _max_shift(x, axis, where=None):
    """``_max`` with non-finite maxima replaced by 0, so all-infinite slices stay finite."""
    m = _max(x, axis, where)
    return jnp.where(jnp.isfinite(m), m, jnp.zeros_like(m))


def _masked(x, where):
    """``x`` with the positions ``where`` excludes set to -inf: they add exp(-inf) = 0 to the sums,
    and the select passes them no gradient, so an all-excluded slice gives finite zeros there."""
    return x if where is None else jnp.where(where, x, -np.inf)


def _no_bool(fn, x):
    """As JAX, the softmaxes refuse booleans (they subtract the maximum before anything else)."""
    if dt.is_bool(aval_of(x, fn).dtype):
        raise TypeError(f"{fn}: sub does not accept dtype bool (pass a numeric array)")


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x, axis)``, computed stably; -inf at the positions ``where`` excludes."""
    _no_bool("log_softmax", x)
    x, _, _ = _inexact("log_softmax", x)
    shifted = jnp.subtract(_masked(x, where), _max(x, axis, where))
    total = jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True, where=where)
    out = jnp.subtract(shifted, jnp.log(total))
    return out if where is None else jnp.where(where, out, -np.inf)


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x), axis)``, computed stably; 0 at the positions ``where`` excludes."""
    _no_bool("softmax", x)
    x, _, _ = _inexact("softmax", x)
    unnormalized = jnp.exp(jnp.subtract(_masked(x, where), _max(x, axis, where)))
    out = jnp.divide(unnormalized, jnp.sum(unnormalized, axis=axis, keepdims=True, where=where))
    return out if where is None else jnp.where(where, out, 0.0)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """``log(sum(b * exp(a), axis))`` without overflow; with ``return_sign`` also the sign of the sum."""
    a, _, _ = _inexact("logsumexp", a)
    shift = _max_shift(a, axis, where)
    e = jnp.exp(jnp.subtract(a, shift))
    if b is not None:
        e = jnp.multiply(b, e)
    total = jnp.sum(e, axis=axis, keepdims=True, where=where)
    sign = jnp.sign(total)
    out = jnp.add(jnp.log(jnp.abs(total) if return_sign or b is not None else total), shift)
    if not keepdims:
        axes = tuple(range(aval_of(a).ndim)) if axis is None else axis
        out, sign = jnp.squeeze(out, axes), jnp.squeeze(sign, axes)
    return (out, sign) if return_sign else out


def _static_num_classes(num_classes):
    """one_hot's ``num_classes`` as an int (or a symbolic dimension), known while tracing."""
    if isinstance(num_classes, DimExpr):
        return num_classes
    if isinstance(num_classes, Tracer):
        try:
            num_classes = num_classes._concrete("jax.nn.one_hot argument `num_classes`")
        except ConcretizationTypeError as e:
            raise ConcretizationTypeError(
                f"{str(e).splitlines()[0]}\nThe error arose in jax.nn.one_hot argument `num_classes`.\n"
                "Under jit it must be a Python int: mark it static (static_argnums / static_argnames).") from None
    return operator.index(num_classes)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """``x``'s integers as one-hot vectors of length ``num_classes`` along ``axis``."""
    num_classes = _static_num_classes(num_classes)
    x = jnp.asarray(x)
    x_dtype = aval_of(x).dtype
    if not dt.is_int(x_dtype):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={np.dtype(x_dtype).name}",
                      DeprecationWarning, stacklevel=2)
    if x_dtype == np.bool_:     # (JAX's words: its class counter is an iota of x's dtype)
        raise TypeError("iota does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, "
                        "complexfloating.")
    dtype = dt.default_float_dtype() if dtype is None else dt.canonicalize_dtype(jnp._dtypes.to_dtype(dtype))
    in_shape = aval_of(x).shape
    if not -len(in_shape) - 1 <= axis <= len(in_shape):
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {len(in_shape) + 1}")
    axis = axis % (len(in_shape) + 1)
    shape = in_shape[:axis] + (num_classes,) + in_shape[axis:]
    # One broadcast puts x's axes around the class axis; the iota counts along it.
    spread = lax.broadcast_in_dim(x, shape, tuple(d for d in range(len(shape)) if d != axis))
    classes = lax.broadcasted_iota(x_dtype, shape, axis)
    return convert(jnp.equal(spread, classes), dtype)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *, algorithm: str = "fast"):
    """``(x - mean) * rsqrt(variance + epsilon)``, the statistics taken along ``axis`` over the
    elements ``where`` selects unless given. ``algorithm="fast"`` (JAX's default) takes the
    variance as ``mean(x^2) - mean(x)^2`` clipped at 0; ``"stable"`` as ``mean((x - mean)^2)``."""
    x, _, _ = _inexact("standardize", x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.clip(jnp.subtract(jnp.mean(jnp.square(x), axis, keepdims=True, where=where),
                                             jnp.square(mean)), 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.multiply(jnp.subtract(x, mean), lax.rsqrt(jnp.add(variance, epsilon)))
