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
from jaxprc.ir.tracing import eval_jaxpr, trace_to_jaxpr

from .jvp import Zero, instantiate_zeros
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
    j, n_consts = cj.jaxpr, len(cj.consts)
    opened = Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns)   # constants as droppable inputs
    pruned, used = dce_jaxpr(opened, [True] * len(j.outvars), [False] * n_consts + [True] * len(j.invars))
    consts = [c for c, u in zip(cj.consts, used) if u]
    return ClosedJaxpr(Jaxpr(pruned.invars[:len(consts)], pruned.invars[len(consts):], pruned.outvars,
                             pruned.eqns), consts)


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
    used_consts = used_in[:nc]
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


# Pruned rules are memoized per (rule, used outputs): a rule that calls its own custom function
# holds a node with the same rule and the same unused outputs, which then prunes to the same
# thunk, so the pruned rule refers to itself instead of unfolding without end.
_PRUNED_RULES: dict = {}      # (id(rule), used) -> (rule, pruned rule)
_MAX_PRUNED_RULES = 4096


def _memo_pruned(rule, used_outputs, make) -> Thunk:
    key = (id(rule), tuple(used_outputs))
    hit = _PRUNED_RULES.get(key)
    if hit is None:
        if len(_PRUNED_RULES) >= _MAX_PRUNED_RULES:
            del _PRUNED_RULES[next(iter(_PRUNED_RULES))]
        hit = _PRUNED_RULES[key] = (rule, make())
    return hit[1]


def _pruned_thunk(rule: Thunk, used_outputs) -> Thunk:
    """``rule``'s jaxpr without the outputs not in ``used_outputs`` (a prefix mask: the outputs
    after it, residuals, stay)."""
    def prune():
        j = rule()
        return dce_closed(j, list(used_outputs) + [True] * (len(j.out_avals) - len(used_outputs)),
                          keep_inputs=True)[0]
    return _memo_pruned(rule, used_outputs, lambda: Thunk(prune, name=rule.name))


def _dce_custom_jvp(used_outputs, eqn):
    """Prune unused outputs of the function and of its rule (primal and tangent).
    Inputs stay: the rule's consts are counted from its arity."""
    if all(used_outputs):
        return [True] * len(eqn.invars), eqn
    p = eqn.params
    fun, _ = dce_closed(p["fun_jaxpr"], used_outputs, keep_inputs=True)
    used_tangents = [u for u, a in zip(used_outputs, p["fun_jaxpr"].out_avals) if dt.is_inexact(a.dtype)]
    rule = _pruned_thunk(p["jvp_jaxpr_thunk"], list(used_outputs) + used_tangents)
    return [True] * len(eqn.invars), eqn.replace(outvars=_pick(eqn.outvars, used_outputs),
                                                 params={**p, "fun_jaxpr": fun, "jvp_jaxpr_thunk": rule})


class PrunedBwd(Thunk):
    """The ``bwd`` of a custom_vjp node whose unused outputs were removed: it takes cotangents
    for the kept differentiable outputs only and gives the removed ones a ``Zero``. ``call``
    (residuals, kept cotangents) runs the original (its Python function when it has one); as a
    thunk it is that call's jaxpr."""

    def __init__(self, bwd: Thunk, kept: Sequence[bool], ct_avals):
        super().__init__(self._trace, bwd.name)
        self.bwd, self.kept, self.ct_avals = bwd, tuple(kept), list(ct_avals)
        self.runs_on_values = getattr(bwd, "runs_on_values", False)

    def call(self, *args):
        n_res = len(args) - sum(self.kept)
        res, cts = args[:n_res], iter(args[n_res:])
        all_cts = [next(cts) if k else Zero(a) for k, a in zip(self.kept, self.ct_avals)]
        call = getattr(self.bwd, "call", None)
        if call is not None:
            return call(*res, *all_cts)
        j = self.bwd()
        return eval_jaxpr(j.jaxpr, j.consts, *res, *map(instantiate_zeros, all_cts))

    def _trace(self) -> ClosedJaxpr:
        in_avals = self.bwd().in_avals
        n_res = len(in_avals) - len(self.kept)
        avals = in_avals[:n_res] + [a for a, k in zip(in_avals[n_res:], self.kept) if k]
        return trace_to_jaxpr(lambda *a: list(map(instantiate_zeros, self.call(*a))), avals, name=self.name)


def _dce_custom_vjp(used_outputs, eqn):
    """Prune unused outputs of the function and of ``fwd`` (its residuals stay); ``bwd`` then
    gets cotangents for the kept outputs only. Inputs stay, as for custom_jvp."""
    if all(used_outputs):
        return [True] * len(eqn.invars), eqn
    p = eqn.params
    out_avals = p["fun_jaxpr"].out_avals
    fun, _ = dce_closed(p["fun_jaxpr"], used_outputs, keep_inputs=True)
    diff = [dt.is_inexact(a.dtype) for a in out_avals]
    bwd = _memo_pruned(p["bwd"], used_outputs, lambda: PrunedBwd(
        p["bwd"], [u for u, d in zip(used_outputs, diff) if d],
        [a.strip_weak_type() for a, d in zip(out_avals, diff) if d]))
    return [True] * len(eqn.invars), eqn.replace(
        outvars=_pick(eqn.outvars, used_outputs),
        params={**p, "fun_jaxpr": fun, "fwd_jaxpr_thunk": _pruned_thunk(p["fwd_jaxpr_thunk"], used_outputs),
                "bwd": bwd})


for _name, _rule in [("jit", _dce_jit), ("cond", _dce_cond), ("scan", _dce_scan), ("while", _dce_while),
                     ("custom_jvp_call_jaxpr", _dce_custom_jvp), ("custom_vjp_call_jaxpr", _dce_custom_vjp)]:
    if _name in PRIMITIVES:
        dce_rules[PRIMITIVES[_name]] = _rule
