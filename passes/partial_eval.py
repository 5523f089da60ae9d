"""Partial evaluation: split a jaxpr by what is known now and what is known later.

Given which inputs are unknown, ``partial_eval_jaxpr`` returns

- the *known* jaxpr: known inputs -> known outputs + residuals, and
- the *unknown* jaxpr: residuals + unknown inputs -> unknown outputs,

where the residuals are the known values the unknown part needs. Applied to
a jvp jaxpr with the primals known and the tangents unknown, this is
linearization: the known jaxpr is the primal computation, the unknown one the
linear tangent map (reverse mode then transposes it).

An equation with an unknown input is unknown as a whole, unless its
primitive has a rule in ``pe_rules``: ``rule(eqn, unknowns_in) -> (known_eqns,
unknown_eqns, out_unknowns)``; primitives holding sub-jaxprs split their bodies
(``partial_eval_jaxpr``) so that the primal part of a loop or call stays in the
known program.
"""
from __future__ import annotations

from typing import Sequence

from jaxprc.ir.core import ClosedJaxpr, Eqn, Jaxpr, Var
from jaxprc.ir.tracing import source_info_of

from .jvp import jvp_jaxpr
from .registry import register_pass
from .memo import memoize_on_jaxpr

pe_rules: dict = {}


@memoize_on_jaxpr
def partial_eval_jaxpr(cj: ClosedJaxpr, unknowns: Sequence[bool], instantiate: Sequence[bool] | bool
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split ``cj``: returns (known jaxpr, unknown jaxpr, out_unknowns, number of residuals).

    ``instantiate`` forces outputs to be unknown (a known value is then passed through as a
    residual). The known jaxpr keeps ``cj``'s consts; the unknown one has none.
    """
    jaxpr = cj.jaxpr
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(jaxpr.outvars)
    unknown_vars = {v for v, uk in zip(jaxpr.invars, unknowns) if uk}
    known_eqns: list[Eqn] = []
    unknown_eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        uk_in = [isinstance(a, Var) and a in unknown_vars for a in eqn.invars]
        if not any(uk_in):
            known_eqns.append(eqn)
            continue
        rule = pe_rules.get(eqn.primitive)
        if rule is None:
            unknown_eqns.append(eqn)
            unknown_vars.update(eqn.outvars)
            continue
        with source_info_of(eqn.source_info):    # equations a rule makes keep the user's line
            k, u, out_uk = rule(eqn, uk_in)
        known_eqns.extend(k)
        unknown_eqns.extend(u)
        unknown_vars.update(v for v, uk in zip(eqn.outvars, out_uk) if uk)

    out_unknowns = [(isinstance(v, Var) and v in unknown_vars) or bool(inst)
                    for v, inst in zip(jaxpr.outvars, instantiate)]
    residuals: list[Var] = []
    seen: set = set()

    def note_residual(a):
        if isinstance(a, Var) and a not in unknown_vars and a not in seen:
            seen.add(a)
            residuals.append(a)
    for eqn in unknown_eqns:
        for a in eqn.invars:
            note_residual(a)
    for v, uk in zip(jaxpr.outvars, out_unknowns):
        if uk:
            note_residual(v)

    known_in = [v for v, uk in zip(jaxpr.invars, unknowns) if not uk]
    known_out = [v for v, uk in zip(jaxpr.outvars, out_unknowns) if not uk]
    known = Jaxpr(jaxpr.constvars, known_in, known_out + residuals, known_eqns)
    unknown_in = [v for v, uk in zip(jaxpr.invars, unknowns) if uk]
    unknown_out = [v for v, uk in zip(jaxpr.outvars, out_unknowns) if uk]
    unknown = Jaxpr([], residuals + unknown_in, unknown_out, unknown_eqns)
    return ClosedJaxpr(known, cj.consts), ClosedJaxpr(unknown, []), out_unknowns, len(residuals)


def linearize_jaxpr(cj: ClosedJaxpr, nonzeros: Sequence[bool], primal_values=None):
    """jvp then partial evaluation with the tangents unknown.

    Returns (primal jaxpr: primals -> outputs + residuals, linear jaxpr: residuals + tangents of
    the nonzero inputs -> tangents of all differentiable outputs, output tangent mask, number of
    residuals).
    """
    n_out = len(cj.jaxpr.outvars)
    jvp_cj, out_nz = jvp_jaxpr(cj, nonzeros, instantiate=True, primal_values=primal_values)
    n_in = len(cj.in_avals)
    n_tangents = len(jvp_cj.in_avals) - n_in
    known, unknown, out_uk, n_res = partial_eval_jaxpr(
        jvp_cj, [False] * n_in + [True] * n_tangents, [False] * n_out + [True] * sum(out_nz))
    if any(out_uk[:n_out]):     # an operation without reverse mode (custom_vmap): JAX's text
        raise ValueError("Linearization failed to produce known values for all output primals. This is "
                         "typically caused by attempting to differentiate a function uses an operation "
                         "that does not support reverse-mode autodiff.")
    return known, unknown, out_nz, n_res


def linearize(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: the linear tangent jaxpr, with the residuals as leading inputs."""
    _, lin, _, _ = linearize_jaxpr(cj, [True] * len(cj.in_avals))
    return lin


register_pass("linearize", linearize)
