"""Custom-derivative nodes: ``custom_jvp_call_jaxpr``, ``custom_vjp_call_jaxpr``, ``custom_lin``.

A custom node runs ``fun_jaxpr`` (operands: hoisted consts, then the
arguments) and carries its differentiation rules beside it, as thunks formed
lazily because a rule may call its own custom function. The typing rules
never force those thunks. ``custom_lin`` lives only in linearized (tangent)
programs: it holds the user's ``bwd`` until transposition calls it. Operand
types are compared on shape and dtype (weak types ignored), as for the calls.
The user API (``custom_jvp``, ``custom_vjp``, ...) is ``jaxprc.custom_derivatives``.
"""
from __future__ import annotations

import threading
from typing import Sequence

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters import partial_eval as pe
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, JaxprTypeError, Primitive, ShapedArray, Thunk
from jaxprc.ir.params import Aval, Bool, ClosedJaxprParam, Int, Rule, Str, Tuple
from jaxprc.ir.tracing import (ConcretizationTypeError, Tracer, UnexpectedTracerError, current_builder,
                               eval_jaxpr, get_aval, no_trace, trace_to_jaxpr)
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.jvp import Zero, instantiate_zeros, is_differentiable, tangent_aval
from jaxprc.passes.vmap import axis_size_of, batch_eval, batch_jaxpr, batched_aval, matchaxis

from .call import _jit_t, jit_p
from .reductions import reduce_sum as _reduce_sum
from .control_flow.common import _pick, check_operand_types, check_subjaxpr

__all__ = ["custom_jvp_call_jaxpr_p", "custom_vjp_call_jaxpr_p", "custom_lin_p"]


# ---------------------------------------------------------------- primitives

def _check_num(prim: str, name: str, value, bound: int) -> None:
    if type(value) is not int or not 0 <= value <= bound:
        raise JaxprTypeError(f"{prim}: param {name} must be an int in [0, {bound}] "
                             f"(the number of operands), got {value!r}")


def _check_bool(prim: str, name: str, value) -> None:
    if type(value) is not bool:
        raise JaxprTypeError(f"{prim}: param {name} must be a bool, got {value!r}")


def _check_callable(prim: str, name: str, value) -> None:
    if not callable(value):
        raise JaxprTypeError(f"{prim}: param {name} must be a thunk or callable, "
                             f"got {type(value).__name__}")


def _custom_call_abstract_eval(prim: str, rule_params: tuple[str, ...], other_params=()):
    """Typing of a custom call: ``rule_params`` are thunks/callables, never forced here."""
    def rule(*avals, fun_jaxpr, num_consts, symbolic_zeros, **params):
        check_subjaxpr(prim, "fun_jaxpr", fun_jaxpr)
        _check_num(prim, "num_consts", num_consts, len(avals))
        _check_bool(prim, "symbolic_zeros", symbolic_zeros)
        if set(params) != {*rule_params, *other_params}:
            raise JaxprTypeError(f"{prim}: expected params {sorted(rule_params + other_params)} "
                                 f"besides fun_jaxpr, num_consts, symbolic_zeros; got {sorted(params)}")
        for name in rule_params:
            _check_callable(prim, name, params[name])
        check_operand_types(prim, "operands (fun_jaxpr's inputs: consts, then arguments)",
                            fun_jaxpr.in_avals, avals)
        return list(fun_jaxpr.out_avals)
    return rule


custom_jvp_call_jaxpr_p = Primitive("custom_jvp_call_jaxpr")
custom_jvp_call_jaxpr_p.multiple_results = True
custom_jvp_call_jaxpr_p.def_abstract_eval(
    _custom_call_abstract_eval("custom_jvp_call_jaxpr", ("jvp_jaxpr_thunk",)))

custom_jvp_call_jaxpr_p.def_params(fun_jaxpr=ClosedJaxprParam(), jvp_jaxpr_thunk=Rule(), num_consts=Int(min=0),
                                   symbolic_zeros=Bool())

custom_vjp_call_jaxpr_p = Primitive("custom_vjp_call_jaxpr")
custom_vjp_call_jaxpr_p.multiple_results = True
custom_vjp_call_jaxpr_p.def_abstract_eval(
    _custom_call_abstract_eval("custom_vjp_call_jaxpr", ("fwd_jaxpr_thunk", "bwd"), ("out_trees",)))

custom_lin_p = Primitive("custom_lin")    # its impl (an error) is set by jaxprc.custom_derivatives
custom_vjp_call_jaxpr_p.def_params(fun_jaxpr=ClosedJaxprParam(), fwd_jaxpr_thunk=Rule(), bwd=Rule(),
                                   num_consts=Int(min=0), out_trees=Tuple(Str()), symbolic_zeros=Bool())

custom_lin_p.multiple_results = True
custom_lin_p.def_params(num_res=Int(min=0), bwd=Rule(), out_avals=Tuple(Aval()), symbolic_zeros=Bool())


@custom_lin_p.def_abstract_eval
def _custom_lin_abstract_eval(*avals, num_res, bwd, out_avals, symbolic_zeros):
    _check_num("custom_lin", "num_res", num_res, len(avals))
    _check_callable("custom_lin", "bwd", bwd)
    _check_bool("custom_lin", "symbolic_zeros", symbolic_zeros)
    if type(out_avals) is not tuple or not all(isinstance(a, ShapedArray) for a in out_avals):
        raise JaxprTypeError(f"custom_lin: param out_avals must be a tuple of ShapedArrays, "
                             f"got {out_avals!r}")
    return list(out_avals)


# ----------------------------------------------------------------------- jvp
# A custom node's operands are its hoisted consts (values it closes over), then its arguments.
# Its rule jaxprs take the consts the rule itself closes over first: ``n_rule_consts`` leading
# operands, counted from the rule jaxpr's arity. Consts are not differentiable: a nonzero
# tangent there means the user differentiates with respect to a closed-over value.

class CustomDerivativeClosureError(UnexpectedTracerError):
    """Differentiation of a custom_jvp/custom_vjp function with respect to a closed-over value
    (an UnexpectedTracerError, the type JAX raises: the closed-over value's tracer escapes the rule)."""


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
    zero_outputs = getattr(jvp_jaxpr_thunk, "zero_outputs", None)      # SymbolicZeros the rule returned
    zeros = (zero_outputs(nonzero) if zero_outputs is not None else None) or (False,) * n_out
    tangents_out = [next(touts) if is_differentiable(a) else None for a in out_avals]
    return outs[:n_out], [Zero(tangent_aval(a)) if t is None or z else t
                          for a, t, z in zip(out_avals, tangents_out, zeros)]


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
    if getattr(bwd, "optimize_remat", False) and _concrete(primals) is None:
        # Staged (jit, remat), JAX's optimize_remat takes the primal value from the function and
        # only the residuals from fwd; eagerly its fwd gives both.
        outs = eval_jaxpr(fun_jaxpr.jaxpr, fun_jaxpr.consts, *primals) + outs[n_out:]
    res = outs[n_out:]
    diff_out = [is_differentiable(a) for a in out_avals]
    ts = [instantiate_zeros(t) for t, d in zip(arg_tangents, diff_in) if d]
    lin_avals = tuple(a for a, d in zip(out_avals, diff_out) if d)
    touts = iter(custom_lin_p.bind(*res, *ts, num_res=len(res), bwd=bwd, out_avals=lin_avals,
                                   symbolic_zeros=symbolic_zeros) if lin_avals else [])
    return outs[:n_out], [next(touts) if d else Zero(tangent_aval(a)) for d, a in zip(diff_out, out_avals)]


ad.primitive_jvps[custom_jvp_call_jaxpr_p] = _custom_jvp_call_jvp
ad.primitive_jvps[custom_vjp_call_jaxpr_p] = _custom_vjp_call_jvp


# ----------------------------------------------------------------- transpose

def _custom_jvp_call_t(cts, *args, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    # In a linear program (a jvp rule applied its own function to tangents) the node is linear
    # through its function; the rule has done its work, as in JAX's partial evaluation.
    return _jit_t(cts, *args, jaxpr=fun_jaxpr, name=jvp_jaxpr_thunk.name)


def _concrete(xs):
    """The concrete values of ``xs`` when the current trace knows them all (else None), as the
    Arrays they stand for (weak types kept: bwd sees what JAX's sees, and its results keep them)."""
    from jaxprc.engine import dispatch
    from jaxprc import runtime
    builder = current_builder()
    out = []
    for x in xs:
        if isinstance(x, Tracer):
            if builder is None or x._builder is not builder:
                return None
            try:
                value = builder.concretize(x, "custom_vjp bwd", ConcretizationTypeError)
            except ConcretizationTypeError:
                return None
            aval = dispatch.runtime_aval(x.aval)
            x = value if isinstance(value, runtime.Array) else \
                runtime.Array(runtime.to_buffer(value, aval), aval)
        out.append(x)
    return out


def _custom_lin_t(cts, *args, num_res, bwd, out_avals, symbolic_zeros):
    """Calls the custom_vjp's ``bwd``. A Python rule (``bwd.call``) runs on concrete values when
    this trace knows them (outside jit: the user's Python sees numbers) and on traced values
    otherwise; a parsed program's bwd is just its jaxpr (the thunk's value)."""
    res = list(args[:num_res])
    call = getattr(bwd, "call", None)
    if call is None:
        j = bwd()
        return [None] * num_res + eval_jaxpr(j.jaxpr, j.consts, *res, *map(instantiate_zeros, cts))
    nonzero_cts = [ct for ct in cts if not isinstance(ct, Zero)]
    concrete = _concrete(res + nonzero_cts) if getattr(bwd, "runs_on_values", False) else None
    if concrete is None:
        return [None] * num_res + list(call(*res, *cts))
    values = iter(concrete)
    res = [next(values) for _ in res]
    cts = [ct if isinstance(ct, Zero) else next(values) for ct in cts]
    with no_trace():
        return [None] * num_res + list(call(*res, *cts))


ad.primitive_transposes[custom_jvp_call_jaxpr_p] = _custom_jvp_call_t
ad.primitive_transposes[custom_lin_p] = _custom_lin_t


# ------------------------------------------------------------------ batching
# vmap(custom_jvp_call(f, f_jvp)) == custom_jvp_call(vmap(f), vmap(f_jvp)), likewise fwd and bwd:
# the rules stay attached, so differentiating the batched program still uses them. Rule jaxprs
# are batched lazily (thunks), memoized per (rule, batch dims) so that a rule calling its own
# function batches into a rule referring to itself.

_BATCHED_RULES: dict = {}     # (id(rule), size, dims, ...) -> (rule, its batched thunk)
_MAX_BATCHED_RULES = 4096


def _batch_all_at_front(cj: ClosedJaxpr, size: int, in_dims: Sequence) -> ClosedJaxpr:
    """Batch a rule jaxpr (consts allowed); every output comes out batched at axis 0."""
    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_dims)
        return [matchaxis(x, d, 0, size) for x, d in zip(outs, dims)]
    return trace_to_jaxpr(fun, [batched_aval(a, d, size) for a, d in zip(cj.in_avals, in_dims)],
                          name="vmap")


def _rule_dims(dims, num_consts: int, arg_avals, with_tangents: bool):
    """``dims_of(rule)``: batch dims of a rule jaxpr's inputs: its own consts, the arguments,
    (their tangents)."""
    arg_dims = list(dims[num_consts:])
    tangent_dims = [d for d, a in zip(arg_dims, arg_avals) if dt.is_inexact(a.dtype)] if with_tangents else []

    def dims_of(rule: ClosedJaxpr):
        n_rule_consts = len(rule.in_avals) - len(arg_dims) - len(tangent_dims)
        return list(dims[:n_rule_consts]) + arg_dims + tangent_dims
    return dims_of


_MEMO_LOCK = threading.RLock()


def _bounded_memo(table: dict, key, limit: int, make):
    """``table[key]``, made by ``make()`` on a miss; the oldest entry goes when the table is full.
    Entries keep their rule alive, so its id in the key stays unique. Under a lock: two threads
    evicting at once would race on the same oldest key."""
    with _MEMO_LOCK:
        hit = table.get(key)
        if hit is None:
            if len(table) >= limit:
                del table[next(iter(table))]
            hit = table[key] = make()
        return hit


class BatchedRule(Thunk):
    """A rule jaxpr batched like its node's operands ``dims``, formed when first needed. A
    symbolic-zeros JVP rule keeps ``for_nonzeros`` through the batching: the unbatched rule traced
    for one tangent pattern (so the user's rule sees SymbolicZero objects under vmap, as in
    JAX), batched the same way, the zero tangents' inputs left out."""

    def __init__(self, rule: Thunk, size: int, dims, num_consts: int, arg_avals, with_tangents: bool):
        dims_of = _rule_dims(dims, num_consts, arg_avals, with_tangents)
        super().__init__(lambda: _batch_all_at_front(rule(), size, dims_of(rule())), name=rule.name)
        self.rule, self.size, self.arg_dims = rule, size, list(dims[num_consts:])
        self._variants: dict = {}

    def zero_outputs(self, nonzeros):
        inner = getattr(self.rule, "zero_outputs", None)
        return inner(nonzeros) if inner is not None else None

    def for_nonzeros(self, nonzeros):
        inner = getattr(self.rule, "for_nonzeros", None)
        if nonzeros not in self._variants:
            j = inner(nonzeros) if inner is not None else None
            if j is not None:      # a retraced rule has no const inputs: arguments, then nonzero tangents
                tangent_dims = [d for d, nz in zip(self.arg_dims, nonzeros) if nz]
                j = _batch_all_at_front(j, self.size, self.arg_dims + tangent_dims)
            self._variants[nonzeros] = j
        return self._variants[nonzeros]


def _memo_batched(rule: Thunk, size: int, dims, num_consts, arg_avals, with_tangents) -> Thunk:
    """A thunk of ``rule`` batched like the node's operands ``dims``, memoized."""
    def make():
        return rule, BatchedRule(rule, size, dims, num_consts, arg_avals, with_tangents)
    key = (id(rule), size, tuple(dims), num_consts, with_tangents)
    return _bounded_memo(_BATCHED_RULES, key, _MAX_BATCHED_RULES, make)[1]


def _custom_jvp_call_rule(args, dims, *, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    size = axis_size_of(args, dims)
    n_out = len(fun_jaxpr.out_avals)
    fun, _ = batch_jaxpr(fun_jaxpr, size, dims, [True] * n_out)
    rule = _memo_batched(jvp_jaxpr_thunk, size, dims, num_consts, fun_jaxpr.in_avals[num_consts:], True)
    outs = custom_jvp_call_jaxpr_p.bind(*args, fun_jaxpr=fun, jvp_jaxpr_thunk=rule,
                                        num_consts=num_consts, symbolic_zeros=symbolic_zeros)
    return outs, [0] * n_out


class BatchedBwd(Thunk):
    """A custom_vjp ``bwd`` mapped over a batch: ``call`` takes residuals and cotangents batched
    at axis 0 and batches the unbatched bwd's jaxpr inline; as a thunk, its batched jaxpr.
    ``in_batched`` says which differentiable inputs of the call were batched: the cotangent of
    an unbatched one is summed over the batch, as JAX's batched bwd does (the input was
    broadcast to every example, so its cotangent is the sum of theirs)."""

    def __init__(self, bwd: Thunk, size: int, in_batched: Sequence[bool] | None = None, arg_dims=None):
        super().__init__(self._trace, bwd.name)
        self.bwd, self.size, self.in_batched = bwd, size, in_batched
        self.arg_dims = arg_dims     # the call's arguments' batch dims (symbolic zeros' variants)

    optimize_remat = property(lambda self: getattr(self.bwd, "optimize_remat", False))

    def for_perturbed(self, perturbed):
        """The unbatched bwd's variant for one perturbation pattern (fwd sees
        ``CustomVJPPrimal.perturbed`` under vmap as in JAX), batched as this call is."""
        inner = getattr(self.bwd, "for_perturbed", None)
        variant = inner(perturbed) if inner is not None and self.arg_dims is not None else None
        if variant is None:
            return None
        fwd, bwd = variant      # a traced-again fwd has no const inputs: the arguments only
        return (_batch_all_at_front(fwd, self.size, self.arg_dims),
                BatchedBwd(bwd, self.size, self.in_batched, self.arg_dims))

    def call(self, *args):
        if any(isinstance(a, Zero) for a in args) and getattr(self.bwd, "call", None) is not None:
            j, args = self._keeping_zeros(args)
        else:
            j, args = self.bwd(), [instantiate_zeros(a) for a in args]
        outs, dims = batch_eval(j.jaxpr, j.consts, args, [0] * len(args))
        in_batched = self.in_batched or [True] * len(outs)
        return [matchaxis(x, d, 0, self.size) if b else x if d is None else _reduce_sum(x, (d,))
                for x, d, b in zip(outs, dims, in_batched)]

    def _keeping_zeros(self, args):
        """The unbatched bwd traced for one example with the zero cotangents left symbolic (a
        symbolic-zeros bwd sees SymbolicZero under vmap, as in JAX), and the other arguments."""
        zeros = [isinstance(a, Zero) for a in args]
        example = [ShapedArray(a.shape[1:], a.dtype) for a in map(_aval_or_zero, args)]   # batched at 0

        def per_example(*nonzero):
            given = iter(nonzero)
            full = [Zero(e) if z else next(given) for e, z in zip(example, zeros)]
            return [instantiate_zeros(c) for c in self.bwd.call(*full)]
        j = trace_to_jaxpr(per_example, [e for e, z in zip(example, zeros) if not z], name=self.name)
        return j, [a for a in args if not isinstance(a, Zero)]

    def _trace(self) -> ClosedJaxpr:
        avals = [batched_aval(a, 0, self.size) for a in self.bwd().in_avals]
        return trace_to_jaxpr(self.call, avals, name="vmap")


def _aval_or_zero(x) -> ShapedArray:
    return x.aval if isinstance(x, Zero) else get_aval(x)


def _custom_vjp_call_rule(args, dims, *, fun_jaxpr, fwd_jaxpr_thunk, bwd, num_consts, out_trees,
                          symbolic_zeros):
    size = axis_size_of(args, dims)
    n_out = len(fun_jaxpr.out_avals)
    fun, _ = batch_jaxpr(fun_jaxpr, size, dims, [True] * n_out)
    fwd = _memo_batched(fwd_jaxpr_thunk, size, dims, num_consts, fun_jaxpr.in_avals[num_consts:], False)
    in_batched = [d is not None for d, a in zip(dims[num_consts:], fun_jaxpr.in_avals[num_consts:])
                  if is_differentiable(a)]
    outs = custom_vjp_call_jaxpr_p.bind(*args, fun_jaxpr=fun, fwd_jaxpr_thunk=fwd,
                                        bwd=BatchedBwd(bwd, size, in_batched, list(dims[num_consts:])),
                                        num_consts=num_consts,
                                        out_trees=out_trees, symbolic_zeros=symbolic_zeros)
    return outs, [0] * n_out


def _custom_lin_rule(args, dims, *, num_res, bwd, out_avals, symbolic_zeros):
    """A linearized custom_vjp call on a batch: residuals and tangents at axis 0, bwd mapped."""
    size = axis_size_of(args, dims)
    args = [matchaxis(x, d, 0, size) for x, d in zip(args, dims)]
    outs = custom_lin_p.bind(*args, num_res=num_res, bwd=BatchedBwd(bwd, size),
                             out_avals=tuple(batched_aval(a, 0, size) for a in out_avals),
                             symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(out_avals)


batching.primitive_batchers[custom_jvp_call_jaxpr_p] = _custom_jvp_call_rule
batching.primitive_batchers[custom_vjp_call_jaxpr_p] = _custom_vjp_call_rule
batching.primitive_batchers[custom_lin_p] = _custom_lin_rule


# ----------------------------------------------------------------------- DCE
# Pruned rules are memoized per (rule, used outputs): a rule that calls its own custom function
# holds a node with the same rule and the same unused outputs, which then prunes to the same
# thunk, so the pruned rule refers to itself instead of unfolding without end.

_PRUNED_RULES: dict = {}      # (id(rule), used) -> (rule, pruned rule)
_MAX_PRUNED_RULES = 4096


def _memo_pruned(rule, used_outputs, make) -> Thunk:
    key = (id(rule), tuple(used_outputs))
    return _bounded_memo(_PRUNED_RULES, key, _MAX_PRUNED_RULES, lambda: (rule, make()))[1]


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
        self.optimize_remat = getattr(bwd, "optimize_remat", False)

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
        [a for a, d in zip(out_avals, diff) if d]))
    return [True] * len(eqn.invars), eqn.replace(
        outvars=_pick(eqn.outvars, used_outputs),
        params={**p, "fun_jaxpr": fun, "fwd_jaxpr_thunk": _pruned_thunk(p["fwd_jaxpr_thunk"], used_outputs),
                "bwd": bwd})


pe.dce_rules[custom_jvp_call_jaxpr_p] = _dce_custom_jvp
pe.dce_rules[custom_vjp_call_jaxpr_p] = _dce_custom_vjp


# ------------------------------------------------------------------ lowering

def _custom_call(ctx, *args, fun_jaxpr, **_):
    """Lowering ignores the custom rules and runs the primal function."""
    return ctx.lower_jaxpr(fun_jaxpr, *args)


def _custom_lin(*args, **params):
    """custom_lin only lives in linear programs that reverse mode transposes away (calling the
    custom_vjp's bwd); reaching evaluation or lowering means forward mode was applied."""
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


custom_lin_p.def_impl(_custom_lin)


mlir.register_lowering(custom_jvp_call_jaxpr_p, _custom_call)
mlir.register_lowering(custom_vjp_call_jaxpr_p, _custom_call)
mlir.register_lowering(custom_lin_p, _custom_lin)


# ------------------------------------------------------------ evaluation

def as_primal_call(eqn, primal_only):
    """A custom call as a plain call (``jit``) of its primal function, whose jaxpr
    ``primal_only`` rewrites; None for other equations. At top level nothing differentiates
    the program any more, so evaluation drops the rules (see ``evaluate._primal_only``)."""
    if eqn.primitive not in (custom_jvp_call_jaxpr_p, custom_vjp_call_jaxpr_p):
        return None
    return eqn.replace(primitive=jit_p, params={"jaxpr": primal_only(eqn.params["fun_jaxpr"]),
                                                 "name": "primal"})


# ---------------------------------------------------------- jet (Taylor series)
jet.definlined(custom_jvp_call_jaxpr_p, "fun_jaxpr")
jet.definlined(custom_vjp_call_jaxpr_p, "fun_jaxpr")
