"""Forward-mode differentiation as a pass: f: a -> b  ==>  (a, Ta) -> (b, Tb).

The pass re-traces the program: a new builder gets the primal inputs and the
nonzero tangent inputs, and each equation is replaced by its rule
``jvp_rules[prim](primals, tangents, **params) -> (primal_out, tangent_out)``
(lists for multiple results). Tangents may be ``Zero(aval)``: a symbolic zero
that costs nothing and is only materialised when an output must hold it.
Integer and boolean values have float0 tangents, which are always Zero.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence


from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import get_aval, replayed_sources, trace_to_jaxpr

from . import emit
from .registry import register_pass
from .memo import memoize_on_jaxpr


# ---------------------------------------------------------------- tangents

class Zero:
    """A symbolic zero tangent (or cotangent) of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> "Zero":
        return Zero(tangent_aval(aval_of(x)))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def aval_of(x) -> ShapedArray:
    """The type of a value, tracer, Literal, Zero or UndefinedPrimal."""
    aval = getattr(x, "aval", None)
    return aval if isinstance(aval, ShapedArray) else get_aval(x)


def is_differentiable(aval: ShapedArray) -> bool:
    return dt.is_inexact(aval.dtype)


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent type: the same for floats, float0 for integers and booleans (as in JAX)."""
    return aval if is_differentiable(aval) else ShapedArray(aval.shape, dt.float0)


def zeros(aval: ShapedArray):
    if aval.dtype == dt.float0:
        raise TypeError(f"cannot materialise a float0 zero of type {aval.str_short()} in a program")
    return emit.zeros(aval)


def instantiate_zeros(t):
    return zeros(t.aval) if isinstance(t, Zero) else t


def add_tangents(a, b):
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return emit.add(a, b)


def literal_value(lit: Literal):
    """A literal as a rule argument: a Python scalar when weakly typed, else a numpy scalar."""
    return lit.val.item() if lit.aval.weak_type else lit.val


# --------------------------------------------------------------- the pass

JvpRule = Callable[..., Any]
jvp_rules: dict = {}


def jvp_eval(jaxpr: Jaxpr, consts: Sequence[Any], primals: Sequence[Any], tangents: Sequence[Any]):
    """Run ``jaxpr`` on primals and tangents in the current trace: (primal outs, tangent outs)."""
    primal_env: dict[Var, Any] = {}
    tangent_env: dict[Var, Any] = {}

    def read_primal(a):
        return literal_value(a) if isinstance(a, Literal) else primal_env[a]

    def read_tangent(a):
        return Zero(tangent_aval(a.aval)) if isinstance(a, Literal) else tangent_env[a]

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v], tangent_env[v] = c, Zero(tangent_aval(v.aval))
    for v, p, t in zip(jaxpr.invars, primals, tangents):
        primal_env[v], tangent_env[v] = p, t
    with replayed_sources() as location:
        for eqn in jaxpr.eqns:
            prim = eqn.primitive
            tangents_in = [read_tangent(a) for a in eqn.invars]
            location.source = eqn.source_info     # what the rule emits keeps the user's line
            if all(type(t) is Zero for t in tangents_in):
                outs = prim.bind(*[a if type(a) is Literal else primal_env[a] for a in eqn.invars],
                                 **eqn.params)
                outs = outs if prim.multiple_results else [outs]
                touts = [Zero(tangent_aval(v.aval)) for v in eqn.outvars]
            else:
                rule = jvp_rules.get(prim)
                if rule is None:
                    raise NotImplementedError(
                        f"Differentiation rule for '{prim.name}' not implemented (jvp pass): no entry in "
                        "jvp_rules, so forward- and reverse-mode derivatives through it are unavailable.")
                outs, touts = rule([read_primal(a) for a in eqn.invars], tangents_in, **eqn.params)
                if not prim.multiple_results:
                    outs, touts = [outs], [touts]
            for v, p, t in zip(eqn.outvars, outs, touts):
                primal_env[v], tangent_env[v] = p, t
    return ([read_primal(a) if isinstance(a, Literal) else primal_env[a] for a in jaxpr.outvars],
            [read_tangent(a) for a in jaxpr.outvars])


@memoize_on_jaxpr(uncached_when=lambda kw: kw.get("primal_values") is not None)
def jvp_jaxpr(cj: ClosedJaxpr, nonzeros: Sequence[bool], instantiate: Sequence[bool] | bool,
              primal_values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The jvp of ``cj``: inputs are the primals then the tangents of inputs marked ``nonzeros``;
    outputs are the primal outputs then the tangents of outputs that are nonzero (or instantiated).

    Returns that jaxpr and the nonzero mask of output tangents. Integer outputs never get a
    tangent output (float0 zeros are made by the caller). ``primal_values``, when given, are
    concrete primal inputs, so Python code traced during the pass may inspect values.
    """
    n_out = len(cj.jaxpr.outvars)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    in_avals = cj.in_avals
    nonzeros = [bool(nz) and is_differentiable(a) for nz, a in zip(nonzeros, in_avals)]
    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    out_nonzeros: list[bool] = []

    def fun(*args):
        primals, rest = list(args[:len(in_avals)]), iter(args[len(in_avals):])
        tangents = [next(rest) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs, touts = jvp_eval(cj.jaxpr, cj.consts, primals, tangents)
        touts = [instantiate_zeros(t) if inst and is_differentiable(aval_of(t)) else t
                 for t, inst in zip(touts, instantiate)]
        out_nonzeros[:] = [not isinstance(t, Zero) for t in touts]
        return outs + [t for t in touts if not isinstance(t, Zero)]

    concrete = None
    if primal_values is not None:
        concrete = list(primal_values) + [None] * len(tangent_avals)
    out = trace_to_jaxpr(fun, list(in_avals) + tangent_avals, name="jvp", concrete_args=concrete)
    return out, out_nonzeros


def jvp(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: (primals, tangents of every float input) -> (outputs, all tangents)."""
    out, _ = jvp_jaxpr(cj, [True] * len(cj.in_avals), instantiate=True)
    return out


register_pass("jvp", jvp)
