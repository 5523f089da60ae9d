"""Inlining: calls are replaced by the equations of their callee.

A call primitive holds its callee in its ``jaxpr`` param; the family defining it
adds it to ``call_primitives``. Inlined at every depth, inside
control-flow bodies too, so later passes and the lowering see one flat program.
"""
from __future__ import annotations

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Primitive, Var

from .registry import map_subjaxprs, register_pass

call_primitives: set[Primitive] = set()     # primitives the pass inlines: ``prim[jaxpr, ...] *args``


def inline_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    calls = call_primitives
    eqns = []

    def splice(callee: Jaxpr, args, outvars, rename):
        env = dict(zip(callee.invars, args))
        read = lambda a: env.get(a, a) if isinstance(a, Var) else a
        for e in callee.eqns:
            e = e.replace(invars=[read(a) for a in e.invars], params=map_subjaxprs(e.params, inline))
            if e.primitive in calls and not e.params["jaxpr"].consts:
                inner = e.params["jaxpr"]
                splice(inner.jaxpr, e.invars, e.outvars, env)
                continue
            # fresh outvars: the callee may be spliced more than once
            new_outs = [Var(v.aval) for v in e.outvars]
            env.update(zip(e.outvars, new_outs))
            eqns.append(e.replace(outvars=new_outs))
        rename.update(zip(outvars, [read(a) for a in callee.outvars]))

    rename: dict[Var, object] = {}
    read = lambda a: rename.get(a, a) if isinstance(a, Var) else a
    for eqn in jaxpr.eqns:
        eqn = eqn.replace(invars=[read(a) for a in eqn.invars])
        if eqn.primitive in calls and not eqn.params["jaxpr"].consts:
            callee = eqn.params["jaxpr"]
            splice(callee.jaxpr, eqn.invars, eqn.outvars, rename)
        else:
            eqns.append(eqn.replace(params=map_subjaxprs(eqn.params, inline)))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [read(a) for a in jaxpr.outvars], eqns)


def inline(cj: ClosedJaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(inline_jaxpr(cj.jaxpr), cj.consts)


register_pass("inline", inline)
