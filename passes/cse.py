"""Common-subexpression elimination: an equation equal to an earlier one (same
primitive, same inputs, same params) reuses the earlier results.

Sound for pure equations; equations with effects (``jaxprc.ir.effects``) are
never merged: each runs. Sub-jaxprs are simplified
too. Params that cannot be hashed (callables, thunks) just opt out.
"""
from __future__ import annotations

from jaxprc.ir.core import Atom, ClosedJaxpr, Jaxpr, Var
from jaxprc.ir.effects import eqn_effects

from .registry import map_subjaxprs, register_pass


def cse_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    rename: dict[Var, Atom] = {}
    seen: dict = {}
    eqns = []
    for eqn in jaxpr.eqns:
        params = map_subjaxprs(eqn.params, cse) if eqn.params else eqn.params
        invars = [rename.get(a, a) if type(a) is Var else a for a in eqn.invars] if rename else eqn.invars
        if params is not eqn.params or invars != eqn.invars:     # (lists compare by identity first)
            eqn = eqn.replace(invars=invars, params=params)
        key = (eqn.primitive, tuple(invars), tuple(sorted(params.items())) if params else ())
        try:
            earlier = seen.setdefault(key, eqn)
        except (TypeError, ImportError):   # unhashable params, or no structural hash yet
            earlier = eqn
        if earlier is not eqn and not eqn_effects(eqn):
            rename.update(zip(eqn.outvars, earlier.outvars))
            continue
        eqns.append(eqn)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [rename.get(a, a) if type(a) is Var else a
                                                 for a in jaxpr.outvars], eqns)


def cse(cj: ClosedJaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(cse_jaxpr(cj.jaxpr), cj.consts)


register_pass("cse", cse)
