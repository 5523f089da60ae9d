"""Transposition of linear jaxprs: cotangents of the outputs -> cotangents of the linear inputs.

Inputs are either linear (``UndefinedPrimal(aval)``: the value is what we
solve for) or known (residuals, passed as values). Equations whose inputs
are all known are evaluated forward; the rest are walked backwards, each by
``transpose_rules[prim](ct, *invals, **params) -> list of input cotangents``
(``ct`` a list for multiple results; ``None`` or ``Zero`` for inputs that get
nothing). Cotangents reaching the same variable are added; ``Zero``
cotangents stay symbolic and are only materialised in the results.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxprc.ir import lax
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.tracing import (ConcretizationTypeError, Tracer, close_over_consts, current_builder,
                               eval_jaxpr, no_trace, source_info_of, trace_to_jaxpr)

from .jvp import Zero, _hoist_shared, add_tangents, aval_of, instantiate_zeros, literal_value, zeros
from .registry import register_pass


class UndefinedPrimal:
    """A linear input of a transpose rule: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return isinstance(x, UndefinedPrimal)


transpose_rules: dict = {}


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], cts_out: Sequence[Any]):
    """Cotangents of ``jaxpr``'s linear inputs (those given as ``UndefinedPrimal``), in the
    current trace. ``cts_out`` may hold ``Zero``s; results may be ``Zero``."""
    primal_env: dict[Var, Any] = {}
    linear: set[Var] = set()
    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, x in zip(jaxpr.invars, args):
        if is_undefined_primal(x):
            linear.add(v)
        else:
            primal_env[v] = x

    def read_primal(a):
        if isinstance(a, Literal):
            return literal_value(a)
        return UndefinedPrimal(a.aval) if a in linear else primal_env[a]

    linear_eqns = []
    for eqn in jaxpr.eqns:          # forward: evaluate what does not depend on linear inputs
        if any(isinstance(a, Var) and a in linear for a in eqn.invars):
            linear.update(eqn.outvars)
            linear_eqns.append(eqn)
            continue
        with source_info_of(eqn.source_info):
            outs = eqn.primitive.bind(*[a if isinstance(a, Literal) else primal_env[a] for a in eqn.invars],
                                      **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
            primal_env[v] = o

    ct_env: dict[Var, Any] = {}

    def add_ct(v, ct):
        if isinstance(v, Var) and v in linear and ct is not None and not isinstance(ct, Zero):
            ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        cts = [Zero(v.aval) if ct is None else ct for v, ct in zip(eqn.outvars, cts)]
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"Transpose rule for '{eqn.primitive.name}' not implemented (transpose pass): it is "
                "not linear in its inputs, or its rule is missing, so reverse-mode differentiation "
                "through it is unavailable.")
        ct_arg = cts if eqn.primitive.multiple_results else cts[0]
        with source_info_of(eqn.source_info):    # the transposed ops keep the user's line
            cts_in = rule(ct_arg, *map(read_primal, eqn.invars), **eqn.params)
            for a, ct in zip(eqn.invars, cts_in):
                add_ct(a, ct)
    return [ct_env.get(v, Zero(v.aval)) if is_undefined_primal(x) else None
            for v, x in zip(jaxpr.invars, args)]


def transpose_jaxpr(cj: ClosedJaxpr, linear: Sequence[bool],
                    instantiate: Sequence[bool] | bool = True,
                    values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The transpose of ``cj`` with respect to its ``linear`` inputs.

    The result takes (the non-linear inputs, then a cotangent per output) and returns a
    cotangent per linear input: materialised where ``instantiate``, else only those that are
    nonzero. Returns it and the nonzero mask over the linear inputs. ``values``, when given,
    are the concrete inputs of the result: a custom_vjp ``bwd`` then runs on concrete values
    (the user's Python sees numbers) and its results enter the program as constants.
    """
    in_avals = cj.in_avals
    lin_avals = [a for a, lin in zip(in_avals, linear) if lin]
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(lin_avals)
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    nonzeros: list[bool] = []

    def fun(*args):
        nonlin, cts = iter(args[:len(nonlin_avals)]), args[len(nonlin_avals):]
        primals = [UndefinedPrimal(a) if lin else next(nonlin) for a, lin in zip(in_avals, linear)]
        cts_in = backward_pass(cj.jaxpr, cj.consts, primals, cts)
        cts_in = [ct for ct, lin in zip(cts_in, linear) if lin]
        cts_in = [instantiate_zeros(ct) if inst else ct for ct, inst in zip(cts_in, instantiate)]
        nonzeros[:] = [not isinstance(ct, Zero) for ct in cts_in]
        return [ct for ct in cts_in if not isinstance(ct, Zero)]

    out = trace_to_jaxpr(fun, nonlin_avals + list(cj.out_avals), name="transpose", concrete_args=values)
    return out, nonzeros


def transpose(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: every input linear; cotangents of the outputs -> of the inputs."""
    return transpose_jaxpr(cj, [True] * len(cj.in_avals))[0]


register_pass("transpose", transpose)


# ------------------------------------------------------------------ rules

def _rule(*names):
    def register(fn):
        for name in names:
            if name in PRIMITIVES:
                prim = PRIMITIVES[name]
                transpose_rules[prim] = (fn if len(names) == 1 else
                                         (lambda p: lambda ct, *a, **kw: fn(p, ct, *a, **kw))(prim))
        return fn
    return register


def _bind(prim_name, *args, **params):
    return PRIMITIVES[prim_name].bind(*args, **params)




# ------------------------------------------------------------ control flow

def _transpose_call_outputs(outs, linear_args, nonzeros):
    outs = iter(outs)
    nz = iter(nonzeros)
    result = []
    for a in linear_args:
        if not is_undefined_primal(a):
            result.append(None)
        else:
            result.append(next(outs) if next(nz) else Zero(a.aval))
    return result


@_rule("jit")
def _jit_t(cts, *args, jaxpr, name):
    linear = [is_undefined_primal(a) for a in args]
    ct_cj, nonzeros = transpose_jaxpr(jaxpr, linear, instantiate=False)
    ct_cj, consts = close_over_consts(ct_cj)
    nonlin = [a for a in args if not is_undefined_primal(a)]
    outs = _bind("jit", *consts, *nonlin, *map(instantiate_zeros, cts), jaxpr=ct_cj, name=f"transpose_{name}")
    return _transpose_call_outputs(outs, args, nonzeros)


@_rule("custom_jvp_call_jaxpr")
def _custom_jvp_call_t(cts, *args, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    # In a linear program (a jvp rule applied its own function to tangents) the node is linear
    # through its function; the rule has done its work, as in JAX's partial evaluation.
    return _jit_t(cts, *args, jaxpr=fun_jaxpr, name=jvp_jaxpr_thunk.name)


@_rule("cond")
def _cond_t(cts, index, *ops, branches):
    if is_undefined_primal(index):
        raise ValueError("transpose of cond: the branch index must not be linear")
    linear = [is_undefined_primal(a) for a in ops]
    new, consts = _hoist_shared([transpose_jaxpr(br, linear, instantiate=True)[0] for br in branches])
    nonlin = [a for a in ops if not is_undefined_primal(a)]
    outs = _bind("cond", index, *consts, *nonlin, *map(instantiate_zeros, cts), branches=tuple(new))
    return [None] + _transpose_call_outputs(outs, ops, [True] * sum(linear))


@_rule("scan")
def _scan_t(cts, *args, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    nc, nk = num_consts, num_carry
    consts, carry, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    # Carries are transposed as linear even when their init is a known value: such an init
    # is an instantiated zero tangent (a loop whose tangent becomes nonzero only inside),
    # and its cotangent is simply dropped.
    lin_consts = [is_undefined_primal(c) for c in consts]
    lin_xs = [is_undefined_primal(x) for x in xs]
    res_consts = [c for c in consts if not is_undefined_primal(c)]
    res_xs = [x for x in xs if not is_undefined_primal(x)]
    body_avals = jaxpr.in_avals
    const_avals = [a for a, lin in zip(body_avals[:nc], lin_consts) if lin]
    carry_avals = body_avals[nc:nc + nk]
    x_avals = body_avals[nc + nk:]
    ct_carry, ct_ys = cts[:nk], cts[nk:]
    y_avals = jaxpr.out_avals[nk:]

    def body(*a):
        rc, a = a[:len(res_consts)], a[len(res_consts):]
        acc, a = a[:len(const_avals)], a[len(const_avals):]
        ck, a = a[:nk], a[nk:]
        cy, rx = a[:len(y_avals)], a[len(y_avals):]
        rc_it, rx_it = iter(rc), iter(rx)
        primals = ([UndefinedPrimal(av) if lin else next(rc_it) for av, lin in zip(body_avals[:nc], lin_consts)]
                   + [UndefinedPrimal(av) for av in carry_avals]
                   + [UndefinedPrimal(av) if lin else next(rx_it) for av, lin in zip(x_avals, lin_xs)])
        cts_in = backward_pass(jaxpr.jaxpr, jaxpr.consts, primals, list(ck) + list(cy))
        ct_consts = [instantiate_zeros(c) for c, lin in zip(cts_in[:nc], lin_consts) if lin]
        new_acc = [add_tangents(x, c) for x, c in zip(acc, ct_consts)]
        ct_carry_in = [instantiate_zeros(c) for c in cts_in[nc:nc + nk]]
        ct_x = [instantiate_zeros(c) for c, lin in zip(cts_in[nc + nk:], lin_xs) if lin]
        return new_acc + ct_carry_in + ct_x

    res_x_avals = [a for a, lin in zip(x_avals, lin_xs) if not lin]
    res_c_avals = [a for a, lin in zip(body_avals[:nc], lin_consts) if not lin]
    t_body = trace_to_jaxpr(body, res_c_avals + const_avals + list(carry_avals) + list(y_avals) + res_x_avals,
                            name="scan_transpose")
    t_body, hoisted = close_over_consts(t_body)
    init = [zeros(a) for a in const_avals] + [instantiate_zeros(c) for c in ct_carry]
    stacked_ys = [instantiate_zeros(c) for c in ct_ys]
    operands = [*hoisted, *res_consts, *init, *stacked_ys, *res_xs]
    n_consts = len(hoisted) + len(res_consts)
    outs = _bind("scan", *operands, jaxpr=t_body, length=length, reverse=not reverse, unroll=unroll,
                 num_consts=n_consts, num_carry=len(init), linear=(False,) * len(operands))
    ct_consts, ct_init, ct_xs = outs[:len(const_avals)], outs[len(const_avals):len(init)], outs[len(init):]
    cc, cx = iter(ct_consts), iter(ct_xs)
    return ([next(cc) if lin else None for lin in lin_consts]
            + [ct if is_undefined_primal(c) else None for ct, c in zip(ct_init, carry)]
            + [next(cx) if lin else None for lin in lin_xs])


@_rule("while")
def _while_t(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
                     "with dynamic start/stop values. Try using lax.scan, or lax.fori_loop with "
                     "constant start/stop.")


# ------------------------------------------------------- custom derivatives

def _concrete(xs):
    """The concrete values of ``xs`` when the current trace knows them all (else None)."""
    builder = current_builder()
    out = []
    for x in xs:
        if isinstance(x, Tracer):
            if builder is None or x._builder is not builder:
                return None
            try:
                x = builder.concretize(x, "custom_vjp bwd", ConcretizationTypeError)
            except ConcretizationTypeError:
                return None
        out.append(x)
    return out


@_rule("custom_lin")
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
