"""Forward-mode differentiation as a pass: f: a -> b  ==>  (a, Ta) -> (b, Tb).

The pass re-traces the program: a new builder gets the primal inputs and the
nonzero tangent inputs, and each equation is replaced by its rule
``jvp_rules[prim](primals, tangents, **params) -> (primal_out, tangent_out)``
(lists for multiple results). Tangents may be ``Zero(aval)``: a symbolic zero
that costs nothing and is only materialised when an output must hold it.
Integer and boolean values have float0 tangents, which are always Zero.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir import lax
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import close_over_consts, eval_jaxpr, get_aval, source_info_of, trace_to_jaxpr

from . import emit
from .registry import register_pass


# ---------------------------------------------------------------- tangents

class Zero:
    """A symbolic zero tangent (or cotangent) of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> "Zero":
        return Zero(tangent_aval(aval_of(x)))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def aval_of(x) -> ShapedArray:
    """The type of a value, tracer, Literal, Zero or UndefinedPrimal."""
    aval = getattr(x, "aval", None)
    return aval if isinstance(aval, ShapedArray) else get_aval(x)


def is_differentiable(aval: ShapedArray) -> bool:
    return dt.is_inexact(aval.dtype)


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent type: the same for floats, float0 for integers and booleans (as in JAX)."""
    return aval if is_differentiable(aval) else ShapedArray(aval.shape, dt.float0)


def zeros(aval: ShapedArray):
    if aval.dtype == dt.float0:
        raise TypeError(f"cannot materialise a float0 zero of type {aval.str_short()} in a program")
    return emit.zeros(aval)


def instantiate_zeros(t):
    return zeros(t.aval) if isinstance(t, Zero) else t


def add_tangents(a, b):
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return emit.add(a, b)


def literal_value(lit: Literal):
    """A literal as a rule argument: a Python scalar when weakly typed, else a numpy scalar."""
    return lit.val.item() if lit.aval.weak_type else lit.val


# --------------------------------------------------------------- the pass

JvpRule = Callable[..., Any]
jvp_rules: dict = {}


def jvp_eval(jaxpr: Jaxpr, consts: Sequence[Any], primals: Sequence[Any], tangents: Sequence[Any]):
    """Run ``jaxpr`` on primals and tangents in the current trace: (primal outs, tangent outs)."""
    primal_env: dict[Var, Any] = {}
    tangent_env: dict[Var, Any] = {}

    def read_primal(a):
        return literal_value(a) if isinstance(a, Literal) else primal_env[a]

    def read_tangent(a):
        return Zero(tangent_aval(a.aval)) if isinstance(a, Literal) else tangent_env[a]

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v], tangent_env[v] = c, Zero(tangent_aval(v.aval))
    for v, p, t in zip(jaxpr.invars, primals, tangents):
        primal_env[v], tangent_env[v] = p, t
    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        tangents_in = [read_tangent(a) for a in eqn.invars]
        with source_info_of(eqn.source_info):    # what the rule emits keeps the user's line
            if all(isinstance(t, Zero) for t in tangents_in):
                outs = prim.bind(*[a if isinstance(a, Literal) else primal_env[a] for a in eqn.invars],
                                 **eqn.params)
                outs = outs if prim.multiple_results else [outs]
                touts = [Zero(tangent_aval(v.aval)) for v in eqn.outvars]
            else:
                rule = jvp_rules.get(prim)
                if rule is None:
                    raise NotImplementedError(
                        f"Differentiation rule for '{prim.name}' not implemented (jvp pass): no entry in "
                        "jvp_rules, so forward- and reverse-mode derivatives through it are unavailable.")
                outs, touts = rule([read_primal(a) for a in eqn.invars], tangents_in, **eqn.params)
                if not prim.multiple_results:
                    outs, touts = [outs], [touts]
        for v, p, t in zip(eqn.outvars, outs, touts):
            primal_env[v], tangent_env[v] = p, t
    return ([read_primal(a) if isinstance(a, Literal) else primal_env[a] for a in jaxpr.outvars],
            [read_tangent(a) for a in jaxpr.outvars])


def jvp_jaxpr(cj: ClosedJaxpr, nonzeros: Sequence[bool], instantiate: Sequence[bool] | bool,
              primal_values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The jvp of ``cj``: inputs are the primals then the tangents of inputs marked ``nonzeros``;
    outputs are the primal outputs then the tangents of outputs that are nonzero (or instantiated).

    Returns that jaxpr and the nonzero mask of output tangents. Integer outputs never get a
    tangent output (float0 zeros are made by the caller). ``primal_values``, when given, are
    concrete primal inputs, so Python code traced during the pass may inspect values.
    """
    n_out = len(cj.jaxpr.outvars)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    in_avals = cj.in_avals
    nonzeros = [bool(nz) and is_differentiable(a) for nz, a in zip(nonzeros, in_avals)]
    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    out_nonzeros: list[bool] = []

    def fun(*args):
        primals, rest = list(args[:len(in_avals)]), iter(args[len(in_avals):])
        tangents = [next(rest) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs, touts = jvp_eval(cj.jaxpr, cj.consts, primals, tangents)
        touts = [instantiate_zeros(t) if inst and is_differentiable(aval_of(t)) else t
                 for t, inst in zip(touts, instantiate)]
        out_nonzeros[:] = [not isinstance(t, Zero) for t in touts]
        return outs + [t for t in touts if not isinstance(t, Zero)]

    concrete = None
    if primal_values is not None:
        concrete = list(primal_values) + [None] * len(tangent_avals)
    out = trace_to_jaxpr(fun, list(in_avals) + tangent_avals, name="jvp", concrete_args=concrete)
    return out, out_nonzeros


def jvp(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: (primals, tangents of every float input) -> (outputs, all tangents)."""
    out, _ = jvp_jaxpr(cj, [True] * len(cj.in_avals), instantiate=True)
    return out


register_pass("jvp", jvp)


# ------------------------------------------------------- rule definitions

def _rule(*names: str):
    """Register a rule under the named primitives (those that exist)."""
    def register(fn):
        for name in names:
            if name in PRIMITIVES:
                jvp_rules[PRIMITIVES[name]] = fn if len(names) == 1 else _bound(fn, PRIMITIVES[name])
        return fn
    return register


def _bound(fn, prim):
    return lambda primals, tangents, **params: fn(prim, primals, tangents, **params)


def _zero_tangent_jvp(prim, primals, tangents, **params):
    outs = prim.bind(*primals, **params)
    avals = [aval_of(o) for o in (outs if prim.multiple_results else [outs])]
    touts = [Zero(tangent_aval(a)) for a in avals]
    return outs, (touts if prim.multiple_results else touts[0])




def _linear_jvp(prim, primals, tangents, **params):
    """Linear in its first operand, the others (indices) held fixed: the tangent is the op itself."""
    out = prim.bind(*primals, **params)
    return out, prim.bind(instantiate_zeros(tangents[0]), *primals[1:], **params)




def _bilinear(prim, primals, tangents, **params):
    """Products: d(x*y) = dx*y + x*dy, each term the op itself with one tangent operand."""
    (x, y), (tx, ty) = primals, tangents
    out = prim.bind(x, y, **params)
    left = Zero(tangent_aval(aval_of(out))) if isinstance(tx, Zero) else prim.bind(tx, y, **params)
    right = Zero(tangent_aval(aval_of(out))) if isinstance(ty, Zero) else prim.bind(x, ty, **params)
    return out, add_tangents(left, right)




# ------------------------------------------------------------ control flow
# Sub-jaxprs are differentiated with jvp_jaxpr; whatever the new body closes
# over (consts) is hoisted into leading operands, as control flow requires.

def _nonzero_tangents(tangents, nonzeros):
    return [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]


def _split_outs(outs, n, out_nz, out_avals):
    primals, rest = list(outs[:n]), iter(outs[n:])
    return primals, [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(out_nz, out_avals)]


def _jit_jvp(primals, tangents, *, jaxpr, **params):
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    outs = PRIMITIVES["jit"].bind(*consts, *primals, *_nonzero_tangents(tangents, nonzeros),
                                  jaxpr=body, **params)
    return _split_outs(outs, len(jaxpr.out_avals), out_nz, jaxpr.out_avals)


def _hoist_shared(jaxprs):
    """Close several jaxprs over the union of their consts: each takes all of them first."""
    closed = [close_over_consts(j) for j in jaxprs]
    all_consts = [c for _, cs in closed for c in cs]
    out = []
    for i, (j, cs) in enumerate(closed):
        before = sum(len(c) for _, c in closed[:i])
        avals = [get_aval(c) for c in all_consts]
        jj = j.jaxpr
        pad_before = [Var(a) for a in avals[:before]]
        pad_after = [Var(a) for a in avals[before + len(cs):]]
        out.append(ClosedJaxpr(Jaxpr([], pad_before + jj.invars[:len(cs)] + pad_after + jj.invars[len(cs):],
                                     jj.outvars, jj.eqns), []))
    return out, all_consts


def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    nonzeros = [not isinstance(t, Zero) for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for br in branches:
        out_nz = [a or b for a, b in zip(out_nz, jvp_jaxpr(br, nonzeros, instantiate=False)[1])]
    new = [jvp_jaxpr(br, nonzeros, instantiate=out_nz)[0] for br in branches]
    new, consts = _hoist_shared(new)
    outs = PRIMITIVES["cond"].bind(index, *consts, *ops, *_nonzero_tangents(tangents[1:], nonzeros),
                                   branches=tuple(new))
    return _split_outs(outs, len(branches[0].out_avals), out_nz, branches[0].out_avals)


def _reorder(cj: ClosedJaxpr, in_perm, out_perm) -> ClosedJaxpr:
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in in_perm],
                             [j.outvars[i] for i in out_perm], j.eqns), cj.consts)


def _groups(sizes):
    """Index ranges of consecutive groups of the given sizes."""
    out, start = [], 0
    for s in sizes:
        out.append(list(range(start, start + s)))
        start += s
    return out


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    nc, nk = num_consts, num_carry
    n_ys = len(jaxpr.out_avals) - nk
    nz = [not isinstance(t, Zero) for t in tangents]
    consts_nz, carry_nz, xs_nz = nz[:nc], nz[nc:nc + nk], nz[nc + nk:]
    while True:    # a carry tangent is nonzero if its next value is
        _, out_nz = jvp_jaxpr(jaxpr, consts_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * n_ys)
        new = [a or b for a, b in zip(carry_nz, out_nz[:nk])]
        if new == carry_nz:
            break
        carry_nz = new
    body, out_nz = jvp_jaxpr(jaxpr, consts_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * n_ys)
    body, hoisted = close_over_consts(body)
    nh, nx = len(hoisted), len(primals) - nc - nk
    # body inputs: hoisted, consts, carry, xs, t_consts, t_carry, t_xs -> scan's consts, carry, xs
    h, c, k, x, tc, tk, tx = _groups([nh, nc, nk, nx, sum(consts_nz), sum(carry_nz), sum(xs_nz)])
    ys_nz = out_nz[nk:]
    # body outputs: carry, ys, t_carry, t_ys -> carry, t_carry, ys, t_ys
    oc, oy, otc, oty = _groups([nk, n_ys, sum(carry_nz), sum(ys_nz)])
    body = _reorder(body, h + c + tc + k + tk + x + tx, oc + otc + oy + oty)
    t_consts = _nonzero_tangents(tangents[:nc], consts_nz)
    t_carry = _nonzero_tangents(tangents[nc:nc + nk], carry_nz)
    t_xs = _nonzero_tangents(tangents[nc + nk:], xs_nz)
    operands = [*hoisted, *primals[:nc], *t_consts, *primals[nc:nc + nk], *t_carry, *primals[nc + nk:], *t_xs]
    new_linear = ((False,) * nh + tuple(linear[:nc]) + (True,) * len(t_consts) + tuple(linear[nc:nc + nk])
                  + (True,) * len(t_carry) + tuple(linear[nc + nk:]) + (True,) * len(t_xs))
    outs = PRIMITIVES["scan"].bind(*operands, jaxpr=body, length=length, reverse=reverse, unroll=unroll,
                                   num_consts=nh + nc + len(t_consts), num_carry=nk + len(t_carry),
                                   linear=new_linear)
    n_tk = len(t_carry)
    carry, t_carry_out = outs[:nk], outs[nk:nk + n_tk]
    ys, t_ys = outs[nk + n_tk:nk + n_tk + n_ys], outs[nk + n_tk + n_ys:]
    out_avals = PRIMITIVES["scan"].abstract_eval(*[aval_of(p) for p in primals], jaxpr=jaxpr, length=length,
                                                 reverse=reverse, unroll=unroll, num_consts=nc,
                                                 num_carry=nk, linear=linear)
    _, touts = _split_outs(list(carry) + list(ys) + list(t_carry_out) + list(t_ys), nk + n_ys,
                           carry_nz + ys_nz, out_avals)
    return list(carry) + list(ys), touts


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cn, bn = cond_nconsts, body_nconsts
    nz = [not isinstance(t, Zero) for t in tangents]
    bconsts_nz, carry_nz = nz[cn:cn + bn], nz[cn + bn:]
    while True:
        _, out_nz = jvp_jaxpr(body_jaxpr, bconsts_nz + carry_nz, instantiate=carry_nz)
        new = [a or b for a, b in zip(carry_nz, out_nz)]
        if new == carry_nz:
            break
        carry_nz = new
    body, _ = jvp_jaxpr(body_jaxpr, bconsts_nz + carry_nz, instantiate=carry_nz)
    body, hoisted = close_over_consts(body)
    nk = len(carry_nz)
    # body inputs: hoisted, bconsts, carry, t_bconsts, t_carry -> consts, carry
    h, b, k, tb, tk = _groups([len(hoisted), bn, nk, sum(bconsts_nz), sum(carry_nz)])
    body = _reorder(body, h + b + tb + k + tk, list(range(nk + sum(carry_nz))))
    # the condition ignores the tangent carries
    cj = cond_jaxpr.jaxpr
    extra = [Var(tangent_aval(cj.invars[cn + i].aval)) for i, z in enumerate(carry_nz) if z]
    cond = ClosedJaxpr(Jaxpr(cj.constvars, cj.invars + extra, cj.outvars, cj.eqns), cond_jaxpr.consts)
    t_bconsts = _nonzero_tangents(tangents[cn:cn + bn], bconsts_nz)
    t_carry = _nonzero_tangents(tangents[cn + bn:], carry_nz)
    outs = PRIMITIVES["while"].bind(*primals[:cn], *hoisted, *primals[cn:cn + bn], *t_bconsts,
                                    *primals[cn + bn:], *t_carry, cond_jaxpr=cond, body_jaxpr=body,
                                    cond_nconsts=cn, body_nconsts=len(hoisted) + bn + len(t_bconsts))
    avals = body_jaxpr.out_avals
    return _split_outs(outs, nk, carry_nz, avals)


for _name, _r in [("jit", _jit_jvp), ("cond", _cond_jvp), ("scan", _scan_jvp), ("while", _while_jvp)]:
    if _name in PRIMITIVES:
        jvp_rules[PRIMITIVES[_name]] = _r




# ------------------------------------------------------- custom derivatives
# A custom node's operands are its hoisted consts (values it closes over), then its arguments.
# Its rule jaxprs take the consts the rule itself closes over first: ``n_rule_consts`` leading
# operands, counted from the rule jaxpr's arity. Consts are not differentiable: a nonzero
# tangent there means the user differentiates with respect to a closed-over value.

class CustomDerivativeClosureError(TypeError):
    """Differentiation of a custom_jvp/custom_vjp function with respect to a closed-over value."""


def closed_over_error(kind: str) -> CustomDerivativeClosureError:
    rules = "custom JVP rule" if kind == "custom_jvp" else "custom VJP rule"
    adapt = "the custom_jvp rule" if kind == "custom_jvp" else "the custom_vjp fwd and bwd rules"
    return CustomDerivativeClosureError(
        f"Detected differentiation of a {kind} function with respect to a closed-over value. "
        f"That isn't supported because the {rules} only specifies how to differentiate the "
        f"{kind} function with respect to explicit input parameters.\n\n"
        f"Try passing the closed-over value into the {kind} function as an argument, and "
        f"adapting {adapt}.")


def rule_const_count(rule: ClosedJaxpr, n_inputs: int) -> int:
    """How many leading inputs of a rule jaxpr are consts (the rest are ``n_inputs`` values)."""
    return len(rule.in_avals) - n_inputs


def _custom_jvp_call_jvp(primals, tangents, *, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    if any(not isinstance(t, Zero) for t in tangents[:num_consts]):
        raise closed_over_error("custom_jvp")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    diff = [is_differentiable(a) for a in fun_jaxpr.in_avals[num_consts:]]
    nonzero = [d and not isinstance(t, Zero) for d, t in zip(diff, arg_tangents)]
    rule = None
    if symbolic_zeros and not all(n == d for n, d in zip(nonzero, diff)):
        for_zeros = getattr(jvp_jaxpr_thunk, "for_nonzeros", None)
        rule = for_zeros(tuple(nonzero)) if for_zeros is not None else None
    if rule is None:    # the thunk's rule takes a tangent for every differentiable argument
        rule, nonzero = jvp_jaxpr_thunk(), diff
    ts = [instantiate_zeros(t) for t, nz in zip(arg_tangents, nonzero) if nz]
    n_rule_consts = rule_const_count(rule, len(args) + len(ts))
    outs = eval_jaxpr(rule.jaxpr, rule.consts, *primals[:n_rule_consts], *args, *ts)
    out_avals = fun_jaxpr.out_avals
    n_out = len(out_avals)
    touts = iter(outs[n_out:])
    return outs[:n_out], [next(touts) if is_differentiable(a) else Zero(tangent_aval(a)) for a in out_avals]


def _custom_vjp_call_jvp(primals, tangents, *, fun_jaxpr, fwd_jaxpr_thunk, bwd, num_consts, out_trees,
                         symbolic_zeros):
    """Linearization of a custom_vjp call: run ``fwd``, then ``custom_lin`` on the tangents (it
    carries ``bwd``; transposition calls it, forward mode cannot evaluate it)."""
    if any(not isinstance(t, Zero) for t in tangents[:num_consts]):
        raise closed_over_error("custom_vjp")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    diff_in = [is_differentiable(a) for a in fun_jaxpr.in_avals[num_consts:]]
    perturbed = [d and not isinstance(t, Zero) for d, t in zip(diff_in, arg_tangents)]
    variant = None
    if symbolic_zeros and perturbed != diff_in and hasattr(bwd, "for_perturbed"):
        variant = bwd.for_perturbed(perturbed)
    fwd, bwd = variant if variant is not None else (fwd_jaxpr_thunk(), bwd)
    n_fwd_consts = rule_const_count(fwd, len(args))
    outs = eval_jaxpr(fwd.jaxpr, fwd.consts, *primals[:n_fwd_consts], *args)
    out_avals = fun_jaxpr.out_avals
    n_out = len(out_avals)
    res = outs[n_out:]
    diff_out = [is_differentiable(a) for a in out_avals]
    ts = [instantiate_zeros(t) for t, d in zip(arg_tangents, diff_in) if d]
    lin_avals = tuple(a.strip_weak_type() for a, d in zip(out_avals, diff_out) if d)
    touts = iter(PRIMITIVES["custom_lin"].bind(*res, *ts, num_res=len(res), bwd=bwd, out_avals=lin_avals,
                                               symbolic_zeros=symbolic_zeros) if lin_avals else [])
    return outs[:n_out], [next(touts) if d else Zero(tangent_aval(a)) for d, a in zip(diff_out, out_avals)]


for _name, _r in [("custom_jvp_call_jaxpr", _custom_jvp_call_jvp),
                  ("custom_vjp_call_jaxpr", _custom_vjp_call_jvp)]:
    if _name in PRIMITIVES:
        jvp_rules[PRIMITIVES[_name]] = _r
