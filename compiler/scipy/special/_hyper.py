"""Confluent and Gauss hypergeometric functions hyp1f1 and hyp2f1 (series, asymptotic and
transformed series as JAX evaluates them), with derivatives in every parameter by series."""
from __future__ import annotations

from ... import lax
from ... import numpy as jnp
from ...custom_derivatives import custom_jvp
from ...vmap import vmap
from ._common import finfo, inexact
from ._gamma import digamma, gamma

_MAX_TERMS = 250


def _elementwise(scalar_fun):
    """``scalar_fun`` of scalars applied to arrays of one shape, each element's loops running to
    its own convergence (a vmap over the flattened elements)."""
    def fun(*args):
        shape = jnp.shape(args[0])
        flat = vmap(scalar_fun)(*(jnp.ravel(a) for a in args))
        return jnp.reshape(flat, shape)
    return fun


def _sum_series(first, ratio, weight=None):
    """sum_k w_k t_k with t_1 = ``first``, t_(k+1) = t_k ratio(k), starting from 1 (or from 0 when
    weighted), until a term is below eps relative to the sum or 250 terms."""
    eps = float(finfo(first).eps)

    def body(state):
        total, k, term = state
        total = total + (term if weight is None else term * weight(k))
        return total, k + 1.0, term * ratio(k)

    def cond(state):
        total, k, term = state
        return (k < _MAX_TERMS) & (jnp.abs(term) / jnp.abs(total) > eps)

    start = jnp.ones_like(first) if weight is None else jnp.zeros_like(first)
    return lax.while_loop(cond, body, (start, jnp.ones_like(first), first))[0]


# ------------------------------------------------------------------------ hyp1f1

def _hyp1f1_series(a, b, x):
    return _sum_series(a / b * x, lambda k: (a + k) / (b + k) * x / (k + 1))


def _hyp1f1_asymptotic(a, b, x):
    series = _sum_series((b - a) * (1 - a) / x, lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x)
    return gamma(b) / gamma(a) * jnp.exp(x) * x ** (a - b) * series


def _hyp1f1_scalar(a, b, x):
    near = jnp.abs(x) < 100
    value = jnp.where(near, _hyp1f1_series(a, b, jnp.where(near, x, 0.0)),
                      _hyp1f1_asymptotic(a, b, jnp.where(near, 1000.0, x)))
    value = jnp.where((b == 0) & (a != 0), jnp.inf, value)
    value = jnp.where((a == b) & (a != 0), jnp.exp(x), value)
    return jnp.where(a == 0, 1.0, value)


def _hyp1f1_da(a, b, x):
    return _sum_series(a / b * x, lambda k: (a + k) / (b + k) * x / (k + 1), lambda k: digamma(a + k) - digamma(a))


def _hyp1f1_db(a, b, x):
    return _sum_series(a / b * x, lambda k: (a + k) / (b + k) * x / (k + 1), lambda k: digamma(b) - digamma(b + k))


_hyp1f1 = custom_jvp(_elementwise(_hyp1f1_scalar))
_hyp1f1.defjvps(lambda t, ans, a, b, x: _elementwise(_hyp1f1_da)(a, b, x) * t,
                lambda t, ans, a, b, x: _elementwise(_hyp1f1_db)(a, b, x) * t,
                lambda t, ans, a, b, x: a / b * _hyp1f1(a + 1, b + 1, x) * t)


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x) (the power series for ``|x| < 100``,
    the asymptotic series beyond)."""
    return _hyp1f1(*inexact("hyp1f1", a, b, x))


# ------------------------------------------------------------------------ hyp2f1

def _hyp2f1_series(a, b, c, x):
    eps = float(finfo(x).eps)

    def body(state):
        total, k, term = state
        return total + term, k + 1.0, term * ((a + k - 1) * (b + k - 1) / (c + k - 1) / k * x)

    def cond(state):
        total, k, term = state
        return (k < _MAX_TERMS) & (jnp.abs(term) > eps * jnp.abs(total))

    one = jnp.ones_like(x)
    return lax.while_loop(cond, body, (jnp.zeros_like(x), one, one))[0]


def _hyp2f1_terminal(a, b, c, x):
    """The polynomial when a (or b, swapped in) is a non-positive integer: -a + 1 terms."""
    eps = float(finfo(x).eps) * 50
    ib = jnp.round(b)
    swap = (b < a) & (jnp.abs(b - ib) < eps) & ~((jnp.remainder(c, 1) == 0) & (c <= 0) & (c > b))
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    a = jnp.abs(a)

    def body(state):
        i, total, term = state
        term = term * (-(a - i + 1) / (c + i - 1) * (b + i - 1) / i * x)
        return i + 1.0, total + term, term

    one = jnp.ones_like(x)
    return lax.while_loop(lambda s: s[0] < a + 1, body, (one, one, one))[1]


def _hyp2f1_near_one(a, b, c, x):
    """x > 0.9 with c - a - b an integer: the digamma series of the 1 - x transformation
    (Abramowitz & Stegun 15.3.10-12)."""
    eps = float(finfo(x).eps)
    d = c - a - b
    s = 1 - x
    rd = jnp.round(d)
    e = jnp.where(rd >= 0, d, -d)
    d1 = jnp.where(rd >= 0, d, 0.0)
    d2 = jnp.where(rd >= 0, 0.0, d)
    ard = jnp.where(rd >= 0, rd, -rd)
    log_s = jnp.log(s)
    y = (digamma(jnp.ones_like(x)) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - log_s) / gamma(e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def body(state):
        p, q, t, y = state
        r = digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1) - digamma(b + t + d1) - log_s
        q = p * r
        p = p * (s * (a + t + d1) / (t + 1.0))
        p = p * ((b + t + d1) / (t + 1.0 + e))
        return p, q, t + 1.0, y + q

    _, _, _, y = lax.while_loop(lambda st: (st[2] < _MAX_TERMS) & (jnp.abs(st[1]) >= eps * jnp.abs(st[3])),
                                body, (p, y, jnp.ones_like(x), y))

    def finite_sum(i_and_state):
        i, p, t, y1 = i_and_state
        r = 1.0 - e + t
        p = p * (s * (a + t + d2) * (b + t + d2) / r)
        t = t + 1.0
        p = p / t
        return i + 1.0, p, t, y1 + p

    one = jnp.ones_like(x)
    y1 = lax.while_loop(lambda st: st[0] < ard, finite_sum, (one, one, jnp.zeros_like(x), one))[3]
    gc = gamma(c)
    y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
    ys = y * gc / (gamma(a + d2) * gamma(b + d2))
    ys = jnp.where(jnp.remainder(ard, 2) != 0, -ys, ys)
    q = s ** rd
    combined = jnp.where(rd > 0, ys * q + y1, ys + y1 * q)
    return jnp.where(rd == 0, y * gc / (gamma(a) * gamma(b)), combined)


def _hyp2f1_terminal_or_series(a, b, c, x):
    eps = float(finfo(x).eps) * 50
    d = c - a - b
    neg_int = lambda v: (v <= 0) & (jnp.abs(v - jnp.round(v)) < eps)
    terminal = neg_int(a) | neg_int(b)
    near_one = (x > 0.9) & ~terminal & (jnp.abs(d - jnp.round(d)) < eps)
    safe_x = jnp.where(near_one, 0.0, x)
    value = jnp.where(terminal, _hyp2f1_terminal(jnp.where(terminal, a, 0.0), b, c, x),
                      _hyp2f1_series(a, b, c, safe_x))
    near = _hyp2f1_near_one(a, b, jnp.where(near_one, c, a + b + 1.0), jnp.where(near_one, x, 0.95))
    return jnp.where(near_one, near, value)


def _hyp2f1_scalar(a, b, c, x):
    eps = float(finfo(x).eps) * 50
    d = c - a - b
    s = 1 - x
    ca, cb = c - a, c - b
    id_ = jnp.round(d)
    one = jnp.where((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), True, False)
    infinite = (c == 0) | ((c < 0) & (jnp.remainder(c, 1) == 0))
    euler = (d <= -1) & ~((jnp.abs(d - id_) >= eps) & (s < 0))
    inf_at_one = (d <= 0) & (x == 1)
    safe_x = jnp.where(x < 1, x, 0.5)     # the series branches only run below 1
    out = jnp.where(x == 1, gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)),
                    _hyp2f1_terminal_or_series(a, b, c, safe_x))
    out = jnp.where(x > 1, jnp.inf, out)
    out = jnp.where((x < 1) & (a == c), s ** (-b), out)
    out = jnp.where((x < 1) & (b == c), s ** (-a), out)
    out = jnp.where(inf_at_one, jnp.inf, out)
    out = jnp.where(euler, s ** d * _hyp2f1_terminal_or_series(ca, cb, c, safe_x), out)
    out = jnp.where(infinite, jnp.inf, out)
    return jnp.where(one, 1.0, out)


def _hyp2f1_param_derivative(which):
    def scalar(a, b, c, x):
        shift = {"a": lambda k: digamma(a + k) - digamma(a), "b": lambda k: digamma(b + k) - digamma(b),
                 "c": lambda k: digamma(c) - digamma(c + k)}[which]
        return _sum_series(a * b / c * x, lambda k: (a + k) * (b + k) / (c + k) / (k + 1) * x, shift)
    return _elementwise(scalar)


_hyp2f1 = custom_jvp(_elementwise(_hyp2f1_scalar))
_hyp2f1.defjvps(lambda t, ans, a, b, c, x: _hyp2f1_param_derivative("a")(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: _hyp2f1_param_derivative("b")(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: _hyp2f1_param_derivative("c")(a, b, c, x) * t,
                lambda t, ans, a, b, c, x: a * b / c * _hyp2f1(a + 1, b + 1, c + 1, x) * t)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) for x <= 1."""
    return _hyp2f1(*inexact("hyp2f1", a, b, c, x))
