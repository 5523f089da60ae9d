"""A line search satisfying the strong Wolfe conditions (Nocedal & Wright, algorithms 3.5 and
3.6: bracketing, then zooming by cubic, quadratic or bisection steps), as a while_loop."""
from __future__ import annotations

from typing import NamedTuple

from ... import lax
from ... import numpy as jnp
from ...transformations.ad import value_and_grad
from ...ir import dtypes as dt


class LineSearchResults(NamedTuple):
    failed: object
    nit: object
    nfev: object
    ngev: object
    k: object
    a_k: object
    f_k: object
    g_k: object
    status: object


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denominator = (db * dc) ** 2 * (db - dc)
    rhs_b, rhs_c = fb - fa - fpa * db, fc - fa - fpa * dc
    big_a = (dc ** 2 * rhs_b - db ** 2 * rhs_c) / denominator
    big_b = (-dc ** 3 * rhs_b + db ** 3 * rhs_c) / denominator
    radical = big_b * big_b - 3.0 * big_a * fpa
    return a + (-big_b + jnp.sqrt(radical)) / (3.0 * big_a)


def _quadmin(a, fa, fpa, b, fb):
    """The minimizer of the parabola through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    curvature = (fb - fa - fpa * db) / db ** 2
    return a - fpa / (2.0 * curvature)


def _replace(pred, state: dict, new: dict) -> dict:
    return {**state, **{k: jnp.where(pred, v, state[k]) for k, v in new.items()}}


def _zoom(phi_and_grad, wolfe_one, wolfe_two, lo, hi, g_0, pass_through):
    """Shrink [a_lo, a_hi] (which brackets a Wolfe point) until a point satisfies both
    conditions; at most 30 steps, failing when the interval collapses."""
    a_lo, phi_lo, dphi_lo = lo
    a_hi, phi_hi, dphi_hi = hi
    state = dict(done=jnp.array(False), failed=jnp.array(False), j=jnp.array(0), a_lo=a_lo, phi_lo=phi_lo,
                 dphi_lo=dphi_lo, a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi, a_rec=(a_lo + a_hi) / 2.0,
                 phi_rec=(phi_lo + phi_hi) / 2.0, a_star=jnp.ones_like(a_lo), phi_star=phi_lo,
                 dphi_star=dphi_lo, g_star=g_0, nfev=jnp.array(0), ngev=jnp.array(0))

    def body(s):
        dalpha = s["a_hi"] - s["a_lo"]
        low, high = jnp.minimum(s["a_hi"], s["a_lo"]), jnp.maximum(s["a_hi"], s["a_lo"])
        cubic_check, quad_check = 0.2 * dalpha, 0.1 * dalpha
        threshold = 1e-5 if dt.finfo(jnp.result_type(dalpha)).bits < 64 else 1e-10
        s = {**s, "failed": s["failed"] | (dalpha <= threshold)}
        a_cubic = _cubicmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"], s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (a_cubic > low + cubic_check) & (a_cubic < high - cubic_check)
        a_quad = _quadmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"])
        use_quad = ~use_cubic & (a_quad > low + quad_check) & (a_quad < high - quad_check)
        a_j = jnp.where(use_cubic, a_cubic, s["a_rec"])
        a_j = jnp.where(use_quad, a_quad, a_j)
        a_j = jnp.where(~use_cubic & ~use_quad, (s["a_lo"] + s["a_hi"]) / 2.0, a_j)
        phi_j, dphi_j, g_j = phi_and_grad(a_j)
        phi_j, dphi_j = phi_j.astype(s["phi_lo"].dtype), dphi_j.astype(s["dphi_lo"].dtype)
        g_j = g_j.astype(s["g_star"].dtype)
        s = {**s, "nfev": s["nfev"] + 1, "ngev": s["ngev"] + 1}
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s["phi_lo"])
        star_to_j = wolfe_two(dphi_j) & ~hi_to_j
        hi_to_lo = (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0.0) & ~hi_to_j & ~star_to_j
        lo_to_j = ~hi_to_j & ~star_to_j
        s = _replace(hi_to_j, s, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s["a_hi"], phi_rec=s["phi_hi"]))
        s = _replace(star_to_j, {**s, "done": star_to_j | s["done"]},
                     dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j))
        s = _replace(hi_to_lo, s, dict(a_hi=s["a_lo"], phi_hi=s["phi_lo"], dphi_hi=s["dphi_lo"],
                                       a_rec=s["a_hi"], phi_rec=s["phi_hi"]))
        s = _replace(lo_to_j & ~hi_to_lo, s, dict(a_rec=s["a_lo"], phi_rec=s["phi_lo"]))
        s = _replace(lo_to_j, s, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j))
        j = s["j"] + 1
        return {**s, "j": j, "failed": s["failed"] | (j >= 30)}

    return lax.while_loop(lambda s: ~s["done"] & ~pass_through & ~s["failed"], body, state)


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9, maxiter=20):
    """A step a along pk from xk with sufficient decrease (c1) and curvature (c2)."""
    dtype = jnp.result_type(xk, pk, 1.0)
    xk, pk = jnp.asarray(xk, dtype), jnp.asarray(pk, dtype)

    def phi_and_grad(t):
        value, g = value_and_grad(f)(xk + jnp.asarray(t, pk.dtype) * pk)
        return value, jnp.real(_dot(g, pk)), g

    fresh = old_fval is None or gfk is None
    if fresh:
        phi_0, dphi_0, gfk = phi_and_grad(0.0)
    else:
        phi_0, dphi_0 = old_fval, jnp.real(_dot(gfk, pk))
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        start = jnp.where(candidate > 1, 1.0, candidate)
    else:
        start = 1.0

    def wolfe_one(a_i, phi_i):
        return phi_i > phi_0 + c1 * a_i * dphi_0

    def wolfe_two(dphi_i):
        return jnp.abs(dphi_i) <= -c2 * dphi_0

    zero = jnp.zeros((), jnp.result_type(dphi_0))
    count = jnp.array(1 if fresh else 0)
    state = dict(done=jnp.array(False), failed=jnp.array(False), i=jnp.array(1), a_i1=zero, phi_i1=phi_0,
                 dphi_i1=dphi_0, nfev=count, ngev=count, a_star=zero, phi_star=phi_0, dphi_star=dphi_0,
                 g_star=gfk)
    keys = ("a_star", "phi_star", "dphi_star", "g_star")

    def body(s):
        a_i = jnp.where(s["i"] == 1, start, s["a_i1"] * 2.0)
        phi_i, dphi_i, g_i = phi_and_grad(a_i)
        s = {**s, "nfev": s["nfev"] + 1, "ngev": s["ngev"] + 1}
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s["phi_i1"]) & (s["i"] > 1))
        to_i = wolfe_two(dphi_i) & ~to_zoom1
        to_zoom2 = (dphi_i >= 0.0) & ~to_zoom1 & ~to_i
        previous, current = (s["a_i1"], s["phi_i1"], s["dphi_i1"]), (a_i, phi_i, dphi_i)
        zoom1 = _zoom(phi_and_grad, wolfe_one, wolfe_two, previous, current, gfk, ~to_zoom1)
        zoom2 = _zoom(phi_and_grad, wolfe_one, wolfe_two, current, previous, gfk, ~to_zoom2)
        s = {**s, "nfev": s["nfev"] + zoom1["nfev"] + zoom2["nfev"],
             "ngev": s["ngev"] + zoom1["ngev"] + zoom2["ngev"]}
        s = _replace(to_zoom1, {**s, "done": to_zoom1 | s["done"], "failed": (to_zoom1 & zoom1["failed"]) | s["failed"]},
                     {k: zoom1[k] for k in keys})
        s = _replace(to_i, {**s, "done": to_i | s["done"]},
                     dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i))
        s = _replace(to_zoom2, {**s, "done": to_zoom2 | s["done"], "failed": (to_zoom2 & zoom2["failed"]) | s["failed"]},
                     {k: zoom2[k] for k in keys})
        return {**s, "i": s["i"] + 1, "a_i1": a_i, "phi_i1": phi_i, "dphi_i1": dphi_i}

    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, state)
    status = jnp.where(s["failed"], 1, jnp.where(s["i"] > maxiter, 3, 0))
    alpha = jnp.asarray(s["a_star"])
    if dt.finfo(alpha.dtype).bits != 64:     # a step never below 1e-8 in single precision
        alpha = jnp.where(jnp.abs(alpha) < 1e-8, jnp.sign(alpha) * 1e-8, alpha)
    return LineSearchResults(failed=s["failed"] | ~s["done"], nit=s["i"] - 1, nfev=s["nfev"], ngev=s["ngev"],
                             k=s["i"], a_k=alpha, f_k=s["phi_star"], g_k=s["g_star"], status=status)
