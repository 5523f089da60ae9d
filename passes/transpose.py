"""Transposition of linear jaxprs: cotangents of the outputs -> cotangents of the linear inputs.

Inputs are either linear (``UndefinedPrimal(aval)``: the value is what we
solve for) or known (residuals, passed as values). Equations whose inputs
are all known are evaluated forward; the rest are walked backwards, each by
``transpose_rules[prim](ct, *invals, **params) -> list of input cotangents``
(``ct`` a list for multiple results; ``None`` or ``Zero`` for inputs that get
nothing). Cotangents reaching the same variable are added; ``Zero``
cotangents stay symbolic and are only materialised in the results.
"""
from __future__ import annotations

from typing import Any, Sequence


from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import replayed_sources, trace_to_jaxpr

from .jvp import Zero, add_tangents, instantiate_zeros, literal_value
from .registry import register_pass
from .memo import memoize_on_jaxpr


class UndefinedPrimal:
    """A linear input of a transpose rule: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return isinstance(x, UndefinedPrimal)


transpose_rules: dict = {}


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], cts_out: Sequence[Any]):
    """Cotangents of ``jaxpr``'s linear inputs (those given as ``UndefinedPrimal``), in the
    current trace. ``cts_out`` may hold ``Zero``s; results may be ``Zero``."""
    primal_env: dict[Var, Any] = {}
    linear: set[Var] = set()
    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, x in zip(jaxpr.invars, args):
        if is_undefined_primal(x):
            linear.add(v)
        else:
            primal_env[v] = x

    def read_primal(a):
        if isinstance(a, Literal):
            return literal_value(a)
        return UndefinedPrimal(a.aval) if a in linear else primal_env[a]

    linear_eqns = []
    with replayed_sources() as location:
        for eqn in jaxpr.eqns:          # forward: evaluate what does not depend on linear inputs
            for a in eqn.invars:
                if type(a) is Var and a in linear:
                    break
            else:
                location.source = eqn.source_info
                outs = eqn.primitive.bind(*[a if type(a) is Literal else primal_env[a] for a in eqn.invars],
                                          **eqn.params)
                for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
                    primal_env[v] = o
                continue
            linear.update(eqn.outvars)
            linear_eqns.append(eqn)

    ct_env: dict[Var, Any] = {}

    def add_ct(v, ct):
        if type(v) is Var and v in linear and ct is not None and type(ct) is not Zero:
            ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    with replayed_sources() as location:
        for eqn in reversed(linear_eqns):
            cts = [ct_env.pop(v, None) for v in eqn.outvars]
            if all(ct is None for ct in cts):
                continue
            cts = [Zero(v.aval) if ct is None else ct for v, ct in zip(eqn.outvars, cts)]
            rule = transpose_rules.get(eqn.primitive)
            if rule is None:
                raise NotImplementedError(
                    f"Transpose rule for '{eqn.primitive.name}' not implemented (transpose pass): it is "
                    "not linear in its inputs, or its rule is missing, so reverse-mode differentiation "
                    "through it is unavailable.")
            ct_arg = cts if eqn.primitive.multiple_results else cts[0]
            location.source = eqn.source_info       # the transposed ops keep the user's line
            cts_in = rule(ct_arg, *map(read_primal, eqn.invars), **eqn.params)
            for a, ct in zip(eqn.invars, cts_in):
                add_ct(a, ct)
    return [ct_env.get(v, Zero(v.aval)) if is_undefined_primal(x) else None
            for v, x in zip(jaxpr.invars, args)]


@memoize_on_jaxpr(uncached_when=lambda kw: kw.get("values") is not None)
def transpose_jaxpr(cj: ClosedJaxpr, linear: Sequence[bool],
                    instantiate: Sequence[bool] | bool = True,
                    values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The transpose of ``cj`` with respect to its ``linear`` inputs.

    The result takes (the non-linear inputs, then a cotangent per output) and returns a
    cotangent per linear input: materialised where ``instantiate``, else only those that are
    nonzero. Returns it and the nonzero mask over the linear inputs. ``values``, when given,
    are the concrete inputs of the result: a custom_vjp ``bwd`` then runs on concrete values
    (the user's Python sees numbers) and its results enter the program as constants.
    """
    in_avals = cj.in_avals
    lin_avals = [a for a, lin in zip(in_avals, linear) if lin]
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(lin_avals)
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    nonzeros: list[bool] = []

    def fun(*args):
        nonlin, cts = iter(args[:len(nonlin_avals)]), args[len(nonlin_avals):]
        primals = [UndefinedPrimal(a) if lin else next(nonlin) for a, lin in zip(in_avals, linear)]
        cts_in = backward_pass(cj.jaxpr, cj.consts, primals, cts)
        cts_in = [ct for ct, lin in zip(cts_in, linear) if lin]
        cts_in = [instantiate_zeros(ct) if inst else ct for ct, inst in zip(cts_in, instantiate)]
        nonzeros[:] = [not isinstance(ct, Zero) for ct in cts_in]
        return [ct for ct in cts_in if not isinstance(ct, Zero)]

    out = trace_to_jaxpr(fun, nonlin_avals + list(cj.out_avals), name="transpose", concrete_args=values)
    return out, nonzeros


def transpose(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: every input linear; cotangents of the outputs -> of the inputs."""
    return transpose_jaxpr(cj, [True] * len(cj.in_avals))[0]


register_pass("transpose", transpose)
