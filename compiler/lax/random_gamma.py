"""Gamma sampling primitives: random_gamma (Gamma(a, 1) samples) and random_gamma_grad (their
derivative with respect to ``a``).

``random_gamma[log_space] key a`` draws one sample per element of ``a`` from
raw threefry key data ``key`` (``uint32[*k, 2]``, ``k`` a prefix of ``a``'s
shape), or with ``impl`` (the name of a registered PRNG implementation, e.g.
``rbg``) that implementation's key data: each key is split into one key per
element of its block of ``a``,
and each sample is Marsaglia and Tsang's rejection sampler (as in JAX's
``random_gamma_p``; the algorithm itself is ``jaxprc.random``'s). Its
derivative in ``a`` is the implicit-reparameterisation one below.

random_gamma_grad. Implicit reparameterisation: a sample ``x = F^-1(u; a)`` of the gamma CDF
``F = igamma(a, x)`` moves with ``a`` as ``dx/da = -(dF/da) / (dF/dx)``. The
numerator comes from the series (``x <= 1`` or ``x <= a``) or the continued
fraction of the incomplete gamma function, differentiated term by term; the
same recurrences, stopping rules and edge cases as JAX's
``lax.random_gamma_grad``, so gradients of gamma samples agree bit for bit.

The primitive is elementwise on operands of one shape and float dtype;
float16/bfloat16 are computed in float32, as in JAX.
"""
from __future__ import annotations

import functools

import numpy as np

from jaxprc.engine import dispatch
from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Bool, Optional, Str

from . import operands as _ops
from .control_flow import map as _map, while_loop
from .elementwise import IS_FLOAT, elementwise
from .shapes import type_error

__all__ = ["random_gamma_grad", "random_gamma_grad_p", "random_gamma_p"]

random_gamma_grad_p = elementwise("random_gamma_grad", 2, IS_FLOAT)


def random_gamma_grad(a, x):
    """Elementwise derivative of Gamma(``a``, 1) samples ``x`` with respect to ``a``."""
    a, x = _ops.match_python_scalars("random_gamma_grad", (a, x))
    shape = np.broadcast_shapes(_ops.aval(a).shape, _ops.aval(x).shape)
    a, x = (lax.broadcast_in_dim(v, shape, range(len(shape) - _ops.aval(v).ndim, len(shape)))
            if _ops.aval(v).shape != shape else v for v in (a, x))
    return random_gamma_grad_p.bind(a, x)


def _any(pred):
    return lax.reduce_or(pred, tuple(range(_ops.aval(pred).ndim)))


def _c(x, value):
    """``value`` as a scalar of ``x``'s dtype (typed, so no weak-type promotion enters)."""
    return np.array(value, _ops.aval(x).dtype)


def _select(pred, on_true, on_false):
    return lax.select(pred, on_true, on_false)


def _series(x, a, enabled, eps):
    """dx/da from the power series of igamma (x small or x <= a)."""
    def body(vals):
        enabled, r, c, ans, x_, dc_da, dans_da = vals
        r_new = lax.add(r, _c(r, 1))
        dc_da_new = lax.sub(lax.mul(dc_da, lax.div(x_, r_new)), lax.div(lax.mul(c, x_), lax.mul(r_new, r_new)))
        dans_da_new = lax.add(dans_da, dc_da_new)
        c_new = lax.mul(c, lax.div(x_, r_new))
        ans_new = lax.add(ans, c_new)
        going = lax.bitwise_and(enabled, lax.gt(lax.abs(lax.div(dc_da_new, dans_da_new)), _c(x_, eps)))
        new = (r_new, c_new, ans_new, x_, dc_da_new, dans_da_new)
        return (going, *(_select(enabled, n, o) for n, o in zip(new, vals[1:])))

    one, zero = lax.full_like(a, 1), lax.full_like(a, 0)
    vals = while_loop(lambda v: _any(v[0]), body, (enabled, a, one, one, x, zero, zero))
    ans, dans_da = vals[3], vals[6]
    dlogax_da = lax.sub(lax.log(x), lax.digamma(lax.add(a, _c(a, 1))))
    return lax.div(lax.mul(lax.neg(lax.add(dans_da, lax.mul(ans, dlogax_da))), x), a)


def _continued_fraction(x, a, enabled, eps):
    """dx/da from the continued fraction of igammac (x large and x > a), up to 2000 terms."""
    dtype = _ops.aval(x).dtype

    def cond(vals):
        return lax.bitwise_and(lax.lt(vals[5], np.array(2000, dtype)), _any(vals[0]))

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = lax.add(c, np.array(1, dtype))
        y = lax.add(y, _c(y, 1))
        z = lax.add(z, _c(z, 2))
        yc = lax.mul(y, c)
        pk = lax.sub(lax.mul(pkm1, z), lax.mul(pkm2, yc))
        qk = lax.sub(lax.mul(qkm1, z), lax.mul(qkm2, yc))
        qk_nonzero = lax.ne(qk, _c(qk, 0))
        r = lax.div(pk, qk)
        t = _select(qk_nonzero, lax.abs(lax.div(lax.sub(ans, r), r)), lax.full_like(r, 1))
        ans = _select(qk_nonzero, r, ans)
        dpk_da = lax.add(lax.sub(lax.sub(lax.mul(dpkm1_da, z), pkm1), lax.mul(dpkm2_da, yc)), lax.mul(pkm2, c))
        dqk_da = lax.add(lax.sub(lax.sub(lax.mul(dqkm1_da, z), qkm1), lax.mul(dqkm2_da, yc)), lax.mul(qkm2, c))
        dans_da_new = _select(qk_nonzero, lax.div(lax.sub(dpk_da, lax.mul(ans, dqk_da)), qk), dans_da)
        grad_step = _select(qk_nonzero, lax.abs(lax.sub(dans_da_new, dans_da)), lax.full_like(dans_da, 1))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        # Rescale the convergents (and their derivatives) before they overflow.
        rescale = lax.gt(lax.abs(pk), lax.div(np.array(1, dtype), np.array(eps, dtype)))
        pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            _select(rescale, lax.mul(v, np.array(eps, dtype)), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        going = lax.bitwise_and(enabled, lax.gt(grad_step, np.array(eps, dtype)))
        new = (ans, t, y, z)
        rest = (pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
        return (going, *(_select(enabled, n, o) for n, o in zip(new, vals[1:5])), c,
                *(_select(enabled, n, o) for n, o in zip(rest, vals[6:])))

    y = lax.sub(_c(a, 1), a)
    z = lax.add(lax.add(x, y), _c(x, 1))
    pkm1 = lax.add(x, _c(x, 1))
    qkm1 = lax.mul(z, x)
    ans = lax.div(pkm1, qkm1)
    zeros = lax.full_like(x, 0)
    dqkm1_da = lax.neg(x)
    dans_da = lax.div(lax.sub(zeros, lax.mul(ans, dqkm1_da)), qkm1)
    init = (enabled, ans, lax.full_like(x, 1), y, z, np.array(0, dtype), pkm1, qkm1, lax.full_like(x, 1), x,
            zeros, zeros, zeros, dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans, dans_da = vals[1], vals[14]
    dlogax_da = lax.sub(lax.log(x), lax.digamma(a))
    return lax.neg(lax.mul(lax.add(dans_da, lax.mul(ans, dlogax_da)), x))


def _random_gamma_grad_impl(a, x):
    dtype = _ops.aval(a).dtype
    if dtype in (dt.float16, dt.bfloat16):     # computed in float32, as in JAX
        out = _random_gamma_grad_impl(*(lax.convert_element_type(v, np.float32) for v in (a, x)))
        return lax.convert_element_type(out, dtype)
    eps = float(dt.finfo(dtype).eps)
    is_nan = lax.bitwise_or(lax.ne(a, a), lax.ne(x, x))
    x_is_zero = lax.eq(x, _c(x, 0))
    domain_error = lax.bitwise_or(lax.lt(x, _c(x, 0)), lax.le(a, _c(a, 0)))
    use_continued_fraction = lax.bitwise_and(lax.gt(x, _c(x, 1)), lax.gt(x, a))
    log_ax = lax.sub(lax.sub(lax.mul(a, lax.log(x)), x), lax.lgamma(a))
    underflow = lax.lt(log_ax, lax.neg(lax.log(np.array(dt.finfo(dtype).max, dtype))))
    enabled = lax.bitwise_not(lax.bitwise_or(lax.bitwise_or(lax.bitwise_or(x_is_zero, domain_error), underflow),
                                             is_nan))
    out = _select(use_continued_fraction,
                  lax.neg(_continued_fraction(x, a, lax.bitwise_and(enabled, use_continued_fraction), eps)),
                  _series(x, a, lax.bitwise_and(enabled, lax.bitwise_not(use_continued_fraction)), eps))
    out = _select(x_is_zero, lax.full_like(out, 0), out)
    return _select(lax.bitwise_or(domain_error, is_nan), lax.full_like(a, np.nan), out)


mlir.register_lowering(random_gamma_grad_p, mlir.lower_fun(_random_gamma_grad_impl, multiple_results=False))


def _random_gamma_grad_jvp(primals, tangents):
    """Forward-mode through the recurrences (as JAX differentiates its loop-based function)."""
    from jaxprc.transformations.ad import jvp      # the AD API sits above the primitive families
    return jvp(_random_gamma_grad_impl, primals, tuple(map(ad.instantiate_zeros, tangents)))


ad.primitive_jvps[random_gamma_grad_p] = _random_gamma_grad_jvp


# ------------------------------------------------------------- random_gamma

random_gamma_p = Primitive("random_gamma")
random_gamma_p.def_impl(functools.partial(dispatch.apply_primitive, random_gamma_p))
random_gamma_p.def_params(log_space=Bool(), impl=Optional(Str()))


def _key_words(impl):
    """The shape of one key's data of the named implementation (threefry when None)."""
    from jaxprc.random.distributions import gamma_key_shape    # the sampler sits above the families
    return gamma_key_shape(impl)


@random_gamma_p.def_abstract_eval
def _random_gamma_abstract_eval(key, a, *, log_space, impl=None):
    words = _key_words(impl)
    nk = key.ndim - len(words)
    if (key.dtype != np.uint32 or key.shape[nk:] != words or not IS_FLOAT(a.dtype)
            or a.shape[:nk] != key.shape[:nk]):
        raise type_error("random_gamma", [key, a], f"{impl or 'threefry'} key data uint32[*k, "
                         f"{', '.join(map(str, words))}] and a float array of shape (*k, ...)", log_space=log_space)
    return a


def _gamma_lowering(ctx, key, a, *, log_space, impl=None):
    from jaxprc.random.distributions import gamma_samples   # the sampler sits above the families
    return mlir.lower_fun(functools.partial(gamma_samples, log_space=log_space, impl=impl),
                          multiple_results=False)(ctx, key, a)


mlir.register_lowering(random_gamma_p, _gamma_lowering)


def _gamma_sample_grad(sample, a, log_space):
    """d sample / d a, one element at a time as JAX computes it on CPU (``lax.map``: the per-element
    loops round as JAX's do); in log space d log(x) = dx / x, x = 0 (rounded) read as the smallest float."""
    aval = _ops.aval(a)
    samples, alphas = (lax.reshape(v, (aval.size,)) for v in (sample, a))
    if log_space:
        samples = lax.exp(samples)
        tiny = lax.full_like(samples, dt.finfo(aval.dtype).tiny)
        samples = lax.select(lax.eq(samples, _c(samples, 0)), tiny, samples)
        grad = lambda args: lax.div(random_gamma_grad(*args), args[1])
    else:
        grad = lambda args: random_gamma_grad(*args)
    return lax.reshape(_map(grad, (alphas, samples)), aval.shape)


def _random_gamma_jvp(primals, tangents, *, log_space, **impl):
    key, a = primals
    ans = random_gamma_p.bind(key, a, log_space=log_space, **impl)
    if isinstance(tangents[1], ad.Zero):
        return ans, ad.Zero(_ops.aval(ans))
    return ans, lax.mul(tangents[1], _gamma_sample_grad(ans, a, log_space))


ad.primitive_jvps[random_gamma_p] = _random_gamma_jvp


def _random_gamma_batch(args, dims, *, log_space, **impl):
    """Both operands with the batch axis in front (keys lead ``a``'s shape)."""
    size = next(_ops.aval(x).shape[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
    key, a = (batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return random_gamma_p.bind(key, a, log_space=log_space, **impl), 0


batching.primitive_batchers[random_gamma_p] = _random_gamma_batch
