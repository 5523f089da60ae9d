"""Taylor-mode differentiation as a pass: f: a -> b  ==>  (a, K terms of a) -> (b, K terms of b).

A value carries a truncated Taylor series: its primal and ``order`` terms (the coefficients of
t, t**2, ... of a curve through it, not scaled by factorials). The pass re-traces the program
and replaces each equation by its rule
``jet_rules[prim](primals, series, **params) -> (primal_out, series_out)``, where ``series`` is
one list of ``order`` terms per operand, each term of its operand's shape (lists of outputs for
``multiple_results``). A series known to be zero is ``zero_series``: an equation whose operands
all have it is re-emitted as is, so constants cost nothing; a rule gets zeros in its place, and
may return ``zero_series`` for an output (comparisons, rounding). A term may be ``zero_term``
(instantiated as zeros before a rule sees it).

``jet_rules`` is filled by the primitive families (``compiler/lax/``), next to each primitive's
other rules, and by users through ``jaxprc.experimental.jet``; the helpers at the end build the
common shapes of rule (``defzero``, ``deflinear``, ``def_deriv``, ``def_comp``, ...).
"""
from __future__ import annotations

import operator
from functools import partial, reduce
from typing import Any, Callable, Sequence

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import get_aval, replayed_sources, trace_to_jaxpr
from jaxprc.ir.tree_util import tree_flatten, tree_unflatten

from . import emit
from .jvp import literal_value
from .memo import memoize_on_jaxpr
from .registry import register_pass


class ZeroSeries:
    """The series of a value known to have no Taylor terms (a constant)."""

    def __repr__(self):
        return "zero_series"


class ZeroTerm:
    """One Taylor term known to be zero."""

    def __repr__(self):
        return "zero_term"


zero_series = ZeroSeries()
zero_term = ZeroTerm()

jet_rules: dict = {}


def instantiate_series(series, aval: ShapedArray, order: int, weak: bool = False) -> list:
    """``order`` terms of type ``aval`` (zeros where ``series`` is symbolic; strongly typed unless
    ``weak``: a rule's operands get JAX's ``zeros(shape, dtype)``, an output its ``zeros_like``)."""
    if series is zero_series:
        series = [zero_term] * order
    if not any(t is zero_term for t in series):
        return list(series)
    zero = emit.zeros(aval if weak else aval.strip_weak_type())
    return [zero if t is zero_term else t for t in series]


def _checked_series(prim, out_aval: ShapedArray, series, order: int):
    """A rule's series for one output: ``zero_series``, or ``order`` terms of the output's shape."""
    if series is zero_series:
        return series
    series = list(series)
    if len(series) != order:
        raise ValueError(f"jet rule of '{prim.name}' returned {len(series)} Taylor terms for an "
                         f"output; expected {order}")
    for t in series:
        if t is not zero_term and tuple(get_aval(t).shape) != tuple(out_aval.shape):
            raise TypeError(f"jet rule of '{prim.name}' returned a Taylor term of type "
                            f"{get_aval(t).str_short()} for an output of type {out_aval.str_short()}")
    return series


def jet_eval(jaxpr: Jaxpr, consts: Sequence[Any], primals: Sequence[Any], series: Sequence[Any],
             order: int):
    """Run ``jaxpr`` on primals and their series in the current trace: (primal outs, series outs).

    ``series`` holds per input a list of ``order`` terms or ``zero_series``; so do the results.
    """
    primal_env: dict[Var, Any] = {}
    series_env: dict[Var, Any] = {}

    def read_primal(a):
        return literal_value(a) if type(a) is Literal else primal_env[a]

    def read_series(a):
        return zero_series if type(a) is Literal else series_env[a]

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v], series_env[v] = c, zero_series
    for v, p, s in zip(jaxpr.invars, primals, series):
        primal_env[v], series_env[v] = p, s
    with replayed_sources() as location:
        for eqn in jaxpr.eqns:
            prim = eqn.primitive
            series_in = [read_series(a) for a in eqn.invars]
            location.source = eqn.source_info
            if all(s is zero_series for s in series_in):
                outs = prim.bind(*[a if type(a) is Literal else primal_env[a] for a in eqn.invars],
                                 **eqn.params)
                outs = outs if prim.multiple_results else [outs]
                souts = [zero_series] * len(eqn.outvars)
            else:
                rule = jet_rules.get(prim)
                if rule is None:
                    raise NotImplementedError(
                        f"Jet rule for '{prim.name}' not implemented: no entry in "
                        "jaxprc.experimental.jet.jet_rules, so Taylor series cannot pass through it.")
                series_in = [instantiate_series(s, a.aval, order) for s, a in zip(series_in, eqn.invars)]
                outs, souts = rule([read_primal(a) for a in eqn.invars], series_in, **eqn.params)
                if not prim.multiple_results:
                    outs, souts = [outs], [souts]
                souts = [_checked_series(prim, v.aval, s, order) for v, s in zip(eqn.outvars, souts)]
            for v, p, s in zip(eqn.outvars, outs, souts):
                primal_env[v], series_env[v] = p, s
    return [read_primal(a) for a in jaxpr.outvars], [read_series(a) for a in jaxpr.outvars]


@memoize_on_jaxpr
def jet_jaxpr(cj: ClosedJaxpr, order: int, nonzeros: Sequence[bool],
              instantiate: Sequence[bool] | bool = True,
              series_avals: Sequence[ShapedArray] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The jet of ``cj``: inputs are the primals, then ``order`` terms per input marked
    ``nonzeros``; outputs are the primal outputs, then ``order`` terms per output whose series is
    nonzero (or instantiated). Returns that jaxpr and the nonzero mask of output series.

    ``series_avals`` are the types of the input terms (by default their primals'): a term may
    differ from its primal in weak type."""
    if not isinstance(order, int) or isinstance(order, bool) or order < 0:
        raise ValueError(f"jet: order must be a non-negative int, got {order!r}")
    n_out = len(cj.out_avals)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    in_avals = list(cj.in_avals)
    if series_avals is None:
        series_avals = [a for a, nz in zip(in_avals, nonzeros) if nz for _ in range(order)]
    series_avals = list(series_avals)
    out_nonzeros: list[bool] = []

    def fun(*args):
        primals, rest = list(args[:len(in_avals)]), iter(args[len(in_avals):])
        series = [[next(rest) for _ in range(order)] if nz else zero_series for nz in nonzeros]
        outs, souts = jet_eval(cj.jaxpr, cj.consts, primals, series, order)
        souts = [instantiate_series(s, get_aval(o), order, weak=True) if inst else s
                 for o, s, inst in zip(outs, souts, instantiate)]
        out_nonzeros[:] = [s is not zero_series for s in souts]
        return outs + [t for s in souts if s is not zero_series for t in s]

    out = trace_to_jaxpr(fun, in_avals + series_avals, name="jet")
    return out, out_nonzeros


def jet(cj: ClosedJaxpr, order: int = 1) -> ClosedJaxpr:
    """The pipeline pass: (primals, ``order`` terms of every float input) -> (outputs, ``order``
    terms of every output)."""
    nonzeros = [dt.is_inexact(a.dtype) for a in cj.in_avals]
    return jet_jaxpr(cj, order, nonzeros, instantiate=True)[0]


register_pass("jet", jet)


# ------------------------------------------------- helpers for the families' rules

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
