"""Run-time checks: ``check``, the primitive of ``jaxprc.experimental.checkify``.

Its operands are an error state in slots, one per kind of error and payload type:
``[failed (bool[]), code (i32[]), *payload]`` per slot. Its params say what the
slots are (``kinds``, ``payload_counts``) and what each code's failure says
(``codes``, ``messages``: ``ErrorMessage(kind, template, args)``), so the
equation prints and parses. Of the failing slots, the failure with the smallest
code is reported (codes are handed out in program order).

Eagerly a failure raises ``JaxRuntimeError``; ``debug=True`` checks do nothing
unless ``checkify`` turns them into values. A compiled program cannot raise, so
lowering a non-debug check fails as in JAX ("not functionalized"): ``checkify``
must remove it first. Under ``vmap`` a batch of checks becomes one check of the
last failing member (as JAX). Effect ``check`` keeps the equation from DCE/CSE.
"""
from __future__ import annotations

import ast
from typing import NamedTuple

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir.core import JaxprTypeError, Literal, Primitive, param_type
from jaxprc.ir.effects import Effect
from jaxprc.ir.params import Bool, Int, Record, Str, Tuple
from jaxprc.ir.tracing import get_aval
from jaxprc.engine.dispatch import put_on_device
from jaxprc.ir.tree_util import tree_flatten, tree_unflatten

from jaxprc.passes.vmap import moveaxis

__all__ = ["check_p", "ErrorMessage", "JaxRuntimeError"]

KINDS = ("FailedCheckError", "NaNError", "OOBError", "DivisionByZeroError")


class JaxRuntimeError(ValueError):
    """A failed check, raised where it runs (an eager ``check``, ``Error.throw``)."""


@param_type
class ErrorMessage(NamedTuple):
    """What a failure says: ``template.format(*args, **kwargs)``, where ``args`` writes the
    arguments' structure with payload positions for arrays (``"((0, [1]), {'x': 2})"``: tuples,
    lists, dicts and None). A failed ``check`` adds JAX's " (`check` failed)"."""
    kind: str
    template: str
    args: str = "((), {})"

    def format(self, payload) -> str:
        args, kwargs = _fill(ast.literal_eval(self.args), [_as_array(p) for p in payload])
        try:
            text = self.template.format(*args, **kwargs)
        except (IndexError, KeyError, ValueError, AttributeError, TypeError) as e:
            text = f"{self.template} (its arguments do not format: {type(e).__name__}: {e})"
        return text + " (`check` failed)" if self.kind == "FailedCheckError" else text


def arg_structure(tree) -> str:
    """``tree``'s structure with its leaves numbered, as ``ErrorMessage.args`` writes it; a
    ValueError for containers other than tuples, lists, dicts and None."""
    leaves, treedef = tree_flatten(tree)
    text = repr(tree_unflatten(treedef, list(range(len(leaves)))))
    try:
        if tree_flatten(_fill(ast.literal_eval(text), leaves))[1] == treedef:
            return text
    except (ValueError, SyntaxError, TypeError):
        pass
    raise ValueError(f"formatting arguments must be arrays in tuples, lists and dicts, got {tree!r}")


def _fill(skeleton, leaves):
    """The skeleton's payload positions replaced by the leaves."""
    if isinstance(skeleton, int) and not isinstance(skeleton, bool):
        return leaves[skeleton]
    if isinstance(skeleton, (tuple, list)):
        return type(skeleton)(_fill(x, leaves) for x in skeleton)
    if isinstance(skeleton, dict):
        return {k: _fill(v, leaves) for k, v in skeleton.items()}
    return skeleton


def _as_array(x):
    """A payload value as an Array, so messages print it as JAX's do."""
    return put_on_device(np.asarray(x))


def slots_of(args, payload_counts) -> list[tuple]:
    """The operands as ``(failed, code, payload list)`` slots."""
    slots, at = [], 0
    for n in payload_counts:
        slots.append((args[at], args[at + 1], list(args[at + 2:at + 2 + n])))
        at += 2 + n
    return slots


def first_failure(slots, messages: dict, idx=()) -> tuple[str, str] | None:
    """(kind, message) of the failure with the smallest code at batch index ``idx``, or None."""
    best = None
    for failed, code, payload in slots:
        if bool(np.asarray(failed)[idx]):
            c = int(np.asarray(code)[idx])
            if best is None or c < best[0]:
                best = (c, payload)
    if best is None:
        return None
    message = messages.get(best[0])
    if message is None:      # a hand-written program may name no message for a code
        return "FailedCheckError", f"check failed with error code {best[0]}, which no message names"
    return message.kind, message.format([np.asarray(p)[idx] for p in best[1]])


def reduce_batched(slots) -> list[tuple]:
    """Slots batched on a leading axis (of any rank) as one: the last failing member's."""
    out = []
    for failed, code, payload in slots:
        lead = np.ndim(get_aval(failed))
        n = int(np.prod(np.shape(get_aval(failed)), dtype=int))
        flat = lambda x: lax.reshape(x, (n, *np.shape(get_aval(x))[lead:]))  # noqa: E731
        failed = lax.convert_element_type(flat(failed), np.int32)
        i = (n - 1) - lax.argmax(lax.rev(failed, (0,)), 0, np.int32)     # as JAX's argsort(failed)[-1]
        pick = lambda x: lax.squeeze(lax.dynamic_slice_in_dim(flat(x), i, 1, 0), (0,))  # noqa: E731
        out.append((lax.ne(pick(failed), np.int32(0)), pick(code), [pick(p) for p in payload]))
    return out


check_p = Primitive("check")
check_p.multiple_results = True      # no results
check_p.def_params(kinds=Tuple(Str()), payload_counts=Tuple(Int(min=0)), codes=Tuple(Int()),
                   messages=Tuple(Record(ErrorMessage, kind=Str(), template=Str(), args=Str())),
                   debug=Bool())
check_p.def_effects(lambda **_: {Effect.check})


@check_p.def_abstract_eval
def _check_abstract_eval(*avals, kinds, payload_counts, codes, messages, debug):
    if len(kinds) != len(payload_counts) or len(codes) != len(messages):
        raise JaxprTypeError("check: kinds and payload_counts, and codes and messages, must pair up, got "
                             f"{len(kinds)} and {len(payload_counts)}, {len(codes)} and {len(messages)}")
    for m in messages:
        try:
            ast.literal_eval(m.args)
        except (ValueError, SyntaxError):
            raise JaxprTypeError(f"check: message args {m.args!r} is not a structure of payload "
                                 "positions (tuples, lists, dicts of ints)") from None
        if m.kind not in KINDS:
            raise JaxprTypeError(f"check: unknown error kind {m.kind!r}, expected one of {KINDS}")
    want = sum(2 + n for n in payload_counts)
    if len(avals) != want:
        raise JaxprTypeError(f"check: {len(avals)} operands for error slots of {want} values")
    for kind, (failed, code, _) in zip(kinds, slots_of(avals, payload_counts)):
        if kind not in KINDS:
            raise JaxprTypeError(f"check: unknown error kind {kind!r}, expected one of {KINDS}")
        if failed.shape != () or failed.dtype != np.bool_ or code.shape != () or code.dtype != np.int32:
            raise JaxprTypeError(f"check: each error slot starts with bool[] and i32[] scalars, "
                                 f"got {failed.str_short()}, {code.str_short()}")
    return []


def _check_impl(*args, kinds, payload_counts, codes, messages, debug):
    if not debug:
        args = [x.val if type(x) is Literal else x for x in args]
        found = first_failure(slots_of(args, payload_counts), dict(zip(codes, messages)))
        if found is not None:
            raise JaxRuntimeError(found[1])
    return []


check_p.def_impl(_check_impl)


def _check_jvp(primals, tangents, **params):
    check_p.bind(*primals, **params)      # the primal values are checked; nothing to differentiate
    return [], []


ad.primitive_jvps[check_p] = _check_jvp


def _check_batch(args, dims, *, payload_counts, **params):
    size = next(np.shape(get_aval(x))[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
    front = [lax.broadcast(x, (size,)) if d is batching.not_mapped else moveaxis(x, d, 0)
             for x, d in zip(args, dims)]
    slots = reduce_batched(slots_of(front, payload_counts))
    check_p.bind(*[v for f, c, p in slots for v in (f, c, *p)], payload_counts=payload_counts, **params)
    return [], []


batching.primitive_batchers[check_p] = _check_batch

FUNCTIONALIZATION_ERROR = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This probably "
    "means you tried to stage (jit/scan/pmap/...) a `check` without functionalizing it through "
    "`checkify.checkify`.")


def _check_lowering(ctx, *args, debug, **params):
    if not debug:       # a compiled program cannot raise: checkify must turn the check into values
        raise ValueError(FUNCTIONALIZATION_ERROR)
    return []


mlir.register_lowering(check_p, _check_lowering)
