"""Dead-code elimination: drop equations whose results are unused, and unused
outputs (and then inputs) of the sub-jaxprs of calls and control flow.

Every primitive is pure, so an equation with no used result goes. A
primitive holding sub-jaxprs has a rule in ``dce_rules``:
``rule(used_outputs, eqn) -> (used_inputs, new_eqn | None)``; the rule may
return an equation with fewer inputs and outputs (the unused ones removed).
Loops iterate to a fixed point: a carry is live when its next value is.
"""
from __future__ import annotations

from typing import Callable, Sequence

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, Thunk, Var

from .registry import register_pass

DceRule = Callable[[Sequence[bool], Eqn], "tuple[list[bool], Eqn | None]"]
dce_rules: dict = {}


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool],
              keep_inputs: Sequence[bool] | bool = False) -> tuple[Jaxpr, list[bool]]:
    """Keep only ``used_outputs`` and what they need.

    Returns the new jaxpr, whose invars are those used (or kept by
    ``keep_inputs``), and that mask over the old invars. Constvars are kept.
    """
    if isinstance(keep_inputs, bool):
        keep_inputs = [keep_inputs] * len(jaxpr.invars)
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v for v in outvars if isinstance(v, Var)}
    new_eqns = []
    for eqn in reversed(jaxpr.eqns):
        used_outs = [v in live for v in eqn.outvars]
        if not any(used_outs):
            continue
        rule = dce_rules.get(eqn.primitive)
        new_eqn = rule(used_outs, eqn)[1] if rule else eqn
        if new_eqn is None:
            continue
        new_eqns.append(new_eqn)
        live.update(v for v in new_eqn.invars if isinstance(v, Var))
    used_inputs = [v in live or k for v, k in zip(jaxpr.invars, keep_inputs)]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u]
    return Jaxpr(jaxpr.constvars, invars, outvars, new_eqns[::-1]), used_inputs


def dce_closed(cj: ClosedJaxpr, used_outputs: Sequence[bool],
               keep_inputs: Sequence[bool] | bool = False) -> tuple[ClosedJaxpr, list[bool]]:
    j, used = dce_jaxpr(cj.jaxpr, used_outputs, keep_inputs)
    return ClosedJaxpr(j, cj.consts), used


def dce(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pass: same signature, dead equations and unused constants removed."""
    j, _ = dce_jaxpr(cj.jaxpr, [True] * len(cj.jaxpr.outvars), keep_inputs=True)
    live = set()
    for eqn in j.eqns:
        live.update(v for v in eqn.invars if isinstance(v, Var))
    live.update(v for v in j.outvars if isinstance(v, Var))
    kept = [(v, c) for v, c in zip(j.constvars, cj.consts) if v in live]
    return ClosedJaxpr(Jaxpr([v for v, _ in kept], j.invars, j.outvars, j.eqns), [c for _, c in kept])


register_pass("dce", dce)


# ------------------------------------------------------------------ rules

def _pick(xs, mask):
    return [x for x, m in zip(xs, mask) if m]


def _dce_jit(used_outputs, eqn):
    callee, used_inputs = dce_closed(eqn.params["jaxpr"], used_outputs)
    return used_inputs, eqn.replace(invars=_pick(eqn.invars, used_inputs),
                                    outvars=_pick(eqn.outvars, used_outputs),
                                    params={**eqn.params, "jaxpr": callee})


def _dce_cond(used_outputs, eqn):
    branches = eqn.params["branches"]
    used_ops = [False] * (len(eqn.invars) - 1)
    for br in branches:
        used_ops = [a or b for a, b in zip(used_ops, dce_closed(br, used_outputs)[1])]
    new_branches = tuple(dce_closed(br, used_outputs, keep_inputs=used_ops)[0] for br in branches)
    used_inputs = [True] + used_ops
    return used_inputs, eqn.replace(invars=_pick(eqn.invars, used_inputs),
                                    outvars=_pick(eqn.outvars, used_outputs),
                                    params={**eqn.params, "branches": new_branches})


def _dce_scan(used_outputs, eqn):
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    body = p["jaxpr"]
    used_carry = list(used_outputs[:nk])
    used_ys = list(used_outputs[nk:])
    while True:   # a carry is live if its next value feeds a live carry or output
        _, used_in = dce_closed(body, used_carry + used_ys)
        carry_in = used_in[nc:nc + nk]
        new_carry = [a or b for a, b in zip(used_carry, carry_in)]
        if new_carry == used_carry:
            break
        used_carry = new_carry
    keep = [False] * nc + used_carry + [False] * (len(used_in) - nc - nk)
    new_body, used_in = dce_closed(body, used_carry + used_ys, keep_inputs=keep)
    used_consts, used_xs = used_in[:nc], used_in[nc + nk:]
    params = {**p, "jaxpr": new_body, "num_consts": sum(used_consts), "num_carry": sum(used_carry),
              "linear": tuple(_pick(p["linear"], used_in))}
    return used_in, eqn.replace(invars=_pick(eqn.invars, used_in),
                                outvars=_pick(eqn.outvars, used_carry + used_ys), params=params)


def _dce_while(used_outputs, eqn):
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]
    _, cond_used = dce_closed(cond, [True])
    used_carry = [a or b for a, b in zip(used_outputs, cond_used[cn:])]
    while True:
        _, body_used = dce_closed(body, used_carry)
        new_carry = [a or b for a, b in zip(used_carry, body_used[bn:])]
        if new_carry == used_carry:
            break
        used_carry = new_carry
    new_body, body_used = dce_closed(body, used_carry, keep_inputs=[False] * bn + used_carry)
    new_cond, cond_used = dce_closed(cond, [True], keep_inputs=[False] * cn + used_carry)
    used_inputs = cond_used[:cn] + body_used[:bn] + used_carry
    params = {**p, "cond_jaxpr": new_cond, "body_jaxpr": new_body,
              "cond_nconsts": sum(cond_used[:cn]), "body_nconsts": sum(body_used[:bn])}
    return used_inputs, eqn.replace(invars=_pick(eqn.invars, used_inputs),
                                    outvars=_pick(eqn.outvars, used_carry), params=params)


def _dce_custom_jvp(used_outputs, eqn):
    """Prune unused outputs of the function and, lazily, of its rule (primal and tangent).
    Inputs stay: the rule's consts are counted from its arity."""
    if all(used_outputs):
        return [True] * len(eqn.invars), eqn
    p = eqn.params
    fun, _ = dce_closed(p["fun_jaxpr"], used_outputs, keep_inputs=True)
    used_tangents = [u for u, a in zip(used_outputs, p["fun_jaxpr"].out_avals) if dt.is_inexact(a.dtype)]
    old = p["jvp_jaxpr_thunk"]
    rule = Thunk(lambda: dce_closed(old(), list(used_outputs) + used_tangents, keep_inputs=True)[0],
                 name=old.name)
    return [True] * len(eqn.invars), eqn.replace(outvars=_pick(eqn.outvars, used_outputs),
                                                 params={**p, "fun_jaxpr": fun, "jvp_jaxpr_thunk": rule})


for _name, _rule in [("jit", _dce_jit), ("cond", _dce_cond), ("scan", _dce_scan), ("while", _dce_while),
                     ("custom_jvp_call_jaxpr", _dce_custom_jvp)]:
    if _name in PRIMITIVES:
        dce_rules[PRIMITIVES[_name]] = _rule
