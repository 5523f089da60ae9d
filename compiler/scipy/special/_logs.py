"""Logarithms made safe at their edges: expit/logit, xlogy/xlog1py, the entropies (entr, rel_entr,
kl_div), Box-Cox transforms, logsumexp, softmax and log_softmax."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as jnp
from ... import nn
from ...custom_derivatives import custom_jvp
from ...ir import dtypes as dt
from ...numpy._util import aval_of, canonical_axes
from ._common import dtype_of, inexact


@custom_jvp
def _logit(x):
    return jnp.log(x / (1 - x))


# d/dx logit = 1 / (x (1 - x)): no quotient rule through log
_logit.defjvps(lambda t, ans, x: t / (x * (1 - x)))


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    return _logit(inexact("logit", x, complex_ok=True))


def expit(x):
    """1 / (1 + exp(-x)), the logistic function (lax.logistic: stable for large ``|x|``)."""
    return lax.logistic(inexact("expit", x, complex_ok=True))


@custom_jvp
def _xlogy(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * jnp.log(y), jnp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), (tx * jnp.log(y) + ty * x / y).astype(dtype_of(x))


def xlogy(x, y):
    """x log(y), 0 where x == 0 (unless y is NaN)."""
    return _xlogy(*inexact("xlogy", x, y, complex_ok=True))


@custom_jvp
def _xlog1py(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * jnp.log1p(y), jnp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), (tx * jnp.log1p(y) + ty * x / (1 + y)).astype(dtype_of(x))


def xlog1py(x, y):
    """x log1p(y), 0 where x == 0 (unless y is NaN)."""
    return _xlog1py(*inexact("xlog1py", x, y, complex_ok=True))


@custom_jvp
def _xlogx(x):
    return _xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _xlogx(x), t * (jnp.log(x) + 1)


def entr(x):
    """-x log x for x >= 0 (0 at 0), -inf for x < 0."""
    x = inexact("entr", x)
    return jnp.where(x < 0, -np.inf, -_xlogx(x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p == 0 <= q; inf elsewhere."""
    p, q = inexact("rel_entr", p, q)
    both_positive = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both_positive, p, 1), jnp.where(both_positive, q, 1)
    value = _xlogx(safe_p) - _xlogy(safe_p, safe_q)
    return jnp.where(both_positive, value, jnp.where((p == 0) & (q >= 0), 0.0, np.inf))


def kl_div(p, q):
    """p log(p / q) - p + q (with rel_entr's edges)."""
    p, q = inexact("kl_div", p, q)
    return rel_entr(p, q) - p + q


def _boxcox(log_x, lmbda):
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda, log(x) at lmbda == 0."""
    x, lmbda = inexact("boxcox", x, lmbda, complex_ok=True)
    return _boxcox(jnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """((1 + x)^lmbda - 1) / lmbda, log1p(x) at lmbda == 0."""
    x, lmbda = inexact("boxcox1p", x, lmbda, complex_ok=True)
    return _boxcox(jnp.log1p(x), lmbda)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """log(sum(b * exp(a))) over ``axis`` without overflow. With ``b``, a negative sum is NaN
    unless ``return_sign`` (then ``|sum|`` and its sign); ``where`` masks elements out."""
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = inexact("logsumexp", a, b, complex_ok=True)
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a = inexact("logsumexp", a, complex_ok=True)
    ndim = aval_of(a).ndim
    dims = tuple(range(ndim)) if axis is None else canonical_axes(
        axis if isinstance(axis, (tuple, list)) else (axis,), ndim, "logsumexp")
    complex_ = dt.is_complex(dtype_of(a))
    amax = jnp.max(jnp.real(a) if complex_ else a, axis=dims, keepdims=True, where=None if where is None
                   else jnp.broadcast_to(where, aval_of(a).shape), initial=-np.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    exp_a = jnp.exp(a - amax.astype(dtype_of(a)))
    if b is not None:
        exp_a = exp_a * b
    total = jnp.sum(exp_a, axis=dims, keepdims=True, where=where)
    sign = jnp.sign(total)
    if return_sign or not complex_:
        total = jnp.abs(total)
    out = jnp.log(total) + amax.astype(dtype_of(total))
    if not keepdims:
        out, sign = jnp.squeeze(out, dims), jnp.squeeze(sign, dims)
    if return_sign:
        return out, sign
    if b is not None and not complex_:
        out = jnp.where(sign < 0, np.nan, out)
    return out


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (all axes by default, as in scipy)."""
    return nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over ``axis`` (all axes by default, as in scipy)."""
    return nn.log_softmax(x, axis=axis)
