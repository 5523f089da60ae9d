"""Dead-code elimination: drop equations whose results are unused, and unused
outputs (and then inputs) of the sub-jaxprs of calls and control flow.

An equation with no used result goes, unless it has effects (a host callback
that prints, ...; ``jaxprc.ir.effects``): those stay, and keep what they use. A
primitive holding sub-jaxprs has a rule in ``dce_rules``:
``rule(used_outputs, eqn) -> (used_inputs, new_eqn | None)``; the rule may
return an equation with fewer inputs and outputs (the unused ones removed).
Loops iterate to a fixed point: a carry is live when its next value is.
"""
from __future__ import annotations

from typing import Callable, Sequence

from jaxprc.ir.core import ClosedJaxpr, Eqn, Jaxpr, Var
from jaxprc.ir.effects import eqn_effects

from .registry import register_pass
from .memo import memoize_on_jaxpr

DceRule = Callable[[Sequence[bool], Eqn], "tuple[list[bool], Eqn | None]"]
dce_rules: dict = {}


@memoize_on_jaxpr
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
        if live.isdisjoint(eqn.outvars) and not eqn_effects(eqn):
            continue
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            eqn = rule([v in live for v in eqn.outvars], eqn)[1]
            if eqn is None:
                continue
        new_eqns.append(eqn)
        for v in eqn.invars:
            if type(v) is Var:
                live.add(v)
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
