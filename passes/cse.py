"""Common-subexpression elimination: an equation equal to an earlier one (same
primitive, same inputs, same params) reuses the earlier results.

Every primitive is pure, so this is always sound. Sub-jaxprs are simplified
too. Params that cannot be hashed (callables, thunks) just opt out.
"""
from __future__ import annotations

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, Var

from .registry import map_subjaxprs, register_pass


def cse_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    rename: dict[Var, Var] = {}
    seen: dict = {}
    eqns = []
    read = lambda a: rename.get(a, a) if isinstance(a, Var) else a
    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        params = map_subjaxprs(eqn.params, cse)
        eqn = eqn.replace(invars=invars, params=params)
        try:
            key = (eqn.primitive, tuple(a if isinstance(a, Literal) else id(a) for a in invars),
                   tuple(sorted(params.items())))
            hash(key)
        except (TypeError, ImportError):   # unhashable params, or no structural hash yet
            key = None
        earlier = seen.get(key) if key is not None else None
        if earlier is not None:
            rename.update(zip(eqn.outvars, earlier.outvars))
            continue
        if key is not None:
            seen[key] = eqn
        eqns.append(eqn)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [read(a) for a in jaxpr.outvars], eqns)


def cse(cj: ClosedJaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(cse_jaxpr(cj.jaxpr), cj.consts)


register_pass("cse", cse)
