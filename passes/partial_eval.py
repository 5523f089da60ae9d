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
unknown_eqns, out_unknowns)``; control flow and calls split their bodies so
that the primal part of a loop stays in the known program (scan stacks its
per-iteration residuals).
"""
from __future__ import annotations

from typing import Sequence

from jaxprc.ir import lax
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import eval_jaxpr, source_info_of, trace_to_jaxpr

from .dce import dce_closed
from .jvp import jvp_jaxpr
from .registry import register_pass

pe_rules: dict = {}


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
    assert not any(out_uk[:n_out]), "primal outputs must not depend on tangents"
    return known, unknown, out_nz, n_res


def linearize(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: the linear tangent jaxpr, with the residuals as leading inputs."""
    _, lin, _, _ = linearize_jaxpr(cj, [True] * len(cj.in_avals))
    return lin


register_pass("linearize", linearize)


# ------------------------------------------------------------------ rules

def _pick(xs, mask, keep=True):
    return [x for x, m in zip(xs, mask) if bool(m) == keep]


def _new_vars(avals):
    return [Var(a) for a in avals]


def _pe_jit(eqn, uk_in):
    callee = eqn.params["jaxpr"]
    known, unknown, out_uk, n_res = partial_eval_jaxpr(callee, uk_in, False)
    residuals = _new_vars(known.out_avals[len(known.out_avals) - n_res:])
    k_eqn = eqn.replace(invars=_pick(eqn.invars, uk_in, False),
                        outvars=_pick(eqn.outvars, out_uk, False) + residuals,
                        params={**eqn.params, "jaxpr": known})
    u_eqn = eqn.replace(invars=residuals + _pick(eqn.invars, uk_in),
                        outvars=_pick(eqn.outvars, out_uk), params={**eqn.params, "jaxpr": unknown})
    return [k_eqn], [u_eqn], out_uk


def _pe_cond(eqn, uk_in):
    if uk_in[0]:                       # the branch is not known yet: everything waits
        return [], [eqn], [True] * len(eqn.outvars)
    branches = eqn.params["branches"]
    ops_uk = uk_in[1:]
    out_uk = [False] * len(eqn.outvars)
    for br in branches:
        out_uk = [a or b for a, b in zip(out_uk, partial_eval_jaxpr(br, ops_uk, False)[2])]
    splits = [partial_eval_jaxpr(br, ops_uk, out_uk) for br in branches]
    res_avals = [k.out_avals[len(k.out_avals) - n:] for k, _, _, n in splits]
    all_res = [a for avals in res_avals for a in avals]
    n_known_out = len(eqn.outvars) - sum(out_uk)

    def known_branch(i, k):
        def fun(*args):
            outs = eval_jaxpr(k.jaxpr, k.consts, *args)
            pads = [[lax.full_like(Literal(0, ShapedArray((), a.dtype, a.weak_type)), 0, shape=a.shape)
                     for a in avals] for avals in res_avals]     # zeros of the residuals' types
            pads[i] = outs[n_known_out:]
            return outs[:n_known_out] + [x for p in pads for x in p]
        return trace_to_jaxpr(fun, k.in_avals, name="cond_known")

    def unknown_branch(i, u):
        start = sum(len(r) for r in res_avals[:i])
        n_mine = len(res_avals[i])
        def fun(*args):
            res, rest = args[:len(all_res)], args[len(all_res):]
            return eval_jaxpr(u.jaxpr, u.consts, *res[start:start + n_mine], *rest)
        return trace_to_jaxpr(fun, all_res + u.in_avals[n_mine:], name="cond_unknown")

    residuals = _new_vars(all_res)
    ops = eqn.invars[1:]
    k_eqn = eqn.replace(invars=[eqn.invars[0]] + _pick(ops, ops_uk, False),
                        outvars=_pick(eqn.outvars, out_uk, False) + residuals,
                        params={**eqn.params, "branches": tuple(known_branch(i, k) for i, (k, *_)
                                                                in enumerate(splits))})
    u_eqn = eqn.replace(invars=[eqn.invars[0]] + residuals + _pick(ops, ops_uk),
                        outvars=_pick(eqn.outvars, out_uk),
                        params={**eqn.params, "branches": tuple(unknown_branch(i, u) for i, (_, u, _, _)
                                                                in enumerate(splits))})
    return [k_eqn], [u_eqn], out_uk


def _pe_scan(eqn, uk_in):
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    body = p["jaxpr"]
    n_ys = len(eqn.outvars) - nk
    consts_uk, carry_uk, xs_uk = uk_in[:nc], list(uk_in[nc:nc + nk]), uk_in[nc + nk:]
    while True:   # a carry is unknown if its next value is
        _, _, out_uk, _ = partial_eval_jaxpr(body, consts_uk + carry_uk + xs_uk, carry_uk + [False] * n_ys)
        new = [a or b for a, b in zip(carry_uk, out_uk[:nk])]
        if new == carry_uk:
            break
        carry_uk = new
    body_uk = consts_uk + carry_uk + xs_uk
    known, unknown, out_uk, n_res = partial_eval_jaxpr(body, body_uk, carry_uk + [False] * n_ys)
    ys_uk = out_uk[nk:]
    # Residuals that are known consts of the body pass through as consts; the rest are stacked.
    n_known_consts = nc - sum(consts_uk)
    known_consts_in = known.jaxpr.invars[:n_known_consts]
    res_vars = known.jaxpr.outvars[len(known.jaxpr.outvars) - n_res:]
    is_const_res = [isinstance(v, Var) and v in known_consts_in for v in res_vars]
    outer_known_consts = _pick(eqn.invars[:nc], consts_uk, False)
    const_res = [outer_known_consts[known_consts_in.index(v)] for v, c in zip(res_vars, is_const_res) if c]

    k_body = Jaxpr(known.jaxpr.constvars, known.jaxpr.invars,
                   known.jaxpr.outvars[:len(known.jaxpr.outvars) - n_res] + _pick(res_vars, is_const_res, False),
                   known.jaxpr.eqns)
    k_body = dce_closed(ClosedJaxpr(k_body, known.consts), [True] * len(k_body.outvars), True)[0]
    stacked = _new_vars([a.update(shape=(p["length"],) + a.shape)
                         for a in _pick([v.aval for v in res_vars], is_const_res, False)])
    k_carry_n = nk - sum(carry_uk)
    known_operands = _pick(eqn.invars, body_uk, False)
    k_eqn = eqn.replace(invars=known_operands,
                        outvars=_pick(eqn.outvars, carry_uk + ys_uk, False) + stacked,
                        params={**p, "jaxpr": k_body, "num_consts": n_known_consts,
                                "num_carry": k_carry_n, "linear": (False,) * len(known_operands)})

    # unknown body invars: residuals + uk consts + uk carry + uk xs -> [const res, uk consts,
    # uk carry, stacked res, uk xs]
    u_in = unknown.jaxpr.invars
    res_in, rest = u_in[:n_res], u_in[n_res:]
    n_uc, n_ukc = sum(consts_uk), sum(carry_uk)
    u_body = Jaxpr([], _pick(res_in, is_const_res) + rest[:n_uc + n_ukc] + _pick(res_in, is_const_res, False)
                   + rest[n_uc + n_ukc:], unknown.jaxpr.outvars, unknown.jaxpr.eqns)
    uk_ops = _pick(eqn.invars, body_uk)
    u_operands = const_res + uk_ops[:n_uc + n_ukc] + stacked + uk_ops[n_uc + n_ukc:]
    u_eqn = eqn.replace(invars=u_operands, outvars=_pick(eqn.outvars, carry_uk + ys_uk),
                        params={**p, "jaxpr": ClosedJaxpr(u_body, []), "num_consts": len(const_res) + n_uc,
                                "num_carry": n_ukc, "linear": (False,) * len(u_operands)})
    return [k_eqn], [u_eqn], carry_uk + ys_uk


def _pe_while(eqn, uk_in):
    """Known carries run in a known loop (when the condition only reads known values); the
    whole loop is re-run in the unknown program for the unknown carries (forward mode only,
    as in JAX)."""
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond_uk, bconsts_uk, carry_uk = uk_in[:cn], uk_in[cn:cn + bn], list(uk_in[cn + bn:])
    while True:
        _, _, out_uk, _ = partial_eval_jaxpr(p["body_jaxpr"], bconsts_uk + carry_uk, carry_uk)
        new = [a or b for a, b in zip(carry_uk, out_uk)]
        if new == carry_uk:
            break
        carry_uk = new
    _, cond_reads = dce_closed(p["cond_jaxpr"], [True])
    if any(cond_uk) or any(r and u for r, u in zip(cond_reads[cn:], carry_uk)):
        return [], [eqn], [True] * len(eqn.outvars)
    known_body = partial_eval_jaxpr(p["body_jaxpr"], bconsts_uk + carry_uk, carry_uk)[0]
    n_known = len(carry_uk) - sum(carry_uk)
    n_res = len(known_body.out_avals) - n_known
    known_body = dce_closed(known_body, [True] * n_known + [False] * n_res, True)[0]
    cj = p["cond_jaxpr"].jaxpr
    known_cond = ClosedJaxpr(Jaxpr([], cj.invars[:cn] + _pick(cj.invars[cn:], carry_uk, False),
                                   cj.outvars, cj.eqns), [])
    k_eqn = eqn.replace(invars=eqn.invars[:cn] + _pick(eqn.invars[cn:cn + bn], bconsts_uk, False)
                        + _pick(eqn.invars[cn + bn:], carry_uk, False),
                        outvars=_pick(eqn.outvars, carry_uk, False),
                        params={**p, "cond_jaxpr": known_cond, "body_jaxpr": known_body,
                                "body_nconsts": bn - sum(bconsts_uk)})
    u_eqn = eqn.replace(outvars=[v if u else Var(v.aval) for v, u in zip(eqn.outvars, carry_uk)])
    return [k_eqn], [u_eqn], carry_uk


for _name, _rule in [("jit", _pe_jit), ("cond", _pe_cond), ("scan", _pe_scan), ("while", _pe_while)]:
    if _name in PRIMITIVES:
        pe_rules[PRIMITIVES[_name]] = _rule
