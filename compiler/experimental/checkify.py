"""``jax.experimental.checkify``: run-time checks as values.

``check(pred, msg, *args, **kwargs)`` binds the ``check`` primitive (``jaxprc.lax.checks``:
an error state as operands, the messages as params), which raises where it runs
eagerly and cannot be compiled. ``checkify(f, errors)`` traces ``f`` to the IR and
evaluates it with an ``Error`` threaded through: ``check`` equations merge into it,
and, by the ``errors`` asked for, NaN-producing primitives, out-of-bounds
gathers/slices/scatters and divisions by zero add to it. Control flow, calls and
remat are rewritten with the error's values as extra operands and results (a loop
carries them), so ``checkify`` composes with ``jit``, ``vmap`` (a batched error
reports every failing index) and ``grad``.

Each check site gets a fresh code; per slot the earliest failure is kept, and
``Error.get`` reports the failure with the smallest code, as JAX.

custom_jvp/custom_vjp functions keep their rules: the call takes and returns the
error, and its rules, as JAX's, forward the error they are given. Unlike JAX: a
rule runs with the checks it contains removed (JAX runs them eagerly and raises
where one fails, and cannot compile them under jit). A ``shard_map`` body gives
each device's error, stacked on a new leading axis (as JAX's). A while loop batched
by ``vmap`` whose members stop at different steps (JAX refuses it) checks each member
only while it loops.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from jaxprc import numpy as jnp
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, Thunk, Var, subjaxprs
from jaxprc.ir.effects import Effect, jaxpr_effects
from jaxprc.ir.tracing import Tracer, close_over_consts, eval_jaxpr, get_aval, source_info_of, trace_to_jaxpr
from jaxprc.ir.tree_util import register_pytree_node_class, tree_flatten, tree_leaves, tree_map, tree_unflatten
from jaxprc.lax.call import jit_p
from jaxprc.lax.control_flow.conditionals import cond_p
from jaxprc.lax.control_flow.loops import per_member_loop, scan_p, while_p
from jaxprc.lax.custom_derivatives import custom_jvp_call_jaxpr_p, custom_vjp_call_jaxpr_p, rule_const_count
from jaxprc.lax.checks import (ErrorMessage, JaxRuntimeError, arg_structure, check_p, first_failure, reduce_batched,
                               slots_of)
from jaxprc.lax.parallel import _manual_sizes, _replicated, _trace_body, shard_map_p
from jaxprc.lax.remat import checkpoint_p
from jaxprc.passes.jvp import Zero, instantiate_zeros, is_differentiable
from jaxprc.passes.vmap import batch_eval, matchaxis
from jaxprc.runtime import Array

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks", "check",
           "check_error", "checkify", "debug_check", "div_checks", "float_checks", "index_checks",
           "init_error", "nan_checks", "user_checks"]


# ----------------------------------------------------------------- exceptions

class JaxException(Exception):
    """One kind of checked error; its instances are the messages ``Error.get`` reports."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message


class FailedCheckError(JaxException):
    pass


class NaNError(JaxException):
    pass


class OOBError(JaxException):
    pass


class DivisionByZeroError(JaxException):
    pass


ErrorCategory = type[JaxException]
_CATEGORIES = {c.__name__: c for c in (FailedCheckError, NaNError, OOBError, DivisionByZeroError)}

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


@dataclasses.dataclass(frozen=True, order=True)
class ErrorEffect:
    """The key of one error slot: its kind and its payload's types (JAX's ``ErrorEffect``)."""
    kind: str
    payload: tuple      # ((shape, dtype name), ...)


_DTYPES = {str(d): d for d in dt.ALL_DTYPES}      # an ErrorEffect's dtype names (orderable keys)


def _effect(kind: str, payload) -> ErrorEffect:
    return ErrorEffect(kind, tuple((tuple(a.shape), str(a.dtype)) for a in map(get_aval, payload)))


# ------------------------------------------------------------------- the error

_next_code = itertools.count(1).__next__    # codes are unique per process: the first check wins


@register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Error:
    """The error state: per ``ErrorEffect`` a failure flag, the failing code and its payload."""
    _pred: dict
    _code: dict
    _metadata: dict       # code -> ErrorMessage
    _payload: dict

    def get(self) -> str | None:
        """The message of the first failure, None if nothing failed."""
        exc = self.get_exception()
        return None if exc is None else str(exc)

    def get_exception(self) -> JaxException | None:
        """The first failure as an exception object, None if nothing failed."""
        if any(np.shape(v) for v in self._pred.values()):
            return self._batched_exception()
        return self._exception_at(())

    def throw(self):
        """Raise ``JaxRuntimeError`` with the message if something failed."""
        _check_error(self)

    def __str__(self):
        return f"Error({self.get()})"

    def _exception_at(self, idx) -> JaxException | None:
        """The failure with the smallest code at batch index ``idx`` (``()``: unbatched)."""
        effects = sorted(self._pred)
        found = first_failure([(self._pred[e], self._code[e], self._payload[e]) for e in effects],
                              self._metadata, idx)
        return None if found is None else _CATEGORIES[found[0]](found[1])

    def _batched_exception(self) -> JaxException | None:
        shape = np.shape(next(iter(self._pred.values())))
        found = {idx: exc for idx in np.ndindex(*shape) if (exc := self._exception_at(idx)) is not None}
        if not found:
            return None
        text = "\n".join(f"at mapped index {', '.join(map(str, idx))}: {exc}" for idx, exc in found.items())
        return next(iter(found.values())).__class__(text)

    def tree_flatten(self):
        return (self._pred, self._code, self._payload), tuple(sorted(self._metadata.items()))

    @classmethod
    def tree_unflatten(cls, metadata, children):
        pred, code, payload = children
        return cls(pred, code, dict(metadata), payload)


init_error = Error({}, {}, {}, {})


def _update(error: Error, effect: ErrorEffect, pred, code, payload, metadata) -> Error:
    """``error`` with one more possible failure of ``effect``; an earlier failure is kept."""
    old = error._pred.get(effect)
    if old is None:
        new_pred, new_code, new_payload = pred, code, list(payload)
    else:
        new_pred = jnp.logical_or(old, pred)
        new_code = jnp.where(old, error._code[effect], code)
        new_payload = [jnp.where(old, a, b) for a, b in zip(error._payload[effect], payload)]
    return Error({**error._pred, effect: new_pred}, {**error._code, effect: new_code},
                 {**error._metadata, **metadata}, {**error._payload, effect: new_payload})


def _assert(error: Error, pred, kind: str, template: str, payload=(), args="((), {})") -> Error:
    """``error`` updated with a new check site: it fails where ``pred`` is true. ``args``: the
    format arguments' structure over ``payload`` (``ErrorMessage.args``)."""
    code = _next_code()
    return _update(error, _effect(kind, payload), pred, np.int32(code), payload,
                   {code: ErrorMessage(kind, template, args)})


def _with_placeholders(error: Error, effects) -> Error:
    """``error`` with a never-failing slot for each of ``effects`` it lacks (loops and branches
    need one error type in and out)."""
    pred, code, payload = dict(error._pred), dict(error._code), dict(error._payload)
    for e in effects:
        if e not in pred:
            pred[e], code[e] = np.bool_(False), np.int32(-1)
            payload[e] = [np.ones(shape, _DTYPES[name]) for shape, name in e.payload]
    return Error(pred, code, error._metadata, payload)


# ------------------------------------------------------------- check equations

def _error_of_operands(args, kinds, payload_counts, codes, messages) -> Error:
    pred, code, payload = {}, {}, {}
    for kind, (failed, c, values) in zip(kinds, slots_of(args, payload_counts)):
        effect = _effect(kind, values)
        pred[effect], code[effect], payload[effect] = failed, c, values
    return Error(pred, code, dict(zip(codes, messages)), payload)


def _check_error(error: Error, *, debug: bool = False):
    """Bind ``check`` on the error's values (a batched error reduced to one failure first)."""
    effects = sorted(error._pred)
    slots = [(error._pred[e], error._code[e], error._payload[e]) for e in effects]
    if any(np.shape(get_aval(f)) for f, _, _ in slots):
        slots = reduce_batched(slots)
    codes = tuple(sorted(error._metadata))
    check_p.bind(*[v for f, c, p in slots for v in (f, c, *p)], kinds=tuple(e.kind for e in effects),
                 payload_counts=tuple(len(e.payload) for e in effects), codes=codes,
                 messages=tuple(error._metadata[c] for c in codes), debug=bool(debug))


# ------------------------------------------------------------------ user API

def _is_scalar_pred(pred) -> bool:
    if isinstance(pred, bool):      # as JAX: a NumPy bool is not taken
        return True
    return isinstance(pred, (Array, Tracer)) and get_aval(pred).shape == () and get_aval(pred).dtype == np.bool_


def _check(pred, msg, debug, fmt_args, fmt_kwargs):
    if not _is_scalar_pred(pred):
        raise TypeError(f"{'debug_check' if debug else 'check'} takes a scalar pred as argument, got {pred}")
    if not isinstance(msg, str):
        raise TypeError(f"check: msg must be a string, got {type(msg)}")
    payload = tree_leaves((fmt_args, fmt_kwargs))
    for arg in payload:
        if not isinstance(arg, (Array, Tracer, np.ndarray)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of arrays, but got "
                            f"{arg!r} of type {type(arg)}.")
    try:
        args = arg_structure((fmt_args, fmt_kwargs))
    except ValueError as e:      # the IR writes the structure as text: builtin containers only
        raise TypeError(f"checkify.check: {e}") from None
    error = _assert(init_error, jnp.logical_not(pred), "FailedCheckError", msg, payload, args)
    _check_error(error, debug=debug)


def check(pred, msg: str, *fmt_args, debug: bool = False, **fmt_kwargs) -> None:
    """Add an error with message ``msg`` (a format string over ``fmt_args``/``fmt_kwargs``)
    if ``pred`` is False. Raises where it runs, unless functionalized by ``checkify``."""
    _check(pred, msg, debug, fmt_args, fmt_kwargs)


def debug_check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """``check`` that does nothing unless ``checkify`` transforms it."""
    _check(pred, msg, True, fmt_args, fmt_kwargs)


def check_error(error: Error) -> None:
    """Raise if ``error`` holds a failure; ``checkify`` functionalizes it back into an error."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} instead.")
    _check_error(error, debug=False)


# ------------------------------------------------------------- the transformation

def checkify(f, errors=user_checks):
    """``f`` returning ``(error, out)``: its ``check``s, and the automatic checks named by
    ``errors`` (``nan_checks``, ``index_checks``, ``div_checks``, ...), become an ``Error``."""
    errors = frozenset(errors)

    def checked_fun(*args, **kwargs):
        leaves, in_tree = tree_flatten((args, kwargs))
        # Array arguments are the program's inputs (a Python int index stays an operand, so its
        # gather is checked), with their values known where they are concrete: Python may still
        # branch on them, as on JAX's closed-over arguments. Other leaves are passed as they are.
        traced = [i for i, x in enumerate(leaves) if _is_array(x)]
        store = []

        def flat_f(*xs):
            given = dict(zip(traced, xs))
            a, kw = tree_unflatten(in_tree, [given.get(i, x) for i, x in enumerate(leaves)])
            outs, tree = tree_flatten(f(*a, **kw))
            store.append(tree)
            return outs
        inputs = [leaves[i] for i in traced]
        known = [None if isinstance(x, Tracer) else x for x in inputs]
        closed = trace_to_jaxpr(flat_f, [get_aval(x) for x in inputs], name="checkify", concrete_args=known)
        error, outs = _checkify_jaxpr(closed.jaxpr, closed.consts, errors, init_error, inputs)
        return error, tree_unflatten(store[0], outs)
    return checked_fun


def _is_array(x) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


def _value(x):
    """An operand as a value the rules compute with (a literal's value)."""
    return x.val if type(x) is Literal else x


def _checkify_jaxpr(jaxpr, consts, enabled, error: Error, args):
    """Evaluate ``jaxpr`` in the current context with ``error`` threaded through."""
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    read = lambda a: a if type(a) is Literal else env[a]
    for eqn in jaxpr.eqns:
        operands = [read(v) for v in eqn.invars]
        rule = _RULES.get(eqn.primitive, _default_rule)
        with source_info_of(eqn.source_info):
            error, outs = rule(error, enabled, eqn, operands)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        env.update(zip(eqn.outvars, outs))
    return error, [_value(a) if type(a) is Literal else env[a] for a in jaxpr.outvars]


def _default_rule(error, enabled, eqn, operands):
    if any(Effect.check in jaxpr_effects(sub) for sub in subjaxprs(eqn)):
        raise NotImplementedError(f"checkify: checks inside '{eqn.primitive.name}' are not supported")
    return error, eqn.primitive.bind(*operands, **eqn.params)


def _runner(cj: ClosedJaxpr, enabled):
    return lambda err, args: _checkify_jaxpr(cj.jaxpr, cj.consts, enabled, err, args)


def _checked(run, error: Error, arg_avals, err_at: int = 0, trace=None):
    """Trace ``run(error, args) -> (error, outs)`` into a ClosedJaxpr without consts taking
    (hoisted consts, args with the error's values inserted at ``err_at``) and returning
    (error values, outs). Returns it, the hoisted consts and the output error's tree.
    ``trace(fun, avals)``: how to trace it (default ``trace_to_jaxpr``)."""
    err_leaves, err_tree = tree_flatten(error)
    n = len(err_leaves)
    out_tree = []

    def fun(*xs):
        err = tree_unflatten(err_tree, xs[err_at:err_at + n])
        err, outs = run(err, [*xs[:err_at], *xs[err_at + n:]])
        leaves, tree = tree_flatten(err)
        out_tree.append(tree)
        return [*leaves, *outs]
    avals = list(arg_avals)
    avals[err_at:err_at] = map(get_aval, err_leaves)
    traced = trace_to_jaxpr(fun, avals, name="checkify") if trace is None else trace(fun, avals)
    checked, consts = close_over_consts(traced)
    return checked, consts, out_tree[0]


def _error_skeleton(tree) -> Error:
    return tree_unflatten(tree, [None] * tree.num_leaves)


def _out_effects(tree) -> set:
    return set(_error_skeleton(tree)._pred)


def _split_error(tree, outs):
    n = tree.num_leaves
    return tree_unflatten(tree, outs[:n]), list(outs[n:])


# ---------------------------------------------------------- automatic checks

def _nan_rule(error, enabled, eqn, operands):
    out = eqn.primitive.bind(*operands, **eqn.params)
    return _check_nans(error, enabled, eqn.primitive.name, out if eqn.primitive.multiple_results else [out]), out


def _check_nans(error, enabled, name, outs):
    if NaNError not in enabled:
        return error
    floats = [x for x in outs if dt.is_float(get_aval(x).dtype) or dt.is_complex(get_aval(x).dtype)]
    if not floats:
        return error
    any_nan = jnp.any(jnp.array([jnp.any(jnp.isnan(x)) for x in floats])) if len(floats) > 1 \
        else jnp.any(jnp.isnan(floats[0]))
    return _assert(error, any_nan, "NaNError", f"nan generated by primitive: {name}.")


def _div_rule(error, enabled, eqn, operands):
    if DivisionByZeroError in enabled:
        error = _assert(error, jnp.any(jnp.equal(_value(operands[1]), 0)), "DivisionByZeroError",
                        "division by zero")
    return _nan_rule(error, enabled, eqn, operands)


def _oob_template(shape) -> str:
    return (f"out-of-bounds indexing for array of shape {tuple(shape)}: index {{0[0]}} is out of "
            f"bounds for axis {{0[1]}} with size {{0[2]}}. ")


_ONE_ARRAY = "((0,), {})"      # the structure of an index error's payload


def _oob_payload(mask, indices, dims_map, operand_shape):
    """[index, axis, axis size] of the first out-of-bounds index (JAX's payload)."""
    flat = jnp.argmin(jnp.logical_not(mask))
    last = jnp.unravel_index(flat, mask.shape)[-1] if mask.ndim else 0
    axis = jnp.array(np.asarray(dims_map, np.int32))[last] if len(dims_map) else np.int32(0)
    size = jnp.array(np.asarray(operand_shape, np.int32))[axis] if len(operand_shape) else np.int32(0)
    index = jnp.ravel(indices)[flat]
    return jnp.array([index, axis, size], dtype=np.int32)


def _oob_assert(error, mask, indices, dims_map, operand_shape):
    payload = _oob_payload(mask, indices, dims_map, operand_shape)
    return _assert(error, jnp.any(mask), "OOBError", _oob_template(operand_shape), [payload], _ONE_ARRAY)


def _dynamic_slice_rule(error, enabled, eqn, operands):
    out = eqn.primitive.bind(*operands, **eqn.params)
    if OOBError in enabled and len(operands) > 1:
        shape = get_aval(_value(operands[0])).shape
        starts = jnp.stack([jnp.asarray(_value(i)) for i in operands[1:]])
        mask = (starts < 0) | (starts + np.asarray(eqn.params["slice_sizes"], starts.dtype)
                               > np.asarray(shape, starts.dtype))
        error = _oob_assert(error, mask, starts, range(len(shape)), shape)
    return error, out


def _dynamic_update_slice_rule(error, enabled, eqn, operands):
    out = eqn.primitive.bind(*operands, **eqn.params)
    if OOBError in enabled and len(operands) > 2:
        shape, update = get_aval(_value(operands[0])).shape, get_aval(_value(operands[1])).shape
        starts = jnp.stack([jnp.asarray(_value(i)) for i in operands[2:]])
        mask = (starts < 0) | (starts + np.asarray(update, starts.dtype) > np.asarray(shape, starts.dtype))
        error = _oob_assert(error, mask, starts, range(len(shape)), shape)
    return error, out


def _gather_rule(error, enabled, eqn, operands):
    out = eqn.primitive.bind(*operands, **eqn.params)
    if OOBError in enabled:
        shape = get_aval(_value(operands[0])).shape
        indices = jnp.asarray(_value(operands[1]))
        dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
        index_map = list(dn.start_index_map)
        upper = np.asarray([shape[d] - sizes[d] for d in index_map], np.int64)
        mask = (indices < 0) | (indices > upper.astype(indices.dtype))
        error = _oob_assert(error, mask, indices, index_map, shape)
    return error, out


def _scatter_rule(error, enabled, eqn, operands):
    out = eqn.primitive.bind(*operands, **eqn.params)
    if OOBError in enabled:
        operand, indices, updates = (get_aval(_value(x)) for x in operands)
        idx = jnp.asarray(_value(operands[1]))
        dn = eqn.params["dimension_numbers"]
        window = iter(dn.update_window_dims)
        sizes = [1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
                 else updates.shape[next(window)] for d in range(operand.ndim)]
        upper = np.asarray([operand.shape[d] - sizes[d] for d in dn.scatter_dims_to_operand_dims], np.int64)
        upper = np.minimum(upper, np.iinfo(indices.dtype).max).astype(indices.dtype)
        mask = (idx < 0) | (idx > upper)
        error = _oob_assert(error, mask, idx, dn.scatter_dims_to_operand_dims, operand.shape)
    return error, out


def _scatter_nan_rule(error, enabled, eqn, operands):
    error, out = _scatter_rule(error, enabled, eqn, operands)
    if OOBError in enabled:      # as JAX: a scatter's NaN check comes with its index check only
        error = _check_nans(error, enabled, eqn.primitive.name, [out])
    return error, out


# ------------------------------------------------------------- user checks

def _check_rule(error, enabled, eqn, operands):
    """A ``check`` equation merges into the error (its kinds that ``enabled`` names)."""
    params = {k: v for k, v in eqn.params.items() if k != "debug"}
    new = _error_of_operands([_value(x) for x in operands], **params)
    for e in sorted(new._pred):
        if _CATEGORIES[e.kind] in enabled:
            error = _update(error, e, new._pred[e], new._code[e], new._payload[e], {})
    return dataclasses.replace(error, _metadata={**new._metadata, **error._metadata}), []


# ---------------------------------------------------------- calls and control flow

def _with_invars(cj: ClosedJaxpr, before=(), after_consts=(), n_consts=0) -> ClosedJaxpr:
    """``cj`` (no consts) taking unused inputs of avals ``before`` first, and ``after_consts``
    after its own first ``n_consts`` inputs."""
    j = cj.jaxpr
    invars = [*map(Var, before), *j.invars[:n_consts], *map(Var, after_consts), *j.invars[n_consts:]]
    return ClosedJaxpr(Jaxpr([], invars, j.outvars, j.eqns), [])


def _call_rule(error, enabled, eqn, operands):
    """``jit`` and ``checkpoint``: the callee takes and returns the error's values."""
    callee = eqn.params["jaxpr"]
    checked, consts, tree = _checked(_runner(callee, enabled), error, callee.in_avals)
    outs = eqn.primitive.bind(*consts, *tree_leaves(error), *operands, **{**eqn.params, "jaxpr": checked})
    return _split_error(tree, outs)


def _merged_metadata(error: Error, trees) -> Error:
    metadata = dict(error._metadata)
    for tree in trees:
        metadata.update(_error_skeleton(tree)._metadata)
    return dataclasses.replace(error, _metadata=metadata)


def _cond_rule(error, enabled, eqn, operands):
    """Every branch takes and returns the error with every branch's slots."""
    index, ops = operands[0], operands[1:]
    branches = eqn.params["branches"]
    trace = lambda b, err: _checked(_runner(b, enabled), err, b.in_avals)
    effects = set().union(*(_out_effects(trace(b, error)[2]) for b in branches))
    error = _with_placeholders(error, effects)
    traced = [trace(b, error) for b in branches]
    all_consts = [c for _, cs, _ in traced for c in cs]
    const_avals = [get_aval(c) for c in all_consts]
    new_branches, at = [], 0
    for checked, cs, _ in traced:     # every branch takes all the branches' consts, first
        new_branches.append(_with_invars(checked, const_avals[:at], const_avals[at + len(cs):], len(cs)))
        at += len(cs)
    outs = cond_p.bind(index, *all_consts, *tree_leaves(error), *ops, branches=tuple(new_branches))
    err, outs = _split_error(traced[0][2], outs)
    return _merged_metadata(err, [t for _, _, t in traced]), outs


def _fixed_error(error, trace):
    """The error with placeholders for every slot ``trace(error)`` adds, and that trace redone
    with it, so the error's type is the same in and out (a loop's carry)."""
    error = _with_placeholders(error, _out_effects(trace(error)[2]))
    return error, trace(error)


def _scan_rule(error, enabled, eqn, operands):
    """The error is carried, after the consts: the body is (consts, error, carry, x) ->
    (error, carry, y)."""
    p = eqn.params
    nc, ncarry = p["num_consts"], p["num_carry"]
    consts, carry, xs = operands[:nc], operands[nc:nc + ncarry], operands[nc + ncarry:]
    body = p["jaxpr"]
    trace = lambda err: _checked(_runner(body, enabled), err, body.in_avals, err_at=nc)
    error, (checked, hoisted, tree) = _fixed_error(error, trace)
    n_err = len(tree_leaves(error))
    outs = scan_p.bind(*hoisted, *consts, *tree_leaves(error), *carry, *xs,
                       **{**p, "jaxpr": checked, "num_consts": len(hoisted) + nc,
                          "num_carry": n_err + ncarry,
                          "linear": (False,) * (len(hoisted) + nc + n_err) + tuple(p["linear"][nc:])})
    return _split_error(tree, outs)


def _while_rule(error, enabled, eqn, operands):
    p = eqn.params
    loop = per_member_loop(p["cond_jaxpr"])
    if loop is not None:
        return _per_member_while(error, enabled, loop, p["cond_nconsts"], operands)
    return _checked_while(error, enabled, p["cond_jaxpr"], p["body_jaxpr"], p["cond_nconsts"],
                          p["body_nconsts"], operands)


def _per_member_while(error, enabled, loop, ncc: int, operands):
    """A while made by vmap for members that stop at different steps runs its body for finished
    members too: the unbatched loop is checked and batched instead (each member's error is
    carried, so it stops with the member), and the members' errors reduced as a batched check."""
    carry = operands[len(operands) - (len(loop.cond_jaxpr.in_avals) - ncc):]
    nbc = len(loop.body_jaxpr.in_avals) - len(carry)
    args = [*operands[:ncc], *operands[2 * ncc:2 * ncc + nbc], *carry]    # its body got the cond consts twice
    run = lambda err, xs: _checked_while(err, enabled, loop.cond_jaxpr, loop.body_jaxpr, ncc, nbc, xs)  # noqa: E731
    checked, hoisted, tree = _checked(run, init_error, [*loop.cond_jaxpr.in_avals[:ncc], *loop.body_jaxpr.in_avals])
    outs, dims = batch_eval(checked.jaxpr, [], [*hoisted, *args],
                            [*[None] * len(hoisted), *loop.cond_dims, *loop.body_dims, *[0] * len(carry)])
    size = get_aval(carry[0]).shape[0]
    member_err, outs = _split_error(tree, [matchaxis(x, d, 0, size) for x, d in zip(outs, dims)])
    for e in sorted(member_err._pred):
        (failed, code, payload), = reduce_batched([(member_err._pred[e], member_err._code[e], member_err._payload[e])])
        error = _update(error, e, failed, code, payload, {})
    return dataclasses.replace(error, _metadata={**member_err._metadata, **error._metadata}), outs


def _checked_while(error, enabled, cond, body, ncc: int, nbc: int, operands):
    """The cond is checked once before the loop and after each body (in the body); the body
    carries the error: (cond consts, body consts, error, carry) -> (error, carry)."""
    cconsts, bconsts, carry = operands[:ncc], operands[ncc:ncc + nbc], operands[ncc + nbc:]
    error, _ = _checkify_jaxpr(cond.jaxpr, cond.consts, enabled, error, [*cconsts, *carry])

    def body_then_cond(err, args):
        cc, bc, c = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        err, out = _checkify_jaxpr(body.jaxpr, body.consts, enabled, err, [*bc, *c])
        err, _ = _checkify_jaxpr(cond.jaxpr, cond.consts, enabled, err, [*cc, *out])
        return err, out
    body_avals = [*cond.in_avals[:ncc], *body.in_avals]
    trace = lambda err: _checked(body_then_cond, err, body_avals, err_at=ncc + nbc)
    error, (checked_body, bhoisted, tree) = _fixed_error(error, trace)
    n_err = tree.num_leaves

    def cond_only(err, args):     # the loop's predicate; its checks ran in the body already
        return err, _checkify_jaxpr(cond.jaxpr, cond.consts, enabled, err, args)[1]
    checked_cond, choisted, _ = _checked(cond_only, error, cond.in_avals, err_at=ncc)
    checked_cond = ClosedJaxpr(Jaxpr([], checked_cond.jaxpr.invars, checked_cond.jaxpr.outvars[n_err:],
                                     checked_cond.jaxpr.eqns), [])
    outs = while_p.bind(*choisted, *cconsts, *bhoisted, *cconsts, *bconsts, *tree_leaves(error), *carry,
                        cond_jaxpr=checked_cond, body_jaxpr=checked_body,
                        cond_nconsts=len(choisted) + ncc, body_nconsts=len(bhoisted) + ncc + nbc)
    return _split_error(tree, outs)


def _checks_nothing(fun: ClosedJaxpr, error: Error, tree) -> bool:
    """Whether a custom function, checked into an error of ``tree``, can be kept as it is."""
    return _error_skeleton(tree)._metadata == error._metadata and Effect.check not in jaxpr_effects(fun.jaxpr)


def _checked_custom(error, enabled, eqn):
    """A custom call's function checked, for a call that takes and returns the error's values
    (arguments, after the consts): (error with its slots, the function, hoisted consts, output
    error tree); None when the call checks nothing and stays as it is."""
    fun, nc = eqn.params["fun_jaxpr"], eqn.params["num_consts"]
    trace = lambda err: _checked(_runner(fun, enabled), err, fun.in_avals, err_at=nc)
    if _checks_nothing(fun, error, trace(error)[2]):
        return None
    error, (checked, hoisted, tree) = _fixed_error(error, trace)
    j, h = checked.jaxpr, len(hoisted)      # inputs: hoisted, consts, error, args -> consts, hoisted, ...
    new_fun = ClosedJaxpr(Jaxpr([], [*j.invars[h:h + nc], *j.invars[:h], *j.invars[h + nc:]], j.outvars, j.eqns), [])
    return error, new_fun, hoisted, tree


def _unchecked(r: ClosedJaxpr, args):
    """A custom rule evaluated with the checks it contains removed (it is not checked, as JAX's)."""
    return _checkify_jaxpr(r.jaxpr, r.consts, frozenset(), init_error, args)[1]


def _custom_jvp_rule(error, enabled, eqn, operands):
    """A custom_jvp call stays one, its function checked; its rule forwards the error it is
    given, as JAX's (a derivative does not check again)."""
    p = eqn.params
    found = _checked_custom(error, enabled, eqn)
    if found is None:
        return error, eqn.primitive.bind(*operands, **p)
    error, new_fun, hoisted, tree = found
    fun, nc, rule = p["fun_jaxpr"], p["num_consts"], p["jvp_jaxpr_thunk"]
    err_leaves = tree_leaves(error)
    err_avals, arg_avals = [get_aval(x) for x in err_leaves], fun.in_avals[nc:]
    n_out = len(fun.out_avals)

    def forwarding_rule():     # (rule consts, error, args, error tangents, arg tangents)
        r = rule()
        n_args = len(arg_avals)
        k = rule_const_count(r, n_args + sum(map(is_differentiable, arg_avals)))
        err_tangents = [a for a in err_avals if is_differentiable(a)]
        n_err, n_et = len(err_avals), len(err_tangents)

        def lifted(*xs):
            consts, err, args, ts = xs[:k], xs[k:k + n_err], xs[k + n_err:k + n_err + n_args], xs[k + n_err + n_args:]
            outs = _unchecked(r, [*consts, *args, *ts[n_et:]])
            return [*err, *outs[:n_out], *ts[:n_et], *outs[n_out:]]
        avals = [*r.in_avals[:k], *err_avals, *arg_avals, *err_tangents, *r.in_avals[k + n_args:]]
        return trace_to_jaxpr(lifted, avals, name="checkify")
    outs = eqn.primitive.bind(*operands[:nc], *hoisted, *err_leaves, *operands[nc:], fun_jaxpr=new_fun,
                              jvp_jaxpr_thunk=Thunk(forwarding_rule, name=rule.name), num_consts=nc + len(hoisted),
                              symbolic_zeros=p["symbolic_zeros"])
    return _split_error(tree, outs)


class _ErrorBwd(Thunk):
    """A custom_vjp ``bwd`` for a call that also takes and returns the error: it drops the
    error's cotangents and gives the error's inputs zero ones. ``call`` (residuals, error
    cotangents, output cotangents) runs the original; as a thunk it is that call's jaxpr."""

    def __init__(self, bwd: Thunk, err_avals, n_out_cts: int):
        super().__init__(self._trace, bwd.name)
        self.bwd, self.n_out_cts = bwd, n_out_cts
        self.err_avals = [a for a in err_avals if is_differentiable(a)]
        self.runs_on_values = getattr(bwd, "runs_on_values", False)

    def call(self, *args):
        n_res = len(args) - len(self.err_avals) - self.n_out_cts
        res, cts = args[:n_res], args[n_res + len(self.err_avals):]
        call = getattr(self.bwd, "call", None)
        if call is not None:
            arg_cts = list(call(*res, *cts))
        else:
            j = self.bwd()
            arg_cts = eval_jaxpr(j.jaxpr, j.consts, *res, *map(instantiate_zeros, cts))
        return [*map(Zero, self.err_avals), *arg_cts]

    def _trace(self) -> ClosedJaxpr:
        in_avals = self.bwd().in_avals
        n_res = len(in_avals) - self.n_out_cts
        avals = [*in_avals[:n_res], *self.err_avals, *in_avals[n_res:]]
        return trace_to_jaxpr(lambda *a: list(map(instantiate_zeros, self.call(*a))), avals, name=self.name)


def _custom_vjp_rule(error, enabled, eqn, operands):
    """A custom_vjp call stays one, its function checked; its fwd forwards the error it is
    given and its bwd gives the error no cotangent, as JAX's."""
    p = eqn.params
    found = _checked_custom(error, enabled, eqn)
    if found is None:
        return error, eqn.primitive.bind(*operands, **p)
    error, new_fun, hoisted, tree = found
    fun, nc, fwd = p["fun_jaxpr"], p["num_consts"], p["fwd_jaxpr_thunk"]
    err_leaves = tree_leaves(error)
    err_avals, arg_avals = [get_aval(x) for x in err_leaves], fun.in_avals[nc:]

    def forwarding_fwd():      # (fwd consts, error, args) -> (error, outs, residuals)
        r = fwd()
        k = rule_const_count(r, len(arg_avals))
        n_err = len(err_avals)
        lifted = lambda *xs: [*xs[k:k + n_err], *_unchecked(r, [*xs[:k], *xs[k + n_err:]])]  # noqa: E731
        return trace_to_jaxpr(lifted, [*r.in_avals[:k], *err_avals, *arg_avals], name="checkify")
    n_out_cts = sum(map(is_differentiable, fun.out_avals))
    outs = eqn.primitive.bind(*operands[:nc], *hoisted, *err_leaves, *operands[nc:], fun_jaxpr=new_fun,
                              fwd_jaxpr_thunk=Thunk(forwarding_fwd, name=fwd.name),
                              bwd=_ErrorBwd(p["bwd"], err_avals, n_out_cts), num_consts=nc + len(hoisted),
                              out_trees=p["out_trees"], symbolic_zeros=p["symbolic_zeros"])
    return _split_error(tree, outs)


def _shard_map_rule(error, enabled, eqn, operands):
    """As JAX's: the body takes the error replicated and gives each device's error, stacked
    along a new leading axis over every mesh axis (the error is then batched: ``Error.get``
    reports each failing device's index)."""
    p = eqn.params
    body, axes = p["jaxpr"], tuple(p["manual_axes"])
    sizes = _manual_sizes(p["mesh"], axes)

    def run(err, args):
        err, outs = _checkify_jaxpr(body.jaxpr, body.consts, enabled, err, args)
        return tree_map(lambda x: jnp.expand_dims(x, 0), err), outs
    checked, hoisted, tree = _checked(run, error, body.in_avals,
                                      trace=lambda fun, avals: _trace_body(fun, avals, sizes))
    if _error_skeleton(tree)._metadata == error._metadata:
        return error, eqn.primitive.bind(*operands, **p)
    err_leaves = tree_leaves(error)
    stacked = tuple((axes, *(() for _ in a.shape[1:])) for a in checked.out_avals[:tree.num_leaves])
    outs = eqn.primitive.bind(*hoisted, *err_leaves, *operands, jaxpr=checked, mesh=p["mesh"],
                              in_specs=_replicated([*hoisted, *err_leaves]) + tuple(p["in_specs"]),
                              out_specs=stacked + tuple(p["out_specs"]), manual_axes=p["manual_axes"])
    return _split_error(tree, outs)


_NAN_PRIMITIVES = (
    "acos acosh add asin asinh atan2 atan atanh bessel_i0e bessel_i1e cbrt conv_general_dilated cos cosh "
    "cumlogsumexp cummax cummin cumprod cumsum digamma dot_general erf_inv erf erfc exp expm1 fft "
    "igamma_grad_a igamma igammac integer_pow lgamma custom_linear_solve log1p log logistic mul pad pow "
    "psum reduce reduce_prod reduce_sum reduce_window reduce_window_sum regularized_incomplete_beta rem "
    "rng_uniform rsqrt sin sinh sqrt sub tan tanh").split()


def _rules() -> dict:
    from jaxprc.ir.core import PRIMITIVES
    rules = {PRIMITIVES[n]: _nan_rule for n in _NAN_PRIMITIVES if n in PRIMITIVES}
    rules[PRIMITIVES["div"]] = _div_rule
    rules[PRIMITIVES["dynamic_slice"]] = _dynamic_slice_rule
    rules[PRIMITIVES["dynamic_update_slice"]] = _dynamic_update_slice_rule
    rules[PRIMITIVES["gather"]] = _gather_rule
    for n in ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"):
        rules[PRIMITIVES[n]] = _scatter_nan_rule
    rules.update({check_p: _check_rule, jit_p: _call_rule, checkpoint_p: _call_rule, cond_p: _cond_rule,
                  scan_p: _scan_rule, while_p: _while_rule, custom_jvp_call_jaxpr_p: _custom_jvp_rule,
                  custom_vjp_call_jaxpr_p: _custom_vjp_rule, shard_map_p: _shard_map_rule})
    return rules


_RULES = _rules()
