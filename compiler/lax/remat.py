"""Rematerialization: the ``checkpoint`` primitive, its ``CheckpointPolicy`` param, and the
``name`` primitive that saving policies can match.

``checkpoint[jaxpr, prevent_cse, policy, differentiated]`` calls its jaxpr. It means something
only to partial evaluation (so to linearize and reverse mode): of the known values the unknown
(tangent) part needs, only those the policy deems saveable become residuals; the rest are
recomputed from the checkpoint's known inputs inside the unknown part, which stays a
``checkpoint`` so that transposition keeps the recomputation in the backward pass and the
lowering can fence it off (``stablehlo.optimization_barrier``) from the forward pass: that part is
marked ``differentiated=True`` (absent: False). ``prevent_cse`` is one flag, or one per operand.

A policy is ``None`` (save nothing but the inputs, as JAX), a ``CheckpointPolicy`` record
(printable and parsable, so programs round-trip through the text form) or any Python callable
with JAX's signature ``policy(prim, *in_avals, **params) -> bool``. The user API
(``checkpoint``, ``checkpoint_policies``, ``checkpoint_name``) is ``jaxprc.ad_checkpoint``.
"""
from __future__ import annotations

from typing import NamedTuple

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxprc.engine import float_checks
from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters import partial_eval as pe
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Eqn, Jaxpr, JaxprTypeError, Primitive, Var, param_type
from jaxprc.ir.effects import Effect
from jaxprc.ir.params import Bool, Callable, ClosedJaxprParam, OneOf, Optional, Record, Str, Tuple
from jaxprc.ir.tracing import close_over_consts
from jaxprc.passes.dce import dce_closed, dce_jaxpr
from jaxprc.passes.jvp import Zero, instantiate_zeros, jvp_jaxpr, tangent_aval
from jaxprc.passes.partial_eval import partial_eval_jaxpr
from jaxprc.passes.transpose import is_undefined_primal, transpose_jaxpr

from .call import _call_abstract_eval, _call_rule

__all__ = ["checkpoint_p", "name_p", "CheckpointPolicy"]


# ---------------------------------------------------------------- primitives

name_p = Primitive("name")                # checkpoint_name(x, name): the identity, tagged
name_p.def_params(name=Str())
name_p.def_impl(lambda x, *, name: x)


@name_p.def_abstract_eval
def _name_abstract_eval(x, *, name):
    if not isinstance(name, str):
        raise JaxprTypeError(f"name: param name must be a string, got {name!r}")
    return x


POLICY_KINDS = ("everything_saveable", "nothing_saveable", "dots_saveable",
                "dots_with_no_batch_dims_saveable", "save_only_these_names",
                "save_anything_except_these_names", "save_any_names_but_these")


@param_type
class CheckpointPolicy(NamedTuple):
    """A saving policy as data (printable and parsable): ``kind`` (one of ``POLICY_KINDS``)
    and, for the name-based kinds, the ``names`` given to ``checkpoint_name``. Called like
    JAX's policies: ``policy(prim, *in_avals, **params) -> bool`` (save prim's results)."""
    kind: str
    names: tuple = ()

    def __call__(self, prim: Primitive, *avals, **params) -> bool:
        kind = self.kind
        if kind == "everything_saveable":
            return True
        if kind == "nothing_saveable":
            return False
        if kind == "dots_saveable":
            return prim is lax.dot_general_p
        if kind == "dots_with_no_batch_dims_saveable":
            return prim is lax.dot_general_p and not params["dimension_numbers"][1][0]
        if kind == "save_only_these_names":
            return prim is name_p and params["name"] in self.names
        if kind == "save_anything_except_these_names":
            return not (prim is name_p and params["name"] in self.names)
        if kind == "save_any_names_but_these":
            return prim is name_p and params["name"] not in self.names
        raise JaxprTypeError(_unknown_kind(kind))


def _unknown_kind(kind) -> str:
    return f"checkpoint: unknown policy kind {kind!r}; expected one of {', '.join(POLICY_KINDS)}"


def _checkpoint_params(*, prevent_cse, policy, differentiated=False):
    if type(prevent_cse) is not bool and not (type(prevent_cse) is tuple
                                              and all(type(p) is bool for p in prevent_cse)):
        raise JaxprTypeError(f"checkpoint: param prevent_cse must be a bool or a tuple of bools (one per "
                             f"operand), got {prevent_cse!r}")
    if isinstance(policy, CheckpointPolicy):
        if policy.kind not in POLICY_KINDS:
            raise JaxprTypeError(_unknown_kind(policy.kind))
        if type(policy.names) is not tuple or not all(isinstance(n, str) for n in policy.names):
            raise JaxprTypeError(f"checkpoint: policy names must be a tuple of strings, "
                                 f"got {policy.names!r}")
    elif policy is not None and not callable(policy):
        raise JaxprTypeError(f"checkpoint: param policy must be None, a CheckpointPolicy or a "
                             f"callable policy(prim, *avals, **params), got {policy!r}")


checkpoint_p = Primitive("checkpoint")    # a call; partial evaluation consults the policy
checkpoint_p.multiple_results = True
checkpoint_p.def_params(jaxpr=ClosedJaxprParam(), prevent_cse=OneOf(Bool(), Tuple(Bool())),
                        policy=OneOf(None, Record(CheckpointPolicy, kind=Str(), names=Tuple(Str())), Callable()),
                        differentiated=Optional(Bool()))
checkpoint_p.def_abstract_eval(_call_abstract_eval("checkpoint", _checkpoint_params))


def saveable(policy, eqn: Eqn) -> bool:
    """Whether ``policy`` lets partial evaluation keep the results of ``eqn`` as residuals."""
    if policy is None:
        return False
    return bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))


# ----------------------------------------------------------------------- jvp

def _name_jvp(primals, tangents, *, name):
    (x,), (t,) = primals, tangents
    return name_p.bind(x, name=name), t        # the tangent is not named (as in JAX)


def _any_operand(prevent_cse) -> bool:
    """A per-operand ``prevent_cse`` as one flag, for a checkpoint with other operands."""
    return prevent_cse if type(prevent_cse) is bool else any(prevent_cse)


def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, policy, differentiated=False):
    """The checkpoint of the jvp: primal and tangent computations stay under one policy."""
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    nonzero_tangents = [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]
    outs = checkpoint_p.bind(*consts, *primals, *nonzero_tangents, jaxpr=body,
                             prevent_cse=_any_operand(prevent_cse), policy=policy, differentiated=differentiated)
    n_out = len(jaxpr.out_avals)
    rest = iter(outs[n_out:])
    return list(outs[:n_out]), [next(rest) if nz else Zero(tangent_aval(a))
                                for nz, a in zip(out_nz, jaxpr.out_avals)]


ad.primitive_jvps[name_p] = _name_jvp
ad.primitive_jvps[checkpoint_p] = _checkpoint_jvp


# ----------------------------------------------------------------- transpose

def _name_transpose(ct, x, *, name):
    return [ct]


def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, policy, differentiated=False):
    """The transpose stays a checkpoint: the recomputation it holds (evaluated forward inside
    the transposed body) runs in the backward pass, next to the cotangents that need it."""
    linear = [is_undefined_primal(a) for a in args]
    body, nonzeros = transpose_jaxpr(jaxpr, linear, instantiate=False)
    body, consts = close_over_consts(body)
    nonlinear = [a for a in args if not is_undefined_primal(a)]
    outs = iter(checkpoint_p.bind(*consts, *nonlinear, *map(instantiate_zeros, cts), jaxpr=body,
                                  prevent_cse=_any_operand(prevent_cse), policy=policy,
                                  differentiated=differentiated))
    nonzero = iter(nonzeros)
    return [(next(outs) if next(nonzero) else Zero(a.aval)) if is_undefined_primal(a) else None
            for a in args]


ad.primitive_transposes[name_p] = _name_transpose
ad.primitive_transposes[checkpoint_p] = _checkpoint_transpose


# ------------------------------------------------------------------ batching

def _name_batch(args, dims, *, name):
    return name_p.bind(args[0], name=name), dims[0]


batching.primitive_batchers[name_p] = _name_batch
batching.primitive_batchers[checkpoint_p] = _call_rule(checkpoint_p)     # batch the callee


# ---------------------------------------------------------- partial eval, DCE

_DEBUG_EFFECTS = frozenset({Effect.debug, Effect.ordered_debug})


def _reprint(eqn: Eqn, inputs: set, policy) -> bool:
    """Whether a debug print of the forward pass also runs with the recomputation, as in JAX:
    unless the policy saves it and it prints more than the checkpoint's own operands."""
    if not eqn.effects & _DEBUG_EFFECTS:
        return False
    return not saveable(policy, eqn) or all(a in inputs for a in eqn.invars if isinstance(a, Var))


# primitive -> rule(eqn, policy) -> None, or (the eqn computing also the values the policy saves
# inside it, those values' vars, the eqn recomputing its outputs from them): how an equation with
# sub-jaxprs (cond) that must be recomputed applies the policy inside, as JAX does
remat_split_rules: dict = {}


def remat_split(known: Jaxpr, residuals: list[Var], policy):
    """Which residuals to save and which known equations to recompute in the unknown part.

    Inputs of the known jaxpr are free (the checkpoint's operands). A residual from a
    saveable equation is saved; any other is recomputed, walking back through unsaveable
    equations until inputs or saveable results, which are then saved in turn. An equation
    to recompute with a rule in ``remat_split_rules`` saves what the policy saves inside it.
    Returns (saved vars in definition order, the equations to recompute in order, the known
    equations, those with such a rule replaced by their saving form).
    """
    inputs = set(known.invars)
    eqns = list(known.eqns)
    producer = {v: e for e in eqns for v in e.outvars}
    saved: set[Var] = set()
    needed: set[Var] = set()

    def need(v):
        if not isinstance(v, Var) or v in inputs:
            return
        (saved if saveable(policy, producer[v]) else needed).add(v)

    for r in residuals:
        need(r)
    recompute = []
    for i in reversed(range(len(eqns))):
        eqn = eqns[i]
        if any(v in needed for v in eqn.outvars) or _reprint(eqn, inputs, policy):
            rule = remat_split_rules.get(eqn.primitive) if policy is not None else None
            split = rule(eqn, policy) if rule is not None else None
            if split is not None:
                eqns[i], inner_saved, eqn = split
                saved.update(inner_saved)
            recompute.append(eqn)
            for a in eqn.invars:
                if not (isinstance(a, Var) and a in saved):
                    need(a)
    order = [v for e in eqns for v in e.outvars if v in saved]
    return order, recompute[::-1], eqns


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
    eqns += [Eqn(lax.copy_p, [read(src)], [dst], {}) for src, dst in copies]
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
    saved, recompute, known_eqns = remat_split(kj, list(kj.outvars[n_known_out:]), p["policy"])

    known_body = Jaxpr([], kj.invars, kj.outvars[:n_known_out] + saved, known_eqns)
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
                        params={**p, "jaxpr": ClosedJaxpr(u_body, []), "prevent_cse": _any_operand(p["prevent_cse"]),
                                "differentiated": True})
    return known_eqns, [u_eqn], out_uk


def _checkpoint_dce(used_outputs, eqn):
    body, used_inputs = dce_closed(eqn.params["jaxpr"], used_outputs)
    prevent_cse = eqn.params["prevent_cse"]
    if type(prevent_cse) is tuple:
        prevent_cse = tuple(p for p, u in zip(prevent_cse, used_inputs) if u)
    return used_inputs, eqn.replace(invars=[a for a, u in zip(eqn.invars, used_inputs) if u],
                                    outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
                                    params={**eqn.params, "jaxpr": body, "prevent_cse": prevent_cse})


pe.partial_eval_jaxpr_custom_rules[checkpoint_p] = _checkpoint_partial_eval
pe.dce_rules[checkpoint_p] = _checkpoint_dce


# ------------------------------------------------------------------ lowering

def _checkpoint(ctx, *args, jaxpr, prevent_cse, policy, differentiated=False):
    """Inlined; a recomputation (``differentiated``: the checkpoint differentiation leaves in the
    backward pass) behind an optimization barrier on its operands (those ``prevent_cse`` flags):
    XLA can neither merge it with the forward computation it repeats (CSE) nor move it before its
    last operand exists -- in the backward pass that is a cotangent, which comes late. Where
    nothing was differentiated there is no recomputation to protect, so no barrier, as in JAX."""
    flags = [prevent_cse] * len(args) if type(prevent_cse) is bool else list(prevent_cse)
    fenced = [i for i, f in enumerate(flags) if f]
    if differentiated and fenced:
        args = list(args)
        if ctx.platform == "cpu":
            args = _depend_on_last(args, ctx.avals_in)
        for i, a in zip(fenced, hlo.OptimizationBarrierOp([args[i] for i in fenced]).results):
            args[i] = a
    return ctx.lower_jaxpr(jaxpr, *args)


def _bits_type(aval, shape) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(shape, ir.IntegerType.get_unsigned(aval.dtype.itemsize * 8))


def _depend_on_last(args, avals):
    """XLA:CPU erases optimization barriers before its last CSE and its scheduling, so there the
    operands are also made to depend on the last one, exactly: a zero XLA cannot prove zero (the
    bits of the last operand's first element shifted right by their width) is OR-ed into the
    bits of each operand. Arguments of the enclosing function are left alone: they are live
    throughout anyway, and tying them would only copy them."""
    tieable = [i for i, a in enumerate(avals) if a.size and (dt.is_float(a.dtype) or dt.is_int(a.dtype))]
    if len(tieable) < 2:
        return args
    last, src = tieable[-1], avals[tieable[-1]]
    width = src.dtype.itemsize * 8
    first = hlo.slice(args[last], [0] * src.ndim, [1] * src.ndim, [1] * src.ndim)
    bits = hlo.bitcast_convert(_bits_type(src, (1,) * src.ndim), first)
    shift = hlo.constant(ir.DenseElementsAttr.get_splat(
        _bits_type(src, (1,) * src.ndim), ir.IntegerAttr.get(ir.IntegerType.get_unsigned(width), width)))
    zero = hlo.reshape(_bits_type(src, ()), hlo.shift_right_logical(bits, shift))
    out = list(args)
    for i in tieable[:-1]:
        if isinstance(args[i].owner, ir.Block):
            continue
        a = avals[i]
        z = hlo.broadcast_in_dim(_bits_type(a, a.shape), hlo.convert(_bits_type(a, ()), zero), [])
        bits = hlo.bitcast_convert(_bits_type(a, a.shape), args[i])
        out[i] = hlo.bitcast_convert(mlir.aval_to_ir_type(a), hlo.or_(bits, z))
    return out


mlir.register_lowering(name_p, lambda ctx, x, **_: x)      # the identity
mlir.register_lowering(checkpoint_p, _checkpoint)


# ---------------------------------------------------------- jet (Taylor series)
jet.definlined(checkpoint_p, "jaxpr")
float_checks.callees[checkpoint_p] = "jaxpr"
jet.deflinear(name_p)     # beyond JAX
