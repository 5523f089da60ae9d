"""Taylor-series (jet) rules for primitives, as ``jax.experimental.jet`` holds them.

``jet_rules`` IS the jet pass's rule table (``jaxprc.passes.jet``):
``jet_rules[p] = rule(primals, series, **params) -> (primal_out, series_out)``, where ``series``
holds per operand a list of K Taylor coefficients (zeros filled in) and an output's series may be
``zero_series``. Each primitive family registers its rules next to its other rules; the helpers
below build the common shapes of rule.
"""
from __future__ import annotations

import operator
from functools import partial, reduce
from typing import Any, Callable, Sequence

from jaxprc.ir.tracing import get_aval, trace_to_jaxpr
from jaxprc.ir.tree_util import tree_flatten, tree_unflatten
from jaxprc.passes.jet import (ZeroSeries, ZeroTerm, instantiate_series, jet_eval, jet_rules,
                               zero_series, zero_term)

__all__ = ["jet_rules", "zero_series", "zero_term", "ZeroSeries", "ZeroTerm", "jet_call",
           "defzero", "zero_prop", "deflinear", "linear_prop", "deflinear_in", "defbilinear",
           "def_deriv", "deriv_prop", "deriv_series", "def_comp", "definlined", "ode_term", "sum_terms"]


def jet_call(fun: Callable, primals: Sequence[Any], series: Sequence[Sequence[Any]]):
    """``jet2`` of ``fun`` (arrays in; an array or a tuple of them out) for use inside rules:
    traced and propagated into the current trace, every output's series instantiated."""
    order = len(series[0]) if series else 0
    store = {}

    def flat(*args):
        leaves, store["tree"] = tree_flatten(fun(*args))
        return leaves
    cj = trace_to_jaxpr(flat, [get_aval(x) for x in primals], name="jet")
    outs, souts = jet_eval(cj.jaxpr, cj.consts, list(primals), [list(s) for s in series], order)
    souts = [instantiate_series(s, get_aval(o), order, weak=True) for o, s in zip(outs, souts)]
    return tree_unflatten(store["tree"], outs), tree_unflatten(store["tree"], souts)


def sum_terms(terms):
    """The sum of a non-empty sequence of terms, without a leading 0 (an op fewer)."""
    return reduce(operator.add, terms)


def ode_term(c, u, k: int):
    """The k-th term of v where ``v' = c u'``: ``sum_{j=1..k} j c_{k-j} u_j / k`` (written out
    without the multiplications by 1, so programs stay small)."""
    total = None
    for j in range(1, k + 1):
        term = c[k - j] * u[j] if j == 1 else j * c[k - j] * u[j]
        total = term if total is None else total + term
    return total if k == 1 else total / k


# ------------------------------------------------------ rules of common shapes

def defzero(prim):
    """The series of ``prim``'s outputs is zero (comparisons, rounding, bit operations)."""
    jet_rules[prim] = partial(zero_prop, prim)


def zero_prop(prim, primals_in, series_in, **params):
    out = prim.bind(*primals_in, **params)
    return out, ([zero_series] * len(out) if prim.multiple_results else zero_series)


def deflinear(prim):
    """``prim`` is linear in its operands jointly: each term is ``prim`` of the operands' terms."""
    jet_rules[prim] = partial(linear_prop, prim)


def linear_prop(prim, primals_in, series_in, **params):
    out = prim.bind(*primals_in, **params)
    series_out = [prim.bind(*terms, **params) for terms in zip(*series_in)]
    if prim.multiple_results:
        series_out = [list(s) for s in zip(*series_out)] if series_out else [[] for _ in out]
    return out, series_out


def deflinear_in(prim, positions):
    """``prim`` is linear in the operands at ``positions`` jointly, the others (indices) fixed."""
    def rule(primals_in, series_in, **params):
        out = prim.bind(*primals_in, **params)
        series_out = []
        for k in range(len(series_in[0])):
            args = [series_in[i][k] if i in positions else x for i, x in enumerate(primals_in)]
            series_out.append(prim.bind(*args, **params))
        return out, series_out
    jet_rules[prim] = rule


def defbilinear(prim):
    """A product: the Cauchy product ``v_k = sum_j op(x_j, y_{k-j})``."""
    def rule(primals_in, series_in, **params):
        (x, y), (xs, ys) = primals_in, series_in
        u, w = [x] + xs, [y] + ys
        op = partial(prim.bind, **params)
        v = [sum_terms(op(u[j], w[k - j]) for j in range(k + 1)) for k in range(len(u))]
        return v[0], v[1:]
    jet_rules[prim] = rule


def def_deriv(prim, deriv):
    """The rule of a unary ``prim`` from its first derivative ``deriv`` (a function of the
    operand): the series of ``f(u)`` solves ``f(u)' = deriv(u) u'`` term by term."""
    jet_rules[prim] = partial(deriv_prop, prim, deriv)


def deriv_prop(prim, deriv, primals_in, series_in, **params):
    x, = primals_in
    return prim.bind(x, **params), deriv_series(deriv, x, series_in[0])


def deriv_series(deriv, x, series) -> list:
    """The terms of ``v`` where ``v' = deriv(u) u'``, ``u`` having primal ``x`` and terms ``series``."""
    if not series:
        return []
    # c's terms up to order K-1 suffice (so a deriv using prim itself, as tan's, terminates)
    c0, cs = jet_call(deriv, [x], [list(series[:-1])])
    c, u = [c0] + cs, [x] + list(series)
    return [ode_term(c, u, k) for k in range(1, len(u))]


def def_comp(prim, comp):
    """The rule of ``prim`` from ``comp``, a composition of primitives that have rules: the
    series are ``comp``'s (it gets the operands, not the params), the primal output ``prim``'s."""
    jet_rules[prim] = partial(_comp_prop, prim, comp)


def _comp_prop(prim, comp, primals_in, series_in, **params):
    return prim.bind(*primals_in, **params), jet_call(comp, primals_in, series_in)[1]


def definlined(prim, param: str):
    """A call whose callee (the ClosedJaxpr param ``param``, taking all the operands) is
    propagated through inline: remat is only a schedule, and a custom function's own primitives
    are expanded (its custom derivative rules are ignored, as in JAX's jet)."""
    def rule(primals_in, series_in, **params):
        callee = params[param]
        return jet_eval(callee.jaxpr, callee.consts, primals_in, series_in, len(series_in[0]))
    jet_rules[prim] = rule
