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
"""
from __future__ import annotations

from typing import Any, Sequence

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import get_aval, replayed_sources, trace_to_jaxpr

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
