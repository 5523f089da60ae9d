"""Calls: the ``jit`` primitive, a nested jit (``jit[jaxpr, name] *args``).

A call runs its callee, a ClosedJaxpr without consts (what the function closed
over is passed as leading arguments). Transformations transform the callee and
keep the call, so a jitted function stays one unit (one ``func.call`` of one
function in the lowered module) under differentiation and batching; the
``inline`` pass splices callees into their callers. The user API is
``jaxprc.jit`` (compiler/api.py), which also gives ``jit`` its eager impl.
"""
from __future__ import annotations

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters import partial_eval as pe
from jaxprc.ir.core import JaxprTypeError, Primitive
from jaxprc.ir.effects import has_ordered_effects
from jaxprc.ir.params import ClosedJaxprParam, Str
from jaxprc.ir.tracing import close_over_consts
from jaxprc.passes.inline import call_primitives
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.jet import jet_jaxpr
from jaxprc.passes.jvp import Zero, instantiate_zeros, jvp_jaxpr
from jaxprc.passes.partial_eval import partial_eval_jaxpr
from jaxprc.passes.transpose import is_undefined_primal, transpose_jaxpr
from jaxprc.passes.vmap import axis_size_of, batch_jaxpr

from .control_flow.common import (_front_dims, _new_vars, _nonzero_tangents, _pick, _split_outs,
                                  _transpose_call_outputs, check_operand_types, check_subjaxpr)

__all__ = ["jit_p"]


# ----------------------------------------------------------------- primitive

def _call_abstract_eval(prim: str, check_params):
    """Typing of a call (``jit``, ``checkpoint``): the callee's signature; ``check_params``
    checks the other params."""
    def rule(*avals, jaxpr, **params):
        check_subjaxpr(prim, "jaxpr", jaxpr)
        check_params(**params)
        check_operand_types(prim, "arguments (the callee's inputs)", jaxpr.in_avals, avals)
        return list(jaxpr.out_avals)
    return rule


def _jit_params(*, name):
    if not isinstance(name, str):
        raise JaxprTypeError(f"jit: param name must be a string, got {name!r}")


jit_p = Primitive("jit")                  # a nested jit call
jit_p.multiple_results = True
jit_p.def_params(jaxpr=ClosedJaxprParam(), name=Str())
jit_p.def_abstract_eval(_call_abstract_eval("jit", _jit_params))
call_primitives.add(jit_p)                  # the inline pass splices its callee


# ----------------------------------------------------------------------- jvp

def _jit_jvp(primals, tangents, *, jaxpr, **params):
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    outs = jit_p.bind(*consts, *primals, *_nonzero_tangents(tangents, nonzeros),
                      jaxpr=body, **params)
    return _split_outs(outs, len(jaxpr.out_avals), out_nz, jaxpr.out_avals)


ad.primitive_jvps[jit_p] = _jit_jvp


# ----------------------------------------------------------------- transpose

def _jit_t(cts, *args, jaxpr, name):
    linear = [is_undefined_primal(a) for a in args]
    ct_cj, nonzeros = transpose_jaxpr(jaxpr, linear, instantiate=False)
    ct_cj, consts = close_over_consts(ct_cj)
    nonlin = [a for a in args if not is_undefined_primal(a)]
    outs = jit_p.bind(*consts, *nonlin, *map(instantiate_zeros, cts), jaxpr=ct_cj, name=f"transpose_{name}")
    return _transpose_call_outputs(outs, args, nonzeros)


ad.primitive_transposes[jit_p] = _jit_t


# ------------------------------------------------------------------ batching

def _call_rule(prim: Primitive):
    """Calls (nested jit, checkpoint): batch the callee."""
    def rule(args, dims, *, jaxpr, **params):
        new_jaxpr, out_b = batch_jaxpr(jaxpr, axis_size_of(args, dims), dims)
        outs = prim.bind(*args, jaxpr=new_jaxpr, **params)
        return outs, _front_dims(out_b)
    return rule


batching.primitive_batchers[jit_p] = _call_rule(jit_p)


# ---------------------------------------------------------- partial eval, DCE

def _pe_jit(eqn, uk_in):
    callee = eqn.params["jaxpr"]
    known, unknown, out_uk, n_res = partial_eval_jaxpr(callee, uk_in, False)
    residuals = _new_vars(known.out_avals[len(known.out_avals) - n_res:])
    k_eqn = eqn.replace(invars=_pick(eqn.invars, uk_in, False),
                        outvars=_pick(eqn.outvars, out_uk, False) + residuals,
                        params={**eqn.params, "jaxpr": known})
    u_eqn = eqn.replace(invars=residuals + _pick(eqn.invars, uk_in),
                        outvars=_pick(eqn.outvars, out_uk), params={**eqn.params, "jaxpr": unknown})
    return [k_eqn], [u_eqn], out_uk


def _dce_jit(used_outputs, eqn):
    callee, used_inputs = dce_closed(eqn.params["jaxpr"], used_outputs)
    return used_inputs, eqn.replace(invars=_pick(eqn.invars, used_inputs),
                                    outvars=_pick(eqn.outvars, used_outputs),
                                    params={**eqn.params, "jaxpr": callee})


pe.partial_eval_jaxpr_custom_rules[jit_p] = _pe_jit
pe.dce_rules[jit_p] = _dce_jit


# ------------------------------------------------------------------ lowering

def _call(ctx, *args, jaxpr, name):
    if has_ordered_effects(jaxpr):     # inlined: the ordered-effects token flows through it
        return ctx.lower_jaxpr(jaxpr, *args)
    return ctx.call(jaxpr, args, name)


mlir.register_lowering(jit_p, _call)


# ---------------------------------------------------------- jet (Taylor series)
def _jit_jet(primals_in, series_in, *, jaxpr, name):
    """A jit stays a call, of its callee's jet."""
    order = len(series_in[0])
    body, _ = jet_jaxpr(jaxpr, order, [True] * len(primals_in), instantiate=True)
    body, consts = close_over_consts(body)
    outs = jit_p.bind(*consts, *primals_in, *(t for s in series_in for t in s), jaxpr=body, name=name)
    n = len(jaxpr.out_avals)
    return outs[:n], [outs[n + i * order:n + (i + 1) * order] for i in range(n)]


jet.jet_rules[jit_p] = _jit_jet
