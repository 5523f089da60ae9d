"""The custom batching node: ``custom_vmap_call[call, rule]`` (JAX's ``custom_vmap_call``).

The node runs ``call`` (a ClosedJaxpr without consts: the values the function
closes over are its leading operands). Its batching rule is the user's Python
function, held as a ``VmapRule`` param: it prints by name, like a host
callback (``VmapRule(name="f_rule", num_consts=1, jvps=())``), and a program
read from text gets it back by binding that name
(``jaxprc.ir.parse(text, callbacks={name: fn})``); evaluation, lowering and
differentiation never need it. The function stored is flat:
``fn(axis_size, in_batched, *args) -> (outs, out_batched)`` over the node's
arguments after its ``num_consts`` leading closed-over values.

Differentiation is JAX's ``custom_vmap_jvp``: the jvp of the node is a node
calling the jvp of ``call``, whose rule is the user's rule differentiated
(``jvps`` counts those levels; each entry is the number of body constants the
jvp added in front, and the operand and result counts of the level below).
Under vmap that rule calls the user's rule on the arguments whose primal and
tangent are both batched and vmaps the jvp of what the rule returns over the
arguments batched in only one of the two. Reverse mode is not defined: the
jvp node depends on the tangents as a whole, so linearization leaves its
primal outputs unknown and fails as JAX does.
The user API is ``jaxprc.custom_batching``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir.core import JaxprTypeError, Literal, Primitive, param_type
from jaxprc.ir.host_callback import HostCallback
from jaxprc.ir.params import ClosedJaxprParam, Int, Record, Str, Tuple
from jaxprc.ir.tracing import close_over_consts, eval_jaxpr, standing_in, trace_to_jaxpr
from jaxprc.passes.jvp import Zero, instantiate_zeros, is_differentiable, jvp_eval, jvp_jaxpr, tangent_aval
from jaxprc.passes.vmap import aval_of, axis_size_of, batch_jaxpr, matchaxis, moveaxis, unbatched_aval

from .control_flow.common import check_operand_types, check_subjaxpr

__all__ = ["custom_vmap_call_p"]


# ------------------------------------------------------------------ the rule

class CustomVmapRuleUnavailableError(TypeError):
    """vmap of a custom_vmap node read from text whose rule was not bound to a function."""


@param_type
class VmapRule(HostCallback):
    """A custom_vmap rule: the flat ``fn`` (None when read from text) under ``name``; ``num_consts``
    leading operands of the node are closed-over values the rule does not see; ``jvps``: one
    ``(added_consts, n_operands, n_results)`` per jvp applied to the node, innermost first."""

    _fields = ("name", "num_consts", "jvps")
    __slots__ = ("num_consts", "jvps")
    called_by_program = False       # running the node never calls it

    def __init__(self, name: str, num_consts: int = 0, jvps: tuple = (), fn=None):
        super().__init__(name, fn)
        self.num_consts, self.jvps = num_consts, jvps

    def differentiated(self, added_consts: int, n_operands: int, n_results: int) -> VmapRule:
        return VmapRule(self.name, self.num_consts, self.jvps + ((added_consts, n_operands, n_results),),
                        self.fn)

    def apply(self, axis_size: int, in_batched: Sequence[bool], args: Sequence):
        """The rule over all the node's operands (batched ones at axis 0): (outs, out_batched)."""
        if self.fn is None:
            raise CustomVmapRuleUnavailableError(
                f"the custom_vmap rule '{self.name}' has no Python function: the program was read "
                f"from text, which names rules only. Bind it by name: jaxprc.ir.parse(text, "
                f"callbacks={{'{self.name}': fn}}) with fn(axis_size, in_batched, *args) -> "
                "(outs, out_batched) over flat lists.")
        rule = self._base
        for added, n_in, n_out in self.jvps:
            rule = _jvp_of_rule(rule, added, n_in, n_out)
        return rule(axis_size, list(in_batched), list(args))

    def _base(self, axis_size, in_batched, args):
        n = self.num_consts
        if any(in_batched[:n]):
            raise ValueError(f"the custom_vmap function with rule {self.name} closes over a value that "
                             "vmap batches; pass that value to the function as an argument instead")
        # the user's rule may use values the function closed over: their replayed values
        with standing_in(zip(getattr(self.fn, "closed", ()), args[:n])):
            outs, out_batched = self.fn(axis_size, in_batched[n:], *args[n:])
        return list(outs), list(out_batched)

    def __eq__(self, other):
        if type(other) is not VmapRule:
            return NotImplemented
        same = self.fn is other.fn or (self.fn is not None and other.fn is not None and self.fn == other.fn)
        return same and (self.name, self.num_consts, self.jvps) == (other.name, other.num_consts, other.jvps)

    def __hash__(self):
        return hash((self.name, self.num_consts, self.jvps))

    def __repr__(self):
        bound = "" if self.fn is not None else ", unbound"
        return f"VmapRule(name={self.name!r}, num_consts={self.num_consts}, jvps={self.jvps}{bound})"


# ------------------------------------------------------------------ primitive

custom_vmap_call_p = Primitive("custom_vmap_call")
custom_vmap_call_p.multiple_results = True
custom_vmap_call_p.def_params(call=ClosedJaxprParam(),
                              rule=Record(VmapRule, name=Str(), num_consts=Int(min=0),
                                          jvps=Tuple(Tuple(Int(min=0), length=3))))


@custom_vmap_call_p.def_abstract_eval
def _custom_vmap_call_abstract_eval(*avals, call, rule):
    check_subjaxpr("custom_vmap_call", "call", call)
    _check_levels(rule, list(avals), list(call.out_avals))
    check_operand_types("custom_vmap_call", "operands (call's inputs: closed-over values, then arguments)",
                        call.in_avals, avals)
    return list(call.out_avals)


def _check_levels(rule: VmapRule, ins, outs) -> None:
    """The rule's jvp levels, outermost first, must describe the operands and results: a level's
    operands are its added constants, the level below's, then tangents of its differentiable ones;
    its results the level below's, then their differentiable ones' tangents."""
    def fail(what):
        raise JaxprTypeError(f"custom_vmap_call: rule {rule.name}'s jvps {rule.jvps} {what}")
    for added, n_in, n_out in reversed(rule.jvps):
        below = ins[added:added + n_in]
        if len(ins) != added + n_in + sum(map(is_differentiable, below)):
            fail(f"do not describe the {len(ins)} operands ({added} added, {n_in} below, their tangents)")
        if len(outs) != n_out + sum(map(is_differentiable, outs[:n_out])):
            fail(f"do not describe the {len(outs)} results ({n_out} below, their tangents)")
        ins, outs = below, outs[:n_out]
    if rule.num_consts > len(ins):
        fail(f"leave {len(ins)} operands to the rule, fewer than its num_consts {rule.num_consts}")


def _custom_vmap_call_lowering(ctx, *args, call, rule):
    return ctx.lower_jaxpr(call, *args)


mlir.register_lowering(custom_vmap_call_p, _custom_vmap_call_lowering)


# ------------------------------------------------------------------ batching

def _rule_operand(x):
    """What the user's rule receives for a literal operand: its value (the rule may ask ``.shape``)."""
    return np.asarray(x.val, x.aval.dtype) if type(x) is Literal else x


def _custom_vmap_call_batch(args, dims, *, call, rule):
    size = axis_size_of(args, dims)
    args = [_rule_operand(moveaxis(x, d, 0) if d is not None else x) for x, d in zip(args, dims)]
    outs, out_batched = rule.apply(size, [d is not None for d in dims], args)
    out_avals = call.out_avals
    fun_name = getattr(rule.fn, "fun_name", None)
    who = f"custom vmap rule ({rule.name})" + (f" for function {fun_name}" if fun_name else "")
    if len(outs) != len(out_avals) or len(out_batched) != len(out_avals):
        raise ValueError(f"{who} returned {len(outs)} outputs and {len(out_batched)} "
                         f"batching flags for a function with {len(out_avals)} outputs")
    for i, (x, b, a) in enumerate(zip(outs, out_batched, out_avals)):
        got = aval_of(x)
        want = a.update(shape=(size, *a.shape)) if b else a
        if got.shape != want.shape:
            raise ValueError(f"{who}: output {i} has shape {got.shape}, expected "
                             f"{want.shape} (the function's output shape {a.shape}"
                             f"{f' with a leading batch axis of size {size}' if b else ', unbatched'})")
        if got.dtype != a.dtype:
            raise TypeError(f"{who}: output {i} has dtype {got.dtype.name}, expected "
                            f"{a.dtype.name} (the function's output dtype)")
    return outs, [0 if b else None for b in out_batched]


batching.primitive_batchers[custom_vmap_call_p] = _custom_vmap_call_batch


# ----------------------------------------------------------------------- jvp

def _custom_vmap_call_jvp(primals, tangents, *, call, rule):
    """A node calling the jvp of ``call`` (every differentiable tangent instantiated), its rule
    the differentiated user rule."""
    nonzeros = [is_differentiable(a) for a in call.in_avals]
    jcall, _ = jvp_jaxpr(call, nonzeros, instantiate=True)
    jcall, jconsts = close_over_consts(jcall)
    ts = [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]
    n_out = len(call.out_avals)
    outs = custom_vmap_call_p.bind(*jconsts, *primals, *ts, call=jcall,
                                   rule=rule.differentiated(len(jconsts), len(primals), n_out))
    touts = iter(outs[n_out:])
    return outs[:n_out], [next(touts) if is_differentiable(a) else Zero(tangent_aval(a))
                          for a in call.out_avals]


ad.primitive_jvps[custom_vmap_call_p] = _custom_vmap_call_jvp


def _jvp_of_rule(inner, added: int, n_in: int, n_out: int):
    """The rule of a jvp node, given the rule ``inner`` of the node it differentiates (JAX's
    ``jvp_of_rule_rule``). Operands: ``added`` body constants, ``n_in`` primals, the tangents of
    the differentiable primals; results: ``n_out`` primals, then the differentiable ones' tangents.

    ``inner`` sees the arguments whose primal and tangent are both batched (an argument without a
    tangent, an integer, counts as its primal); the jvp of what it returns is vmapped over the
    arguments batched in only one of the two. Where that vmap would batch a result ``inner``
    already batched (JAX then returns a result of the wrong shape), every argument batched in
    either is broadcast to be batched in both, and ``inner`` sees them all."""
    def rule(axis_size, in_batched, args):
        args, in_batched = args[added:], in_batched[added:]
        primals = args[:n_in]
        diff = [is_differentiable(aval_of(p)) for p in primals]
        t_iter, tb_iter = iter(args[n_in:]), iter(in_batched[n_in:])
        tangents = [next(t_iter) if d else None for d in diff]
        t_batched = [next(tb_iter) if d else p for d, p in zip(diff, in_batched[:n_in])]
        outs = _jvp_of_rule_on(inner, axis_size, primals, tangents, in_batched[:n_in], t_batched, n_out)
        if outs is None:
            both = [p or t for p, t in zip(in_batched[:n_in], t_batched)]
            primals = [matchaxis(x, 0 if p else None, 0 if b else None, axis_size)
                       for x, p, b in zip(primals, in_batched, both)]
            tangents = [None if x is None else matchaxis(x, 0 if t else None, 0 if b else None, axis_size)
                        for x, t, b in zip(tangents, t_batched, both)]
            outs = _jvp_of_rule_on(inner, axis_size, primals, tangents, both, both, n_out)
        return outs
    return rule


def _jvp_of_rule_on(inner, axis_size, primals, tangents, p_batched, t_batched, n_out):
    """One try of ``_jvp_of_rule``: (outs, out_batched), or None where the vmap over the
    arguments batched in only one of primal and tangent would batch a result ``inner`` batched."""
    n_in = len(primals)
    diff = [t is not None for t in tangents]
    mutual = [p and t for p, t in zip(p_batched, t_batched)]
    mutual_out: list = []

    def per_example(*ps_ts):
        ps, ts = ps_ts[:n_in], iter(ps_ts[n_in:])

        def to_jvp(*ps):
            outs, out_batched = inner(axis_size, mutual, list(ps))
            mutual_out[:] = out_batched
            return outs
        body = trace_to_jaxpr(to_jvp, [aval_of(p) for p in ps], name="custom_vmap_rule")
        full_ts = [next(ts) if d else Zero(tangent_aval(aval_of(p))) for p, d in zip(ps, diff)]
        outs, touts = jvp_eval(body.jaxpr, body.consts, list(ps), full_ts)
        return list(outs) + [instantiate_zeros(t) for t, o in zip(touts, outs) if is_differentiable(aval_of(o))]
    operands = list(primals) + [t for t in tangents if t is not None]
    dims = [0 if p and not t else None for p, t in zip(p_batched, t_batched)]
    dims += [0 if t and not p else None for p, t, d in zip(p_batched, t_batched, diff) if d]
    g, consts = close_over_consts(trace_to_jaxpr(per_example, [unbatched_aval(aval_of(x), d)
                                                               for x, d in zip(operands, dims)],
                                                 name="custom_vmap_jvp"))
    g, extra_out = batch_jaxpr(g, axis_size, [None] * len(consts) + dims)
    out_diff = [is_differentiable(a) for a in g.out_avals[:n_out]]
    mutual_out = list(mutual_out) + [m for m, d in zip(mutual_out, out_diff) if d]
    if any(m and e for m, e in zip(mutual_out, extra_out)):
        return None
    outs = eval_jaxpr(g.jaxpr, g.consts, *consts, *operands)
    return outs, [m or e for m, e in zip(mutual_out, extra_out)]
