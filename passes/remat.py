"""Rematerialization: the rules of every pass for ``checkpoint`` and for the ``name``
primitive that saving policies can match (both primitives and the ``CheckpointPolicy`` param
are defined in ``jaxprc.ir.prims.control_flow``).

``checkpoint[jaxpr, prevent_cse, policy]`` calls its jaxpr. It means something only to
partial evaluation (so to linearize and reverse mode): of the known values the unknown
(tangent) part needs, only those the policy deems saveable become residuals; the rest are
recomputed from the checkpoint's known inputs inside the unknown part, which stays a
``checkpoint`` so that transposition keeps the recomputation in the backward pass and the
lowering can fence it off (``stablehlo.optimization_barrier``) from the forward pass.

A policy is ``None`` (save nothing but the inputs, as JAX), a ``CheckpointPolicy`` record
(printable and parsable, so programs round-trip through the text form) or any Python callable
with JAX's signature ``policy(prim, *in_avals, **params) -> bool``.
"""
from __future__ import annotations

from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, Var
from jaxprc.ir.prims.control_flow import checkpoint_p, name_p
from jaxprc.ir.tracing import close_over_consts

from .dce import dce_closed, dce_jaxpr, dce_rules
from .jvp import Zero, instantiate_zeros, jvp_jaxpr, jvp_rules, tangent_aval
from .partial_eval import partial_eval_jaxpr, pe_rules
from .transpose import is_undefined_primal, transpose_jaxpr, transpose_rules
from .vmap import batch_rules

__all__ = ["saveable"]


def saveable(policy, eqn: Eqn) -> bool:
    """Whether ``policy`` lets partial evaluation keep the results of ``eqn`` as residuals."""
    if policy is None:
        return False
    return bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))


# ------------------------------------------------------------ name primitive
# ``checkpoint_name(x, name)``: the identity, tagged so that name-based policies can save x.

def _name_jvp(primals, tangents, *, name):
    (x,), (t,) = primals, tangents
    return name_p.bind(x, name=name), t        # the tangent is not named (as in JAX)


def _name_transpose(ct, x, *, name):
    return [ct]


def _name_batch(args, dims, *, name):
    return name_p.bind(args[0], name=name), dims[0]


jvp_rules[name_p] = _name_jvp
transpose_rules[name_p] = _name_transpose
batch_rules[name_p] = _name_batch


# ------------------------------------------------------------------- jvp

def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, policy):
    """The checkpoint of the jvp: primal and tangent computations stay under one policy."""
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    nonzero_tangents = [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]
    outs = checkpoint_p.bind(*consts, *primals, *nonzero_tangents, jaxpr=body,
                             prevent_cse=prevent_cse, policy=policy)
    n_out = len(jaxpr.out_avals)
    rest = iter(outs[n_out:])
    return list(outs[:n_out]), [next(rest) if nz else Zero(tangent_aval(a))
                                for nz, a in zip(out_nz, jaxpr.out_avals)]


# ------------------------------------------------------ partial evaluation

def _remat_split(known: Jaxpr, residuals: list[Var], policy):
    """Which residuals to save and which known equations to recompute in the unknown part.

    Inputs of the known jaxpr are free (the checkpoint's operands). A residual from a
    saveable equation is saved; any other is recomputed, walking back through unsaveable
    equations until inputs or saveable results, which are then saved in turn. Returns
    (saved vars in definition order, the equations to recompute in order).
    """
    inputs = set(known.invars)
    producer = {v: e for e in known.eqns for v in e.outvars}
    saved: set[Var] = set()
    needed: set[Var] = set()

    def need(v):
        if not isinstance(v, Var) or v in inputs:
            return
        (saved if saveable(policy, producer[v]) else needed).add(v)

    for r in residuals:
        need(r)
    recompute = []
    for eqn in reversed(known.eqns):
        if any(v in needed for v in eqn.outvars):
            recompute.append(eqn)
            for a in eqn.invars:
                need(a)
    order = [v for e in known.eqns for v in e.outvars if v in saved]
    return order, recompute[::-1]


def _inline(jaxpr: Jaxpr, args, outvars: list[Var]) -> list[Eqn]:
    """The equations of ``jaxpr`` applied to ``args``, defining ``outvars``: fresh variables
    (the jaxpr may be inlined elsewhere too); outputs that are not results of one of its
    equations (an input, a literal, a repeat) are defined by a ``copy``."""
    env = dict(zip(jaxpr.invars, args))
    wanted: dict[Var, Var] = {}
    copies = []
    for src, dst in zip(jaxpr.outvars, outvars):
        if isinstance(src, Var) and src not in env and src not in wanted:
            wanted[src] = dst
        else:
            copies.append((src, dst))
    read = lambda a: env[a] if isinstance(a, Var) else a
    eqns = []
    for eqn in jaxpr.eqns:
        new_outs = [wanted.get(v) or Var(v.aval) for v in eqn.outvars]
        eqns.append(eqn.replace(invars=[read(a) for a in eqn.invars], outvars=new_outs))
        env.update(zip(eqn.outvars, new_outs))
    copy_p = PRIMITIVES["copy"]
    eqns += [Eqn(copy_p, [read(src)], [dst], {}) for src, dst in copies]
    return eqns


def _checkpoint_partial_eval(eqn: Eqn, uk_in):
    """Known part: inlined into the known program, computing the known outputs and the saved
    residuals. Unknown part: a checkpoint that recomputes the unsaved residuals from its known
    inputs and the saved ones, then runs the unknown equations."""
    p = eqn.params
    body = p["jaxpr"]
    known, unknown, out_uk, n_res = partial_eval_jaxpr(body, uk_in, False)
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known_out = len(kj.outvars) - n_res
    saved, recompute = _remat_split(kj, list(kj.outvars[n_known_out:]), p["policy"])

    known_body = Jaxpr([], kj.invars, kj.outvars[:n_known_out] + saved, kj.eqns)
    known_body, _ = dce_jaxpr(known_body, [True] * len(known_body.outvars), keep_inputs=True)
    known_operands = [a for a, uk in zip(eqn.invars, uk_in) if not uk]
    known_outvars = [v for v, uk in zip(eqn.outvars, out_uk) if not uk]
    outer_saved = [Var(v.aval) for v in saved]
    known_eqns = _inline(known_body, known_operands, known_outvars + outer_saved)

    if not any(out_uk):
        return known_eqns, [], out_uk
    unknown_in = uj.invars[n_res:]
    u_body = Jaxpr([], saved + kj.invars + unknown_in, uj.outvars, recompute + uj.eqns)
    u_body, used = dce_jaxpr(u_body, [True] * len(uj.outvars))
    u_operands = outer_saved + known_operands + [a for a, uk in zip(eqn.invars, uk_in) if uk]
    u_eqn = eqn.replace(invars=[a for a, u in zip(u_operands, used) if u],
                        outvars=[v for v, uk in zip(eqn.outvars, out_uk) if uk],
                        params={**p, "jaxpr": ClosedJaxpr(u_body, [])})
    return known_eqns, [u_eqn], out_uk


# ------------------------------------------------------------- transpose

def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, policy):
    """The transpose stays a checkpoint: the recomputation it holds (evaluated forward inside
    the transposed body) runs in the backward pass, next to the cotangents that need it."""
    linear = [is_undefined_primal(a) for a in args]
    body, nonzeros = transpose_jaxpr(jaxpr, linear, instantiate=False)
    body, consts = close_over_consts(body)
    nonlinear = [a for a in args if not is_undefined_primal(a)]
    outs = iter(checkpoint_p.bind(*consts, *nonlinear, *map(instantiate_zeros, cts), jaxpr=body,
                                  prevent_cse=prevent_cse, policy=policy))
    nonzero = iter(nonzeros)
    return [(next(outs) if next(nonzero) else Zero(a.aval)) if is_undefined_primal(a) else None
            for a in args]


# ------------------------------------------------------------------- dce

def _checkpoint_dce(used_outputs, eqn):
    body, used_inputs = dce_closed(eqn.params["jaxpr"], used_outputs)
    return used_inputs, eqn.replace(invars=[a for a, u in zip(eqn.invars, used_inputs) if u],
                                    outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
                                    params={**eqn.params, "jaxpr": body})


jvp_rules[checkpoint_p] = _checkpoint_jvp
pe_rules[checkpoint_p] = _checkpoint_partial_eval
transpose_rules[checkpoint_p] = _checkpoint_transpose
dce_rules[checkpoint_p] = _checkpoint_dce
# vmap: passes/vmap.py batches the callee (its rule for calls).
