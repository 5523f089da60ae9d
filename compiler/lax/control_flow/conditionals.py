"""``cond`` and ``switch``: the ``cond`` primitive, one branch of several chosen by an index.

The branches are traced once, on abstract values, into sub-jaxprs with equal
signatures; the values any branch closes over become leading operands shared by
all branches. Outside any trace, binding ``cond`` runs it eagerly.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters import partial_eval as pe
from jaxprc.ir import dtypes as dt
from jaxprc.engine.traceback_filtering import api_boundary
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprTypeError, Literal, Primitive, ShapedArray, Var
from jaxprc.ir.effects import Effect, has_ordered_effects, jaxpr_effects
from jaxprc.ir.params import ClosedJaxprParam, Tuple
from jaxprc.ir.tracing import Tracer, close_over_consts, eval_jaxpr, get_aval, trace_to_jaxpr
from jaxprc.passes.canonicalize import CANONICALIZE
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.patterns import Pat, Splat, bind, pattern
from jaxprc.passes.jet import jet_jaxpr
from jaxprc.passes.jvp import Zero, instantiate_zeros, jvp_jaxpr
from jaxprc.passes.partial_eval import partial_eval_jaxpr
from jaxprc.passes.transpose import is_undefined_primal, transpose_jaxpr
from jaxprc.passes.vmap import align, aval_of, axis_size_of, batch_eval, batch_jaxpr, full, matchaxis, \
    moveaxis, scalar

from . import ref_threading as _ref
from .common import (_convert, _flatten, _front_dims, _fun_name, _leaf_aval, _new_vars, _nonzero_tangents,
                     _pick, _split_outs, _trace, _transpose_call_outputs, check_operand_types,
                     check_subjaxpr)
from .common import _flat_series, _series_chunks
from .common import (as_array, differences, forwarded_inputs, jax_type, joined_vma, keep_outputs, mismatch_extra,
                     same_type, vma_hints)
from ..remat import remat_split, remat_split_rules

__all__ = ["cond_p", "cond", "switch"]

_NO_OPERAND = object()   # the legacy ``operand=`` keyword of cond/switch was not given


# ----------------------------------------------------------------- primitive

cond_p = Primitive("cond")
cond_p.multiple_results = True
cond_p.def_params(branches=Tuple(ClosedJaxprParam()))


@cond_p.def_abstract_eval
def _cond_abstract_eval(index, *operands, branches):
    if type(branches) is not tuple or not branches:
        raise JaxprTypeError(f"cond: param branches must be a non-empty tuple of ClosedJaxprs, "
                             f"got {branches!r}")
    for i, b in enumerate(branches):
        check_subjaxpr("cond", f"branches[{i}]", b)
    if index.shape != () or index.dtype != np.int32:
        raise JaxprTypeError(f"cond: the branch index must be an i32[] scalar, "
                             f"got {index.str_short()}")
    first = branches[0]
    for i, b in enumerate(branches[1:], 1):
        check_operand_types("cond", f"branch {i} inputs (branch 0's)", first.in_avals, b.in_avals)
        check_operand_types("cond", f"branch {i} outputs (branch 0's)", first.out_avals, b.out_avals)
    check_operand_types("cond", "operands (the branches' inputs)", first.in_avals, operands)
    return joined_vma(first.out_avals, *(b.out_avals for b in branches[1:]), extra=index.vma)


# ------------------------------------------------------------------ builders

def _scalar_aval(x, must: str) -> ShapedArray:
    """The type of cond's predicate or switch's index, which must be a scalar (JAX's words)."""
    try:
        aval = get_aval(x)
    except TypeError:
        raise TypeError(f"{must}, got {x} of type {type(x)}") from None
    if aval.shape != ():
        raise TypeError(f"{must}, got {x} of shape {aval.shape}.")
    return aval


def _pred_to_index(pred):
    """cond's predicate (bool or number; nonzero is true) as the i32 index of [false, true]."""
    if pred is None:
        raise TypeError("cond predicate is None")
    aval = _scalar_aval(pred, "Pred must be a scalar")
    if aval.dtype.kind not in "biuf":
        raise TypeError(f"Pred type must be either boolean or number, got {np.dtype(aval.dtype).name}.")
    if not isinstance(pred, Tracer):
        return np.int32(np.asarray(pred) != 0)
    if aval.dtype.kind != "b":
        pred = lax.ne_p.bind(pred, np.zeros((), aval.dtype)[()])
    return _convert(pred, dt.int32)


@api_boundary
def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, both traced. JAX's older
    form ``cond(pred, true_operand, true_fun, false_operand, false_fun)`` is accepted too.

    >>> jaxprc.lax.cond(jnp.float32(2.0) > 1.0, lambda x: x + 1.0, lambda x: x - 1.0, jnp.float32(5.0))
    Array(6., dtype=float32)
    """
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]) and operand is _NO_OPERAND:
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, y: f_false(y), x_true, x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _legacy_operand("cond", operands, operand)
    index = _pred_to_index(pred)
    return _cond((false_fun, true_fun), ("false_fun", "true_fun"), index, operands, "cond")


@api_boundary
def switch(index, branches: Sequence[Callable], *operands, operand=_NO_OPERAND):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``, all branches traced."""
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _legacy_operand("switch", operands, operand)
    aval = _scalar_aval(index, "Branch index must be scalar")
    if aval.dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {np.dtype(aval.dtype).name}")
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    hi = len(branches) - 1
    if isinstance(index, Tracer):
        if aval.dtype != dt.int32 or aval.weak_type:
            index = _convert(index, dt.int32)
        index = lax.clamp_p.bind(np.int32(0), index, np.int32(hi))
    else:
        index = np.int32(np.clip(int(np.asarray(index)), 0, hi))
    return _cond(branches, tuple(f"branch {i}" for i in range(len(branches))), index, operands,
                 "switch")


def _legacy_operand(api: str, operands, operand):
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"{api}: if the 'operand' keyword is passed, no positional operands can "
                        f"be passed, got operand={operand!r} and {len(operands)} positional operands")
    return (operand,)


def _cond(branches, names, index, operands, api: str):
    """The conditional; refs its branches write are threaded through as operands and results."""
    def run(refs):
        if not refs:
            return _cond_of_operands(branches, names, index, operands, api)

        def with_refs(branch):
            def threaded(*ops):
                _ref.enter_body(refs, ops[-1])
                return branch(*ops[:-1]), _ref.body_values(refs)
            threaded.__name__ = _fun_name(branch)
            return threaded
        out, finals = _cond_of_operands([with_refs(b) for b in branches], names, index,
                                        (*operands, _ref.initial_values(refs)), api)
        _ref.settle(refs, finals)
        return out
    return _ref.thread_through_bodies(run)


def _cond_of_operands(branches, names, index, operands, api: str):
    leaves, in_tree, avals, _ = _flatten(operands, f"{api} operands")
    traced = [_trace(lambda ops, b=b: b(*ops), in_tree, avals, f"{api} {name} ({_fun_name(b)})")
              for b, name in zip(branches, names)]
    # JAX compares true_fun with false_fun, and each other branch with branch 0
    pairs = [(1, 0)] if api == "cond" else [(0, i) for i in range(1, len(branches))]
    for i, k in pairs:
        _check_branch_outputs(api, _jax_branch_name(api, names, i), branches[i], traced[i],
                              _jax_branch_name(api, names, k), branches[k], traced[k])
    tree0 = traced[0][1]
    jaxprs, consts = _merge_consts([cj for cj, _ in traced])
    fwds = zip(*[forwarded_inputs(j.jaxpr) for j in jaxprs])
    in_fwd = [f[0] if len(set(f)) == 1 else None for f in fwds]   # the same input in every branch
    jaxprs = [keep_outputs(j, [f is None for f in in_fwd]) for j in jaxprs]
    outs = iter(cond_p.bind(index, *consts, *leaves, branches=tuple(jaxprs)))
    inputs = [*consts, *leaves]
    return tu.tree_unflatten(tree0, [next(outs) if f is None else as_array(inputs[f]) for f in in_fwd])


def _jax_branch_name(api: str, names, i: int) -> str:
    return names[i] if api == "cond" or i == 0 else f"branch{i}"     # (JAX's spelling)


def _check_branch_outputs(api, name1, fun1, traced1, name2, fun2, traced2):
    (cj1, tree1), (cj2, tree2) = traced1, traced2
    where = f"{name1} is {_fun_name(fun1)}\n{name2} is {_fun_name(fun2)}\n\n"
    if tree1 != tree2:
        diffs = [f"{name1} output{f' at path {p}' if p else ''} is a {seen} but {name2} "
                 f"output{f' at path {p}' if p else ''} is a {given}, so {why}"
                 for p, seen, given, why in tu.equality_errors(tu.tree_unflatten(tree1, [0] * tree1.num_leaves),
                                                               tu.tree_unflatten(tree2, [0] * tree2.num_leaves))]
        if diffs:
            raise TypeError(f"{api} branch outputs must have the same pytree structure, but they differ:\n\n"
                            f"{where}{differences(diffs, capital=False)}\n"
                            f"Revise {name1} and/or {name2} so that they have the same pytree structure.")
    paths = [p for p, _ in tu.tree_flatten_with_path(tree1.unflatten(cj1.out_avals))[0]]
    diffs, hints = [], []
    for p, a, b in zip(paths, cj1.out_avals, cj2.out_avals):
        if same_type(a, b) and a.vma == b.vma:
            continue
        diffs.append(f"the output of {name1}{f' at path {tu.keystr(p)}' if p else ''} has type {jax_type(a)} "
                     f"but the corresponding output of {name2} has type {jax_type(b)}{mismatch_extra(a, b)}")
        if same_type(a, b) and a.vma != b.vma:      # JAX's advice names the branch varying more, no axes
            hints.append(f"applying `jax.lax.pcast(..., (), to='varying')` to the output of "
                         f"{name1 if b.vma <= a.vma else name2}")
    if diffs:
        raise TypeError(f"{api} branches must have equal output types but they differ.\n\n{where}"
                        f"{differences(diffs)}\n{vma_hints(hints) + chr(10) if hints else ''}"
                        f"Revise {name1} and/or {name2} so that all output types match.")


def _merge_consts(cjs: Sequence[ClosedJaxpr]):
    """Give every branch the union of all branches' consts as leading invars (one operand list)."""
    consts, avals, seen = [], [], set()
    for cj in cjs:
        for v, c in zip(cj.jaxpr.constvars, cj.consts):
            if id(c) not in seen:
                seen.add(id(c))
                consts.append(c)
                avals.append(v.aval)
    jaxprs = []
    for cj in cjs:
        own = {id(c): v for v, c in zip(cj.jaxpr.constvars, cj.consts)}
        constvars = [own[id(c)] if id(c) in own else Var(a) for c, a in zip(consts, avals)]
        j = cj.jaxpr
        jaxprs.append(ClosedJaxpr(Jaxpr([], constvars + j.invars, j.outvars, j.eqns), []))
    return jaxprs, consts


# ----------------------------------------------------------------------- jvp
# Branches are differentiated with jvp_jaxpr; whatever the new branches close over (consts) is
# hoisted into leading operands shared by all of them.

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
    outs = cond_p.bind(index, *consts, *ops, *_nonzero_tangents(tangents[1:], nonzeros),
                       branches=tuple(new))
    return _split_outs(outs, len(branches[0].out_avals), out_nz, branches[0].out_avals)


ad.primitive_jvps[cond_p] = _cond_jvp


# ----------------------------------------------------------------- transpose

def _cond_t(cts, index, *ops, branches):
    if is_undefined_primal(index):
        raise ValueError("transpose of cond: the branch index must not be linear")
    linear = [is_undefined_primal(a) for a in ops]
    new, consts = _hoist_shared([transpose_jaxpr(br, linear, instantiate=True)[0] for br in branches])
    nonlin = [a for a in ops if not is_undefined_primal(a)]
    outs = cond_p.bind(index, *consts, *nonlin, *map(instantiate_zeros, cts), branches=tuple(new))
    return [None] + _transpose_call_outputs(outs, ops, [True] * sum(linear))


ad.primitive_transposes[cond_p] = _cond_t


# ------------------------------------------------------------------ batching

def _cond_rule(args, dims, *, branches):
    if any(e in (Effect.io, Effect.ordered_io) for b in branches for e in jaxpr_effects(b)):
        raise NotImplementedError("IO effect not supported in vmap-of-cond.")     # JAX's refusal
    (index, *ops), (index_dim, *op_dims) = args, dims
    size = axis_size_of(args, dims)
    if index_dim is not None:
        return _cond_as_select(index, index_dim, ops, op_dims, branches, size)
    out_batched = [False] * len(branches[0].out_avals)
    while True:   # the branches must agree on which outputs are batched
        found = [batch_jaxpr(b, size, op_dims, out_batched)[1] for b in branches]
        joined = [any(bs) for bs in zip(out_batched, *found)]
        if joined == out_batched:
            break
        out_batched = joined
    new_branches = tuple(batch_jaxpr(b, size, op_dims, out_batched)[0] for b in branches)
    outs = cond_p.bind(index, *ops, branches=new_branches)
    return outs, _front_dims(out_batched)


def _cond_as_select(index, index_dim, ops, op_dims, branches, size):
    """A per-example branch choice: run every branch, then select each example's results."""
    index = moveaxis(index, index_dim, 0)
    if aval_of(index).dtype != dt.int32:
        index = lax.convert_element_type_p.bind(index, new_dtype=dt.int32, weak_type=False)
    # cond clamps an out-of-range index to the first/last branch; select_n needs it in range.
    index = lax.clamp_p.bind(scalar(0, dt.int32), index, scalar(len(branches) - 1, dt.int32))
    # An example must get no gradient through a branch it does not take: that branch's zero
    # cotangent times an infinite local derivative would be NaN. So each branch sees
    # stop_gradient(x) for the examples that skip it (JAX does the same).
    inexact = [dt.is_inexact(aval_of(x).dtype) for x in ops]
    ops = [matchaxis(x, d, 0, size) if g else x for x, d, g in zip(ops, op_dims, inexact)]
    op_dims = [0 if g else d for d, g in zip(op_dims, inexact)]
    stopped = [lax.stop_gradient_p.bind(x) if g else None for x, g in zip(ops, inexact)]
    results = []
    for i, branch in enumerate(branches):
        taken = lax.eq_p.bind(index, full(i, dt.int32, (size,)))
        guarded = [lax.select_n(*align([taken, s, x], [0, 0, 0])[0]) if g else x
                   for x, s, g in zip(ops, stopped, inexact)]
        results.append(batch_eval(branch.jaxpr, branch.consts, guarded, op_dims))
    outs = []
    for per_branch in zip(*(zip(*r) for r in results)):
        cases = [matchaxis(x, d, 0, size) for x, d in per_branch]
        outs.append(lax.select_n(*align([index, *cases], [0] * (len(cases) + 1))[0]))
    return outs, [0] * len(outs)


batching.primitive_batchers[cond_p] = _cond_rule


# ---------------------------------------------------------- partial eval, DCE

def _merge_residuals(branch_res_avals):
    """The residuals of all branches, merged as JAX merges them: the k-th residual of a type in
    one branch shares its slot with the k-th of that type in the others (a cond needs the residuals
    of one branch at a time). Returns the slots' types and, per branch, its residuals' slots."""
    slot_of: dict = {}
    all_res, slots = [], []
    for avals in branch_res_avals:
        seen: dict = {}
        mine = []
        for a in avals:
            key = (a, seen.get(a, 0))
            seen[a] = key[1] + 1
            if key not in slot_of:
                slot_of[key] = len(all_res)
                all_res.append(a)
            mine.append(slot_of[key])
        slots.append(mine)
    return all_res, slots


def _known_branch(k: ClosedJaxpr, n_out: int, all_res, slots) -> ClosedJaxpr:
    """Branch ``k`` (outputs, then its residuals) returning every branch's residual slots: its own
    residuals in its ``slots``, zeros of the other branches' types in the rest."""
    def fun(*args):
        outs = eval_jaxpr(k.jaxpr, k.consts, *args)
        res = [None] * len(all_res)
        for slot, x in zip(slots, outs[n_out:]):
            res[slot] = x
        zeros = [lax.full_like(Literal(0, ShapedArray((), a.dtype, a.weak_type)), 0, shape=a.shape)
                 for a in all_res]          # zeros of the other branches' residual types, weak too
        return outs[:n_out] + [z if x is None else x for x, z in zip(res, zeros)]
    return trace_to_jaxpr(fun, k.in_avals, name="cond_known")


def _unknown_branch(u: ClosedJaxpr, all_res, slots) -> ClosedJaxpr:
    """Branch ``u`` (its residuals, then the rest) taking every branch's residual slots first."""
    n_mine = len(slots)

    def fun(*args):
        res, rest = args[:len(all_res)], args[len(all_res):]
        return eval_jaxpr(u.jaxpr, u.consts, *[res[slot] for slot in slots], *rest)
    return trace_to_jaxpr(fun, all_res + u.in_avals[n_mine:], name="cond_unknown")


def _pe_cond(eqn, uk_in):
    if uk_in[0]:                       # the branch is not known yet: everything waits
        return [], [eqn], [True] * len(eqn.outvars)
    branches = eqn.params["branches"]
    ops_uk = uk_in[1:]
    out_uk = [False] * len(eqn.outvars)
    for br in branches:
        out_uk = [a or b for a, b in zip(out_uk, partial_eval_jaxpr(br, ops_uk, False)[2])]
    splits = [partial_eval_jaxpr(br, ops_uk, out_uk) for br in branches]
    all_res, slots = _merge_residuals([k.out_avals[len(k.out_avals) - n:] for k, _, _, n in splits])
    n_known_out = len(eqn.outvars) - sum(out_uk)

    known_branch = lambda i, k: _known_branch(k, n_known_out, all_res, slots[i])
    unknown_branch = lambda i, u: _unknown_branch(u, all_res, slots[i])
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


def _remat_split_cond(eqn, policy):
    """A cond a checkpoint recomputes, split as JAX's remat splits it: the forward cond also
    returns what the policy saves in the branch taken (zeros for the other branches' values),
    and the recomputing cond starts from those. None when no branch saves anything."""
    branches = eqn.params["branches"]
    if any(br.consts for br in branches):
        return None
    splits = [remat_split(br.jaxpr, list(br.jaxpr.outvars), policy) for br in branches]
    if not any(saved for saved, _, _ in splits):
        return None
    all_res, slots = _merge_residuals([[v.aval for v in saved] for saved, _, _ in splits])
    n_out = len(eqn.outvars)

    def forward(i, br, saved, eqns):
        return _known_branch(ClosedJaxpr(Jaxpr([], br.jaxpr.invars, br.jaxpr.outvars + saved, eqns), []),
                             n_out, all_res, slots[i])

    def recompute(i, br, saved, eqns):
        body = Jaxpr([], saved + br.jaxpr.invars, br.jaxpr.outvars, eqns)
        return _unknown_branch(ClosedJaxpr(body, []), all_res, slots[i])

    residuals = _new_vars(all_res)
    k_eqn = eqn.replace(outvars=list(eqn.outvars) + residuals,
                        params={**eqn.params, "branches": tuple(forward(i, br, saved, eqns) for i, (br, (saved, _, eqns))
                                                                in enumerate(zip(branches, splits)))})
    r_eqn = eqn.replace(invars=[eqn.invars[0]] + residuals + list(eqn.invars[1:]),
                        params={**eqn.params, "branches": tuple(recompute(i, br, saved, eqns)
                                                                for i, (br, (saved, eqns, _))
                                                                in enumerate(zip(branches, splits)))})
    return k_eqn, residuals, r_eqn


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


pe.partial_eval_jaxpr_custom_rules[cond_p] = _pe_cond
pe.dce_rules[cond_p] = _dce_cond
remat_split_rules[cond_p] = _remat_split_cond


# ------------------------------------------------------------------ lowering

def _cond_lowering(ctx, index, *operands, branches, **_):
    """stablehlo.case on the index clamped into [0, len(branches)), as lax.switch does."""
    idx_aval = ctx.avals_in[0]
    i32 = mlir.scalar_type(dt.int32)
    if idx_aval.dtype != dt.int32:
        index = hlo.convert(i32, index)
    index = hlo.clamp(mlir.full((), 0, dt.int32), index, mlir.full((), len(branches) - 1, dt.int32))
    out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    # Ordered effects in a branch: each branch takes the token from above and returns its own.
    threaded = any(has_ordered_effects(b) for b in branches)
    token = ctx.get_token() if threaded else None
    op = hlo.CaseOp([hlo.TokenType.get()] * threaded + out_types, index, len(branches))
    for region, branch in zip(op.branches, branches):
        with ir.InsertionPoint(region.blocks.append()):
            if threaded:
                ctx.set_token(token)
            outs = ctx.lower_jaxpr(branch, *operands)
            hlo.return_([ctx.get_token()] * threaded + outs)
    results = list(op.results)
    if threaded:
        ctx.set_token(results.pop(0))
    return results


mlir.register_lowering(cond_p, _cond_lowering)


# ---------------------------------------------------------- jet (Taylor series)
def _cond_jet(primals_in, series_in, *, branches):
    """Beyond JAX (whose jet has no control flow): each branch by its jet; the index is
    piecewise constant."""
    index, *ops = primals_in
    order = len(series_in[0])
    new, consts = _hoist_shared([jet_jaxpr(br, order, [True] * len(ops), instantiate=True)[0]
                                 for br in branches])
    outs = cond_p.bind(index, *consts, *ops, *_flat_series(series_in[1:]), branches=tuple(new))
    n = len(branches[0].out_avals)
    return outs[:n], _series_chunks(outs[n:], order, n)


jet.jet_rules[cond_p] = _cond_jet


# ---------------------------------------------------------------- canonicalization

@pattern(CANONICALIZE, Pat(cond_p, Splat(name="index"), "*operands", branches=bind("branches")))
def _cond_of_constant_index(index, operands, branches):
    """A branch index known when compiling: the branch inlined (cond clamps the index)."""
    branch = branches[min(max(int(index), 0), len(branches) - 1)]
    return eval_jaxpr(branch.jaxpr, branch.consts, *operands)
