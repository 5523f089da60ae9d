"""The gamma function and its relatives: gammaln, gamma, beta, incomplete gamma and beta, digamma,
polygamma, Hurwitz zeta, combinatorics (factorial, comb, poch) and Bernoulli numbers."""
from __future__ import annotations

import operator

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...transformations.ad import jvp
from ...transformations.custom_derivatives import custom_jvp
from ...ir import dtypes as dt
from ...numpy._util import located
from ._common import dtype_of, finfo, inexact
from ._complex_gamma import complex_gamma, complex_loggamma


def gammaln(x):
    """log|Gamma(x)|."""
    return lax.lgamma(inexact("gammaln", x))


def gammasgn(x):
    """The sign of Gamma(x): NaN at the poles (non-positive integers), -inf and NaN; -1 at -0."""
    x = inexact("gammasgn", x)
    floor_x = jnp.floor(x)
    negative = x < 0
    undefined = (negative & (x == floor_x)) | jnp.isnan(x)
    minus = (negative & (jnp.remainder(floor_x, 2) != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(undefined, jnp.nan, jnp.where(minus, -1.0, 1.0)).astype(dtype_of(x))


def loggamma(x):
    """The principal branch of log Gamma(x): lgamma for x > 0, NaN elsewhere (real x); complex x
    by Lanczos' approximation (_complex_gamma.py)."""
    x = inexact("loggamma", x, complex_ok=True)
    if dt.is_complex(dtype_of(x)):
        return complex_loggamma(x)
    return jnp.where(x > 0, lax.lgamma(x), jnp.nan)


def gamma(x):
    """Gamma(x) = sign * exp(lgamma(x)); complex x by Lanczos' approximation."""
    x = inexact("gamma", x, complex_ok=True)
    if dt.is_complex(dtype_of(x)):
        return complex_gamma(x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def _algdiv(a, b):
    """log(Gamma(b) / Gamma(a + b)) for b >= 8 (a <= b), from the asymptotic series of
    del(x) = lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2) (cdflib's algdiv)."""
    c = [0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03,
         -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02]
    h = a / b
    x = h / (1 + h)
    d = b + (a - 0.5)
    x2 = x * x
    s3 = 1.0 + (x + x2)          # s_n = (1 - x^n) / (1 - x)
    s5 = 1.0 + (x + x2 * s3)
    s7 = 1.0 + (x + x2 * s5)
    s9 = 1.0 + (x + x2 * s7)
    s11 = 1.0 + (x + x2 * s9)
    t = (1.0 / b) ** 2
    w = ((((c[5] * s11 * t + c[4] * s9) * t + c[3] * s7) * t + c[2] * s5) * t + c[1] * s3) * t + c[0]
    w = w * (x / b)
    u = d * jnp.log1p(a / b)
    v = a * (jnp.log(b) - 1.0)
    return jnp.where(u <= v, (w - v) - u, (w - u) - v)


def betaln(a, b):
    """log|B(a, b)|; for max(a, b) >= 8 via algdiv, accurate for large arguments."""
    a, b = inexact("betaln", a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small_b = lax.lgamma(a) + (lax.lgamma(b) - lax.lgamma(a + b))
    large_b = lax.lgamma(a) + _algdiv(a, b)
    return jnp.where(b < 8, small_b, large_b)


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)."""
    a, b = inexact("beta", a, b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * jnp.exp(betaln(a, b))


def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) (0 for n < 0); ``exact=True`` is not supported, as in JAX."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = inexact("factorial", n)
    return jnp.where(n < 0, 0, jnp.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition: bool = False):
    """N choose k by log-gamma (0 outside 0 <= k <= N); with repetition, (N + k - 1) choose k."""
    N, k = inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    ok = (k <= N) & (N >= 0) & (k >= 0)
    safe_n, safe_k = jnp.where(ok, N, 0.0), jnp.where(ok, k, 0.0)
    out = jnp.exp(gammaln(safe_n + 1) - gammaln(safe_k + 1) - gammaln(safe_n + 1 - safe_k))
    return jnp.where(ok, out, 0.0)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    return lax.betainc(*inexact("betainc", a, b, x))


def digamma(x):
    """psi(x) = d/dx log Gamma(x)."""
    return lax.digamma(inexact("digamma", x))


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return lax.igamma(*inexact("gammainc", a, x))


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x)."""
    return lax.igammac(*inexact("gammaincc", a, x))


def polygamma(n, x):
    """psi^(n)(x); ``n`` must be of integer type."""
    if not dt.is_int(jnp.result_type(n)) and not dt.is_unsigned(jnp.result_type(n)):
        raise ValueError(f"{located('polygamma')}: argument `n` must be of integer type, got dtype "
                         f"{jnp.result_type(n)}")
    return lax.polygamma(*inexact("polygamma", n, x))


def poch(z, m):
    """The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z) (1 where m == 0)."""
    return _poch(*inexact("poch", z, m))


@custom_jvp
def _poch(z, m):
    return jnp.where(m == 0.0, jnp.ones_like(z), gamma(z + m) / gamma(z))


_poch.defjvps(lambda t, ans, z, m: t * (digamma(z + m) - digamma(z)) * _poch(z, m),
              lambda t, ans, z, m: t * digamma(z + m) * _poch(z, m))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a static int)."""
    d = operator.index(d)     # static: a tracer raises the concretization error
    a, d_ = inexact("multigammaln", a, d)
    constant = 0.25 * d_ * (d_ - 1) * jnp.log(jnp.asarray(np.pi, dtype_of(a)))
    halves = jnp.arange(d, dtype=dtype_of(a)) / 2
    return jnp.sum(gammaln(jnp.expand_dims(a, -1) - halves), axis=-1) + constant


# 1 / (B_2j / (2j)!): the Euler-Maclaurin tail of the Hurwitz zeta series.
_BERNOULLI_RECIPROCALS = np.array([
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1307674368000 / 691, 74724249600.0,
    -10670622842880000 / 3617, 5109094217170944000 / 43867, -802857662698291200000 / 174611,
    14101100039391805440000 / 77683, -1693824136731743669452800000 / 236364091,
    186134520519971831808000000 / 657931, -37893265687455865519472640000000 / 3392780147,
    759790291646040068357842010112000000 / 1723168255201,
    -134196726836183700385281186201600000000 / 7709321041217])


def _zeta_series(s, a):
    """zeta(s, a) by Euler-Maclaurin summation (N terms, then M Bernoulli corrections): a
    formula in s and a whose derivatives are zeta's derivatives."""
    dtype = dtype_of(a)
    n = 8 if dtype == dt.float32 else 16
    s_, a_ = jnp.expand_dims(s, -1), jnp.expand_dims(a, -1)
    k = jnp.arange(n, dtype=dtype)
    head = jnp.sum((a_ + k) ** (-s_), -1)
    integral = (a + n) ** (1.0 - s) / (s - 1.0)
    t0 = (a + n) ** (-s)
    m = jnp.arange(2 * n, dtype=dtype)
    ratios = jnp.cumprod((s_ + m) / (a_ + n), -1)[..., ::2]
    ratios = jnp.clip(ratios, max=float(dt.finfo(dtype).max))
    tail = t0 * (0.5 + jnp.sum(ratios / _BERNOULLI_RECIPROCALS[:n].astype(dtype), -1))
    return head + integral + tail


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


_zeta.defjvp(lambda primals, tangents: jvp(_zeta_series, primals, tangents))


def zeta(x, q=None):
    """The Hurwitz zeta function zeta(x, q) = sum_k (k + q)^-x; ``q=None`` (Riemann's) is not
    implemented, as in JAX."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute "
                                  "the Hurwitz Zeta function.")
    return _zeta(*inexact("zeta", x, q))


def bernoulli(n: int):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2), from zeta(2k) for even indices."""
    n = operator.index(n)
    if n < 0:
        raise ValueError("bernoulli: n must be a non-negative integer")
    first = jnp.array([1.0, -0.5, 1.0 / 6.0])
    if n < 3:
        return first[:n + 1]
    # B_2k = (-1)^(k+1) 2 (2k)! zeta(2k) / (2 pi)^2k, with zeta(m) = 1 + sum_{j>=2} j^-m
    m = jnp.arange(4, n + 1, 2, dtype=first.dtype)
    scale = 1.0 / np.pi ** 2 * jnp.cumprod(-(m - 1) * m / 4 / np.pi ** 2)
    j = jnp.arange(2, 50, dtype=first.dtype)
    zeta_tail = jnp.sum(j[:, None] ** (-m[None, :]), axis=0)
    out = jnp.zeros(n + 1, first.dtype).at[:3].set(first)
    return out.at[4::2].set(scale * (1 + zeta_tail))
