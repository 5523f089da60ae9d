"""Control-flow and call primitives: cond, while, scan, jit (nested call), checkpoint, and
what checkpoint's saving policies refer to: the ``CheckpointPolicy`` param and the ``name``
primitive.

Each holds sub-programs as ClosedJaxprs *without* consts: whatever a body
closed over is hoisted into leading operands (``num_consts``, ``cond_nconsts``,
``body_nconsts``), so outer values flow as data and passes see them.

Weak types. As in JAX (``core.typematch``/``typecompat``), every comparison
below is on shape and dtype only: an operand may be weakly typed where the
sub-jaxpr's binder is strong and vice versa, branch signatures may differ in
weak bits, and a loop body may return a carry whose weak bit differs from its
input carry's. Results take their weak bits from the sub-jaxpr: ``cond`` from
branch 0, ``while`` from the body's outputs, ``scan`` from the body's carry and
``ys`` outputs, calls from the callee's outputs.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from ..core import ClosedJaxpr, JaxprTypeError, Primitive, ShapedArray, param_type
from .elementwise import fmt_types

__all__ = ["cond_p", "while_p", "scan_p", "jit_p", "checkpoint_p", "name_p", "CheckpointPolicy",
           "POLICY_KINDS", "typematch", "check_subjaxpr", "check_operand_types"]


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype; weak types are ignored (JAX's ``core.typematch``)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _all_match(expected: Sequence[ShapedArray], got: Sequence[ShapedArray]) -> bool:
    return len(expected) == len(got) and all(map(typematch, expected, got))


def check_operand_types(prim: str, what: str, expected: Sequence[ShapedArray],
                        got: Sequence[ShapedArray]) -> None:
    """Raise naming the primitive and both type lists unless ``got`` matches ``expected``."""
    if not _all_match(expected, got):
        raise JaxprTypeError(
            f"{prim}: {what} expected types ({fmt_types(expected)}) "
            f"but got ({fmt_types(got)})")


def check_subjaxpr(prim: str, param: str, cj) -> ClosedJaxpr:
    """A sub-program param must be a ClosedJaxpr whose consts were hoisted into operands."""
    if not isinstance(cj, ClosedJaxpr):
        raise JaxprTypeError(f"{prim}: param {param} must be a ClosedJaxpr, got {type(cj).__name__}")
    if cj.consts:
        raise JaxprTypeError(
            f"{prim}: param {param} must be a ClosedJaxpr without consts (consts are passed as "
            f"leading operands), got one with {len(cj.consts)} consts")
    return cj


def _check_count(prim: str, name: str, value, bound: int) -> None:
    if type(value) is not int or not 0 <= value <= bound:
        raise JaxprTypeError(f"{prim}: param {name} must be an int in [0, {bound}] "
                             f"(the number of operands), got {value!r}")


# ----------------------------------------------------------------------- cond

cond_p = Primitive("cond")
cond_p.multiple_results = True


@cond_p.def_abstract_eval
def _cond_rule(index, *operands, branches):
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
    return list(first.out_avals)


# ---------------------------------------------------------------------- while

while_p = Primitive("while")
while_p.multiple_results = True


@while_p.def_abstract_eval
def _while_rule(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    check_subjaxpr("while", "cond_jaxpr", cond_jaxpr)
    check_subjaxpr("while", "body_jaxpr", body_jaxpr)
    _check_count("while", "cond_nconsts", cond_nconsts, len(avals))
    _check_count("while", "body_nconsts", body_nconsts, len(avals) - cond_nconsts)
    cond_consts = avals[:cond_nconsts]
    body_consts = avals[cond_nconsts:cond_nconsts + body_nconsts]
    carry = avals[cond_nconsts + body_nconsts:]
    check_operand_types("while", "cond_jaxpr inputs (cond consts, carry)",
                        cond_jaxpr.in_avals, [*cond_consts, *carry])
    check_operand_types("while", "body_jaxpr inputs (body consts, carry)",
                        body_jaxpr.in_avals, [*body_consts, *carry])
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype.kind != "b":
        raise JaxprTypeError(f"while: cond_jaxpr must return one boolean scalar (bool[]), "
                             f"got ({fmt_types(pred)})")
    check_operand_types("while", "body_jaxpr outputs (the carry it takes)",
                        body_jaxpr.in_avals[body_nconsts:], body_jaxpr.out_avals)
    return list(body_jaxpr.out_avals)


# ----------------------------------------------------------------------- scan

scan_p = Primitive("scan")
scan_p.multiple_results = True


@scan_p.def_abstract_eval
def _scan_rule(*avals, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    check_subjaxpr("scan", "jaxpr", jaxpr)
    if type(length) is not int or length < 0:
        raise JaxprTypeError(f"scan: param length must be a non-negative int, got {length!r}")
    if type(reverse) is not bool:
        raise JaxprTypeError(f"scan: param reverse must be a bool, got {reverse!r}")
    if type(unroll) is not int or unroll < 0:
        raise JaxprTypeError(f"scan: param unroll must be a non-negative int, got {unroll!r}")
    _check_count("scan", "num_consts", num_consts, len(avals))
    _check_count("scan", "num_carry", num_carry, len(avals) - num_consts)
    if (type(linear) is not tuple or len(linear) != len(avals)
            or not all(type(b) is bool for b in linear)):
        raise JaxprTypeError(f"scan: param linear must be a tuple of {len(avals)} bools "
                             f"(one per operand), got {linear!r}")
    consts, init = avals[:num_consts], avals[num_consts:num_consts + num_carry]
    xs = avals[num_consts + num_carry:]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise JaxprTypeError(f"scan: each scanned operand (xs) needs a leading axis of the "
                                 f"scan length {length}, got ({fmt_types(xs)})")
    x_slices = [x.update(shape=x.shape[1:]) for x in xs]
    check_operand_types("scan", "jaxpr inputs (consts, carry, slices of xs)",
                        jaxpr.in_avals, [*consts, *init, *x_slices])
    carry_out, ys = jaxpr.out_avals[:num_carry], jaxpr.out_avals[num_carry:]
    check_operand_types("scan", "jaxpr carry outputs (its carry inputs)",
                        jaxpr.in_avals[num_consts:num_consts + num_carry], carry_out)
    return [*carry_out, *(y.update(shape=(length, *y.shape)) for y in ys)]


# ---------------------------------------------------------------------- calls

def _call_rule(prim: str, check_params):
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
jit_p.def_abstract_eval(_call_rule("jit", _jit_params))


# ----------------------------------------------------------------- checkpoint
# Rematerialization (its pass rules are in passes/remat.py): of the values the backward pass
# needs from a ``checkpoint``'s body, partial evaluation saves those the policy allows and
# recomputes the rest. Policies can match values tagged by the ``name`` primitive.

name_p = Primitive("name")                # checkpoint_name(x, name): the identity, tagged
name_p.def_impl(lambda x, *, name: x)


@name_p.def_abstract_eval
def _name_rule(x, *, name):
    if not isinstance(name, str):
        raise JaxprTypeError(f"name: param name must be a string, got {name!r}")
    return x


POLICY_KINDS = ("everything_saveable", "nothing_saveable", "dots_saveable",
                "dots_with_no_batch_dims_saveable", "save_only_these_names",
                "save_anything_except_these_names")


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
            return prim.name == "dot_general"
        if kind == "dots_with_no_batch_dims_saveable":
            return prim.name == "dot_general" and not params["dimension_numbers"][1][0]
        if kind == "save_only_these_names":
            return prim is name_p and params["name"] in self.names
        if kind == "save_anything_except_these_names":
            return not (prim is name_p and params["name"] in self.names)
        raise JaxprTypeError(_unknown_kind(kind))


def _unknown_kind(kind) -> str:
    return f"checkpoint: unknown policy kind {kind!r}; expected one of {', '.join(POLICY_KINDS)}"


def _checkpoint_params(*, prevent_cse, policy):
    if type(prevent_cse) is not bool:
        raise JaxprTypeError(f"checkpoint: param prevent_cse must be a bool, got {prevent_cse!r}")
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
checkpoint_p.def_abstract_eval(_call_rule("checkpoint", _checkpoint_params))
