"""jax.random's distributions beyond the basic draws, bit for bit.

Each sampler follows JAX 0.10's algorithm step by step: the same key splits
in the same order, the same uniform/normal draws, the same arithmetic in the
same dtypes (weak types included), so that a seed gives JAX's numbers. The
rejection samplers (gamma, poisson, binomial) keep JAX's loop structure: a
loop runs until every lane has accepted, and a lane's result depends only on
its own key, so ``vmap`` over keys gives each key's unbatched draw.

Gamma samples come from the ``random_gamma`` primitive (defined here, as JAX's
``jax.random.random_gamma_p``), whose lowering is ``gamma_samples`` below and
whose derivative in ``a`` is ``lax.random_gamma_grad`` (implicit reparameterisation); beta, dirichlet, t,
chisquare, f and generalized_normal draw through it and so have gradients
with respect to their shape parameters too.

Parameters are passed to each sampler's ``jit`` as traced arguments (only
shapes, dtypes and modes are static), as in JAX, so Python scalars are weak
and nothing is constant-folded that JAX would compute at run time.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..engine import dispatch
from ..interpreters import ad, batching, mlir
from ..ir import dtypes as dt
from ..ir.core import Primitive
from ..ir.params import Bool, Optional, Str
from ..ir.tracing import get_aval
from ..lax.elementwise import IS_FLOAT
from ..lax.shapes import type_error
from .prng import (PRNGKeyArray, prngs, threefry_prng_impl, _check_key, _check_shape, _float_dtype, _normal, _shape, _split, _static, _uniform,
                     _unstack2, bernoulli, split)
from ..transformations.vmap import vmap

__all__ = ["exponential", "gamma", "loggamma", "beta", "dirichlet", "poisson", "binomial", "multinomial",
           "geometric", "laplace", "logistic", "cauchy", "pareto", "weibull_min", "rayleigh", "maxwell",
           "double_sided_maxwell", "generalized_normal", "lognormal", "chisquare", "f", "t",
           "multivariate_normal", "ball", "orthogonal", "rademacher", "triangular", "wald", "random_gamma_p"]


# ------------------------------------------------------------------ helpers

def _param_shape(name: str, shape, *params):
    """The sample shape: ``shape`` checked against the parameters' shapes, or their broadcast."""
    param_shapes = [np.shape(p) for p in params]
    if shape is None:
        return jnp.broadcast_shapes(*param_shapes) if param_shapes else ()
    shape = _shape(shape)
    _check_shape(name, shape, *param_shapes)
    return shape


def _check_safe_cast(name: str, dtype, *params):
    """Parameters must cast to the sample dtype without loss under JAX's promotion rules."""
    for p in params:
        src = jnp.result_type(p)
        if src != dtype and jnp.result_type(p, dtype) != dtype:
            raise ValueError(f"In arguments to {name}, cannot safely cast argument of type {src} to {dtype}")


def _float_args(name: str, key, shape, dtype, *params, kinds=("float",)):
    """A float sampler's checked arguments: its base key, sample shape and dtype."""
    base, _ = _check_key(name, key)
    dtype = _float_dtype(name, dtype, kinds)
    shape = _param_shape(name, shape, *params)
    _check_safe_cast(name, dtype, *params)
    return base, shape, dtype


def _standard_sampler(name: str, impl, doc: str):
    """The public ``name(key, shape=(), dtype=None)`` of a float sampler without parameters."""
    def sampler(key, shape=(), dtype=None):
        base, _ = _check_key(name, key)
        return impl(base, shape=_shape(shape), dtype=_float_dtype(name, dtype))
    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = doc
    return sampler


def _int_dtype(name: str, dtype):
    dtype = dt.default_int_dtype() if dtype is None else dt.canonicalize_dtype(dtype)
    if not dt.is_int(dtype) or dt.is_bool(dtype):
        raise ValueError(f"dtype argument to `{name}` must be an int dtype, got {dtype}")
    return dtype


def _uniform_of(key, shape, dtype, minval=0., maxval=1.):
    return _uniform(key, minval, maxval, shape=shape, dtype=dtype)


def _split_n(key, n: int):
    keys = _split(key, shape=(n,))
    return [keys[i] for i in range(n)]


def _isnan(x):
    return lax.ne(x, x)


def _const(x, value):
    return np.array(value, get_aval(x).dtype)


# -------------------------------------------------------- simple transforms

@_static("shape", "dtype")
def _exponential(key, shape, dtype):
    u = _uniform_of(key, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))     # log of 1 - u: never log(0)


exponential = _standard_sampler("exponential", _exponential, "Exponential(1) samples ``-log(1 - u)``.")


@_static("shape", "dtype")
def _laplace(key, shape, dtype):
    u = _uniform_of(key, shape, dtype, -1. + dt.finfo(dtype).epsneg, 1.)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


laplace = _standard_sampler("laplace", _laplace, "Laplace(0, 1) samples by inversion.")


@_static("shape", "dtype")
def _logistic(key, shape, dtype):
    x = _uniform_of(key, shape, dtype, dt.finfo(dtype).tiny, 1.)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


logistic = _standard_sampler("logistic", _logistic, "Standard logistic samples ``log(u / (1 - u))``.")


@_static("shape", "dtype")
def _cauchy(key, shape, dtype):
    u = _uniform_of(key, shape, dtype, dt.finfo(dtype).eps, 1.)
    return lax.tan(lax.mul(_const(u, np.pi), lax.sub(u, _const(u, 0.5))))


cauchy = _standard_sampler("cauchy", _cauchy, "Standard Cauchy samples ``tan(pi (u - 1/2))``.")


@_static("shape", "dtype")
def _pareto(key, b, shape, dtype):
    b = lax.convert_element_type(b, dtype)
    return lax.exp(_exponential(key, shape=shape, dtype=dtype) / b)


def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) samples ``exp(e / b)``, ``e`` exponential."""
    base, shape, dtype = _float_args("pareto", key, shape, dtype, b)
    return _pareto(base, b, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _weibull_min(key, scale, concentration, shape, dtype):
    u = _uniform_of(key, shape, dtype, 0, 1)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale     # the inverse CDF


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples of the given scale and concentration, by inversion."""
    base, _ = _check_key("weibull_min", key)
    return _weibull_min(base, scale, concentration, shape=_shape(shape), dtype=_float_dtype("weibull_min", dtype))


@_static("shape", "dtype")
def _rayleigh(key, scale, shape, dtype):
    u = _uniform_of(key, shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), _const(scale, -2))))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples ``scale * sqrt(-2 log u)``."""
    base, shape, dtype = _float_args("rayleigh", key, shape, dtype, scale)
    return _rayleigh(base, scale, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _wald(key, mean, shape, dtype):
    k1, k2 = _unstack2(_split(key, shape=(2,)))
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = _normal(k1, shape=shape, dtype=dtype)
    z = _uniform_of(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian, scale 1) samples by Michael, Schucany and Haas's transformation."""
    base, shape, dtype = _float_args("wald", key, shape, dtype, mean)
    return _wald(base, mean, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _triangular(key, left, mode, right, shape, dtype):
    left, mode, right = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape) for v in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = _uniform_of(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular samples on [left, right] with the given mode, by inversion."""
    base, shape, dtype = _float_args("triangular", key, shape, dtype, left, mode, right)
    return _triangular(base, left, mode, right, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _lognormal(key, sigma, shape, dtype):
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(_normal(key, shape=shape, dtype=dtype) * sigma)


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal samples ``exp(sigma * n)``, ``n`` standard normal (float or complex)."""
    base, shape, dtype = _float_args("lognormal", key, shape, dtype, sigma, kinds=("float", "complex"))
    return _lognormal(base, sigma, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _geometric(key, p, shape, dtype):
    p = jnp.asarray(p)
    if not dt.is_inexact(p.dtype):
        p = p.astype(dt.default_float_dtype())
    u = _uniform_of(key, shape, p.dtype)
    u = jnp.where(u == 0, 1, u)      # as JAX: u = 0 read as 1, keeping log finite
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    return (lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1).astype(dtype)


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) samples: the number of Bernoulli(p) trials up to the first success (>= 1)."""
    base, _ = _check_key("geometric", key)
    dtype = _int_dtype("geometric", dtype)
    shape = _param_shape("geometric", shape, p)
    return _geometric(base, p, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _rademacher(key, shape, dtype):
    return (2 * bernoulli(key, 0.5, shape) - 1).astype(dtype)


def rademacher(key, shape=(), dtype=None):
    """Random signs, -1 or +1 with probability 1/2 each."""
    base, _ = _check_key("rademacher", key)
    dtype = dt.default_int_dtype() if dtype is None else dt.canonicalize_dtype(dtype)
    return _rademacher(base, shape=_shape(shape), dtype=dtype)


@_static("shape", "dtype")
def _maxwell(key, shape, dtype):
    return jnp.linalg.norm(_normal(key, shape=(*shape, 3), dtype=dtype), axis=-1)


maxwell = _standard_sampler("maxwell", _maxwell, "Maxwell samples: the length of a standard normal 3-vector.")


@_static("shape", "dtype")
def _double_sided_maxwell(key, loc, scale, shape, dtype):
    params_shape = jnp.broadcast_shapes(np.shape(loc), np.shape(scale))
    # As JAX: the sample shape is (shape or the parameters' shape) + the parameters' shape.
    shape = (shape or params_shape) + params_shape
    maxwell_key, sign_key = _unstack2(_split(key, shape=(2,)))
    magnitude = _maxwell(maxwell_key, shape=shape, dtype=dtype)
    sign = _rademacher(sign_key, shape=shape, dtype=dtype)
    return sign * magnitude * scale + loc


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell samples: a Maxwell magnitude with a random sign, scaled and shifted."""
    base, _ = _check_key("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    return _double_sided_maxwell(base, loc, scale, shape=_shape(shape), dtype=dtype)


# -------------------------------------------------------------------- gamma

def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha, 1) sample: Marsaglia and Tsang's rejection method (JAX's steps and keys).

    alpha < 1 is boosted: Gamma(alpha) ~ Gamma(alpha + 1) * U^(1/alpha), the boost taken in
    log space for ``loggamma`` (no underflow for tiny alpha)."""
    dtype = get_aval(alpha).dtype
    zero, one, two, minus_one = (np.array(v, dtype) for v in (0, 1, 2, -1))
    one_over_two, one_over_three, squeeze = (np.array(v, dtype) for v in (0.5, 1. / 3., 0.0331))

    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, one_over_three)
    c = lax.div(one_over_three, lax.sqrt(d))

    def rejected(kXVU):
        _, X, V, U = kXVU
        return lax.bitwise_and(
            lax.ge(U, lax.sub(one, lax.mul(squeeze, lax.mul(X, X)))),
            lax.ge(lax.log(U), lax.add(lax.mul(X, one_over_two),
                                       lax.mul(d, lax.add(lax.sub(one, V), lax.log(V))))))

    def next_x_v(kxv):
        key, subkey = _unstack2(_split(kxv[0], shape=(2,)))
        x = _normal(subkey, shape=(), dtype=dtype)
        return key, x, lax.add(one, lax.mul(x, c))

    def propose(kXVU):
        key, x_key, u_key = _split_n(kXVU[0], 3)
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_x_v, (x_key, zero, minus_one))
        return key, lax.mul(x, x), lax.mul(lax.mul(v, v), v), _uniform_of(u_key, (), dtype)

    key, subkey = _unstack2(_split(key, shape=(2,)))
    _, _, V, _ = lax.while_loop(rejected, propose, (key, zero, one, two))   # starts rejected
    if log_space:
        log_u = lax.neg(_exponential(subkey, shape=(), dtype=dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    u = 1 - _uniform_of(subkey, (), dtype)
    boost = lax.select(boost_mask, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, V), boost)


def gamma_key_shape(impl):
    """The shape of one key's data for ``random_gamma[impl]`` (threefry when None)."""
    if impl is not None and impl not in prngs:
        raise ValueError(f"random_gamma: unknown PRNG implementation {impl!r}; registered: {sorted(prngs)}")
    return prngs[impl or "threefry2x32"].key_shape


def gamma_samples(key, a, *, log_space: bool, impl=None):
    """``random_gamma``'s definition: each key (``uint32[*k, *key_shape]`` data of the named
    implementation, threefry when None) split into one key per element of its block of ``a``
    (``a.shape = (*k, ...)``), one Marsaglia-Tsang draw per element: vmapped for threefry keys,
    one after another (``lax.map``) for the others, as JAX draws them."""
    prng = prngs[impl or "threefry2x32"]
    words = prng.key_shape
    a_aval = get_aval(a)
    if a_aval.size == 0:
        return jnp.zeros(a_aval.shape, a_aval.dtype)
    nk = get_aval(key).ndim - len(words)
    per_key = math.prod(a_aval.shape[nk:])
    keys = vmap(lambda k: _split(PRNGKeyArray(k, prng), shape=(per_key,))._base)(
        lax.reshape(key, (math.prod(get_aval(key).shape[:nk]), *words)))
    keys, alphas = lax.reshape(keys, (a_aval.size, *words)), lax.reshape(a, (a_aval.size,))
    draw = lambda k, a: _gamma_one(PRNGKeyArray(k, prng), a, log_space)
    if prng is threefry_prng_impl:
        samples = vmap(draw)(keys, alphas)
    else:
        samples = lax.map(lambda ka: draw(*ka), (keys, alphas))
    return lax.reshape(samples, a_aval.shape)


# ------------------------------------------------------------- the random_gamma primitive
# (jax.random.random_gamma_p): its lowering is gamma_samples above, its derivative in a
# lax.random_gamma_grad (implicit reparameterisation).

random_gamma_p = Primitive("random_gamma")
random_gamma_p.def_impl(functools.partial(dispatch.apply_primitive, random_gamma_p))
random_gamma_p.def_params(log_space=Bool(), impl=Optional(Str()))


@random_gamma_p.def_abstract_eval
def _random_gamma_abstract_eval(key, a, *, log_space, impl=None):
    words = gamma_key_shape(impl)
    nk = key.ndim - len(words)
    if (key.dtype != np.uint32 or key.shape[nk:] != words or not IS_FLOAT(a.dtype)
            or a.shape[:nk] != key.shape[:nk]):
        raise type_error("random_gamma", [key, a], f"{impl or 'threefry'} key data uint32[*k, "
                         f"{', '.join(map(str, words))}] and a float array of shape (*k, ...)", log_space=log_space)
    return a


def _gamma_lowering(ctx, key, a, *, log_space, impl=None):
    return mlir.lower_fun(functools.partial(gamma_samples, log_space=log_space, impl=impl),
                          multiple_results=False)(ctx, key, a)


mlir.register_lowering(random_gamma_p, _gamma_lowering)


def _gamma_sample_grad(sample, a, log_space):
    """d sample / d a, one element at a time as JAX computes it on CPU (``lax.map``: the per-element
    loops round as JAX's do); in log space d log(x) = dx / x, x = 0 (rounded) read as the smallest float."""
    aval = get_aval(a)
    samples, alphas = (lax.reshape(v, (aval.size,)) for v in (sample, a))
    if log_space:
        samples = lax.exp(samples)
        tiny = lax.full_like(samples, dt.finfo(aval.dtype).tiny)
        samples = lax.select(lax.eq(samples, _const(samples, 0)), tiny, samples)
        grad = lambda args: lax.div(lax.random_gamma_grad(*args), args[1])
    else:
        grad = lambda args: lax.random_gamma_grad(*args)
    return lax.reshape(lax.map(grad, (alphas, samples)), aval.shape)


def _random_gamma_jvp(primals, tangents, *, log_space, **impl):
    key, a = primals
    ans = random_gamma_p.bind(key, a, log_space=log_space, **impl)
    if isinstance(tangents[1], ad.Zero):
        return ans, ad.Zero(get_aval(ans))
    return ans, lax.mul(tangents[1], _gamma_sample_grad(ans, a, log_space))


ad.primitive_jvps[random_gamma_p] = _random_gamma_jvp


def _random_gamma_batch(args, dims, *, log_space, **impl):
    """Both operands with the batch axis in front (keys lead ``a``'s shape)."""
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
    key, a = (batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return random_gamma_p.bind(key, a, log_space=log_space, **impl), 0


batching.primitive_batchers[random_gamma_p] = _random_gamma_batch


@_static("shape", "dtype", "log_space")
def _gamma(key, a, shape, dtype, log_space):
    if shape is None:
        shape = np.shape(a)
    else:
        _check_shape("gamma", shape, np.shape(a))
    a = lax.convert_element_type(a, dtype)
    if np.shape(a) != shape:
        a = jnp.broadcast_to(a, shape)
    if key._impl is threefry_prng_impl:
        return random_gamma_p.bind(key._base, a, log_space=log_space)
    if prngs.get(key._impl.name) is not key._impl:
        raise NotImplementedError(f"jaxprc.random: the gamma family (gamma, loggamma, beta, dirichlet, chisquare, "
                                  f"f, t, poisson) draws from registered PRNG implementations only, got "
                                  f"{key.dtype} ({key._impl.name})")
    return random_gamma_p.bind(key._base, a, log_space=log_space, impl=key._impl.name)


def _gamma_args(name, key, shape, dtype):
    base, _ = _check_key(name, key)
    return base, (None if shape is None else _shape(shape)), _float_dtype(name, dtype)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples; differentiable in ``a`` (implicit reparameterisation)."""
    base, shape, dtype = _gamma_args("gamma", key, shape, dtype)
    return _gamma(base, a, shape=shape, dtype=dtype, log_space=False)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a, 1) samples, computed in log space (accurate for small ``a``)."""
    base, shape, dtype = _gamma_args("loggamma", key, shape, dtype)
    return _gamma(base, a, shape=shape, dtype=dtype, log_space=True)


@_static("shape", "dtype")
def _beta(key, a, b, shape, dtype):       # shape: checked against a's and b's by beta
    a, b = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape) for v in (a, b))
    key_a, key_b = _unstack2(_split(key, shape=(2,)))
    log_gamma_a = _gamma(key_a, a, shape=shape, dtype=dtype, log_space=True)
    log_gamma_b = _gamma(key_b, b, shape=shape, dtype=dtype, log_space=True)
    # gamma_a / (gamma_a + gamma_b), scaled by the larger so neither underflows.
    log_max = lax.max(log_gamma_a, log_gamma_b)
    gamma_a = jnp.exp(log_gamma_a - log_max)
    gamma_b = jnp.exp(log_gamma_b - log_max)
    return gamma_a / (gamma_a + gamma_b)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples from two log-gamma draws; differentiable in ``a`` and ``b``."""
    base, shape, dtype = _float_args("beta", key, shape, dtype, a, b)
    return _beta(base, a, b, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _dirichlet(key, alpha, shape, dtype):
    from ..nn import softmax
    if np.ndim(alpha) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {np.ndim(alpha)}")
    if shape is None:
        shape = np.shape(alpha)[:-1]
    else:
        _check_shape("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    # Gamma draws in log space (small alpha underflows otherwise), normalised by softmax.
    log_gamma = _gamma(key, alpha, shape=shape + np.shape(alpha)[-1:], dtype=dtype, log_space=True)
    return softmax(log_gamma, -1)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples over the last axis; differentiable in ``alpha``."""
    base, _ = _check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    return _dirichlet(base, alpha, shape=None if shape is None else _shape(shape), dtype=dtype)


@_static("shape", "dtype")
def _t(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = _unstack2(_split(key, shape=(2,)))
    n = _normal(key_n, shape=shape, dtype=dtype)
    half_df = lax.div(df, _const(n, 2))
    g = _gamma(key_g, half_df, shape=shape, dtype=dtype, log_space=False)
    return n * jnp.sqrt(half_df / g)


def t(key, df, shape=None, dtype=None):
    """Student's t samples with ``df`` degrees of freedom."""
    base, shape, dtype = _float_args("t", key, shape, dtype, df)
    return _t(base, df, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _chisquare(key, df, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    two = _const(df, 2)
    log_g = _gamma(key, lax.div(df, two), shape=shape, dtype=dtype, log_space=True)
    return lax.mul(jnp.exp(log_g), two)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with ``df`` degrees of freedom (2 * Gamma(df / 2))."""
    base, shape, dtype = _float_args("chisquare", key, shape, dtype, df)
    return _chisquare(base, df, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _f(key, dfnum, dfden, shape, dtype):
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    key_dfd, key_dfn = _unstack2(_split(key, shape=(2,)))
    chi2_dfn = _chisquare(key_dfn, dfnum, shape=shape, dtype=dtype)
    chi2_dfd = _chisquare(key_dfd, dfden, shape=shape, dtype=dtype)
    return lax.div(lax.div(chi2_dfn, dfnum), lax.div(chi2_dfd, dfden))


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples: a ratio of scaled chi-square draws."""
    base, shape, dtype = _float_args("f", key, shape, dtype, dfnum, dfden)
    return _f(base, dfnum, dfden, shape=shape, dtype=dtype)


@_static("shape", "dtype")
def _generalized_normal(key, p, shape, dtype):
    key_g, key_r = _unstack2(split(key))
    g = _gamma(key_g, 1 / p, shape=shape, dtype=dtype, log_space=False)
    r = _rademacher(key_r, shape=shape, dtype=dtype)
    return r * g ** (1 / p)


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal samples, density proportional to ``exp(-|x|^p)``."""
    base, _ = _check_key("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    return _generalized_normal(base, p, shape=_shape(shape), dtype=dtype)


@_static("d", "shape", "dtype")
def _ball(key, p, d, shape, dtype):
    k1, k2 = _unstack2(split(key))
    g = _generalized_normal(k1, p, shape=(*shape, d), dtype=dtype)
    e = _exponential(k2, shape=shape, dtype=dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


def _static_int(name: str, what: str, x) -> int:
    try:
        return int(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: `{what}` must be a concrete integer, got {x!r}") from e


def ball(key, d: int, p: float = 2, shape=(), dtype=None):
    """Points uniform in the unit ``p``-norm ball of dimension ``d``."""
    base, _ = _check_key("ball", key)
    dtype = _float_dtype("ball", dtype)
    return _ball(base, p, d=_static_int("ball", "d", d), shape=_shape(shape), dtype=dtype)


# ------------------------------------------------------------ linear algebra

def _linalg(name: str, caller: str):
    """``jaxprc.numpy.linalg.<name>``, or a clear error while jaxprc has no such factorisation."""
    fn = getattr(jnp.linalg, name, None)
    if fn is None:
        raise NotImplementedError(f"jaxprc.random.{caller} needs jaxprc.numpy.linalg.{name}, which this "
                                  f"build of jaxprc does not have yet")
    return fn


@_static("n", "m", "shape", "dtype")
def _orthogonal(key, n, m, shape, dtype):
    z = _normal(key, shape=(*shape, max(n, m), min(n, m)), dtype=dtype)
    q, r = _linalg("qr", "orthogonal")(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)     # signs fixed so that the distribution is Haar
    return jnp.swapaxes(x, -1, -2) if n < m else x


def orthogonal(key, n: int, shape=(), dtype=None, m: int | None = None):
    """Haar-random orthogonal (unitary for complex dtypes) ``n x m`` matrices (``m = n`` by default)."""
    base, _ = _check_key("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype, ("float", "complex"))
    n = _static_int("orthogonal", "n", n)
    m = n if m is None else _static_int("orthogonal", "m", m)
    return _orthogonal(base, n=n, m=m, shape=_shape(shape), dtype=dtype)


@_static("shape", "dtype", "method")
def _multivariate_normal(key, mean, cov, shape, dtype, method):
    if np.ndim(mean) < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {np.ndim(mean)}")
    if np.ndim(cov) < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {np.ndim(cov)}")
    n = np.shape(mean)[-1]
    if np.shape(cov)[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {np.shape(cov)}.")
    if shape is None:
        shape = jnp.broadcast_shapes(np.shape(mean)[:-1], np.shape(cov)[:-2])
    else:
        _check_shape("normal", shape, np.shape(mean)[:-1], np.shape(cov)[:-2])
    if method == "svd":
        u, s, _ = _linalg("svd", "multivariate_normal")(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = _linalg("eigh", "multivariate_normal")(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = _linalg("cholesky", "multivariate_normal")(cov)
    samples = _normal(key, shape=shape + np.shape(mean)[-1:], dtype=dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


def _in_common_inexact_dtype(*xs):
    """The arrays in their common dtype, or in the default float type where that is not inexact."""
    xs = [jnp.asarray(x) for x in xs]
    inexact = jnp.result_type(*xs)
    if not dt.is_inexact(inexact):
        inexact = dt.default_float_dtype()
    return [x.astype(inexact) for x in xs]


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Multivariate normal samples ``mean + factor @ n``, ``factor`` from ``cov`` by ``method``
    ('cholesky', 'eigh' or 'svd')."""
    base, _ = _check_key("multivariate_normal", key)
    mean, cov = _in_common_inexact_dtype(mean, cov)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = mean.dtype if dtype is None else dt.canonicalize_dtype(dtype)
    if not dt.is_float(dtype):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got {dtype}")
    return _multivariate_normal(base, mean, cov, shape=None if shape is None else _shape(shape), dtype=dtype,
                                method=method)


# ------------------------------------------------------------------ poisson

@_static("shape", "dtype", "max_iters")
def _poisson_knuth(key, lam, shape, dtype, max_iters):
    """Knuth's method: count uniforms until their product drops below exp(-lam) (small lam)."""
    def body(carry):
        i, k, rng, log_prod = carry
        rng, subkey = _unstack2(_split(rng, shape=(2,)))
        k = lax.select(log_prod > -lam, k + 1, k)
        u = _uniform_of(subkey, shape, np.dtype(np.float32))
        return i + 1, k, rng, log_prod + jnp.log(u)

    def cond(carry):
        i, log_prod = carry[0], carry[3]
        return jnp.any(log_prod > -lam) & (i < max_iters)

    k_init = jnp.zeros(shape, dtype)
    log_prod_init = jnp.zeros(shape, np.float32)
    k = lax.while_loop(cond, body, (0, k_init, key, log_prod_init))[1]
    return (k - 1).astype(dtype)


@_static("shape", "dtype", "max_iters")
def _poisson_rejection(key, lam, shape, dtype, max_iters):
    """Hormann's transformed rejection (PTRS) for lam >= 10."""
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = _split_n(key, 3)
        u = _uniform_of(subkey_0, shape, lam.dtype) - 0.5
        v = _uniform_of(subkey_1, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, _, accepted, _ = carry
        return jnp.any(~accepted) & (i < max_iters)

    k_init = jnp.full(shape, -1, lam.dtype)
    accepted = jnp.zeros(shape, bool)
    k = lax.while_loop(cond, body, (0, k_init, accepted, key))[1]
    return k.astype(dtype)


@_static("shape", "dtype")
def _poisson(key, lam, shape, dtype):
    # Knuth below 10 (and for NaN), rejection from 10 up: as JAX, NumPy and TensorFlow.
    use_knuth = _isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0.0))
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    max_iters = dtype.type(dt.iinfo(dtype).max)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape=shape, dtype=dtype, max_iters=max_iters),
                        _poisson_rejection(key, lam_rejection, shape=shape, dtype=dtype, max_iters=max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) samples (integers)."""
    base, _ = _check_key("poisson", key)
    if base._impl is not threefry_prng_impl:    # as JAX (its sampler relies on threefry's splitting)
        raise NotImplementedError(f"`poisson` is only implemented for the threefry2x32 RNG, not {base._impl.tag}")
    dtype = dt.default_int_dtype() if dtype is None else dt.canonicalize_dtype(dtype)
    shape = np.shape(lam) if shape is None else _shape(shape)
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), np.float32)
    return _poisson(base, lam, shape=shape, dtype=dtype)


# ----------------------------------------------------------------- binomial

_STIRLING_TAIL = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287]


def _stirling_approx_tail(k):
    """log(k!) minus its Stirling approximation: tabulated for k <= 9, a series beyond."""
    table = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    use_table = k <= 9
    k = lax.clamp(_const(k, 0.0), k, _const(k, 9.0))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(use_table, table[jnp.asarray(jnp.floor(k), dtype="int32")], approx)


def _binomial_inversion(key, count, prob, shape, max_iters):
    """Sums of geometric waiting times until they pass ``count`` (small count * prob)."""
    log1minusprob = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = _unstack2(_split(key, shape=(2,)))
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform_of(subkey, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, key

    def cond(carry):
        i, geom_sum = carry[0], carry[2]
        return jnp.any(geom_sum <= count) & (i < max_iters)

    init = (0, jnp.zeros(shape, prob.dtype), jnp.zeros(shape, prob.dtype), key)
    return lax.while_loop(cond, body, init)[1] - 1


def _btrs(key, count, prob, shape, max_iters):
    """Hormann's transformed rejection with squeeze (BTRS) for count * prob > 10."""
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = _split_n(key, 3)
        u = _uniform_of(subkey_0, shape, prob.dtype)
        v = _uniform_of(subkey_1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m)
              + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k)
              - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, accepted = carry[0], carry[2]
        return jnp.any(~accepted) & (i < max_iters)

    init = (0, jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1]


@_static("shape", "dtype")
def _binomial(key, count, prob, shape, dtype):
    if shape is None:
        shape = jnp.broadcast_shapes(np.shape(count), np.shape(prob))
    else:
        _check_shape("binomial", shape, np.shape(count), np.shape(prob))
    prob = jnp.asarray(prob)
    if not dt.is_inexact(prob.dtype):
        prob = prob.astype(dt.default_float_dtype())
    count = jnp.broadcast_to(lax.convert_element_type(count, prob.dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)      # sample with the smaller probability
    count_nan_or_neg = _isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = _isnan(q)
    q_l_0 = q < 0.0
    q = lax.select(q_is_nan | q_l_0, lax.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)       # as np.random.binomial for float counts
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    max_iters = dtype.type(dt.finfo(dtype).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, max_iters).astype(dtype),
                         _btrs(key, count_btrs, q_btrs, shape, max_iters).astype(dtype))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) samples (as floats): inversion for n * p <= 10, BTRS rejection above."""
    base, _ = _check_key("binomial", key)
    dtype = _float_dtype("binomial", dtype)
    return _binomial(base, n, p, shape=None if shape is None else _shape(shape), dtype=dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts over the last axis: one binomial per category, in turn, on what
    the earlier categories left."""
    base, _ = _check_key("multinomial", key)
    n, p = _in_common_inexact_dtype(n, p)
    shape = p.shape if shape is None else _shape(shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = split(base, ratios.shape[0])

    def draw(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, ratio.clip(0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(draw, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)
