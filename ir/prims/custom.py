"""Custom-derivative nodes: custom_jvp_call_jaxpr, custom_vjp_call_jaxpr, custom_lin.

A custom node runs ``fun_jaxpr`` (operands: hoisted consts, then the
arguments) and carries its differentiation rules beside it, as thunks formed
lazily because a rule may call its own custom function. The typing rules
never force those thunks. ``custom_lin`` lives only in linearized (tangent)
programs: it holds the user's ``bwd`` until transposition calls it.
Operand types are compared on shape and dtype (weak types ignored), as for
the call primitives in control_flow.py.
"""
from __future__ import annotations

from ..core import JaxprTypeError, Primitive, ShapedArray
from .control_flow import check_operand_types, check_subjaxpr

__all__ = ["custom_jvp_call_jaxpr_p", "custom_vjp_call_jaxpr_p", "custom_lin_p"]


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


def _custom_call_rule(prim: str, rule_params: tuple[str, ...], other_params=()):
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
    _custom_call_rule("custom_jvp_call_jaxpr", ("jvp_jaxpr_thunk",)))

custom_vjp_call_jaxpr_p = Primitive("custom_vjp_call_jaxpr")
custom_vjp_call_jaxpr_p.multiple_results = True
custom_vjp_call_jaxpr_p.def_abstract_eval(
    _custom_call_rule("custom_vjp_call_jaxpr", ("fwd_jaxpr_thunk", "bwd"), ("out_trees",)))

custom_lin_p = Primitive("custom_lin")
custom_lin_p.multiple_results = True


@custom_lin_p.def_abstract_eval
def _custom_lin_rule(*avals, num_res, bwd, out_avals, symbolic_zeros):
    _check_num("custom_lin", "num_res", num_res, len(avals))
    _check_callable("custom_lin", "bwd", bwd)
    _check_bool("custom_lin", "symbolic_zeros", symbolic_zeros)
    if type(out_avals) is not tuple or not all(isinstance(a, ShapedArray) for a in out_avals):
        raise JaxprTypeError(f"custom_lin: param out_avals must be a tuple of ShapedArrays, "
                             f"got {out_avals!r}")
    return list(out_avals)
