"""Loops: the ``while`` and ``scan`` primitives, and ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Bodies are traced once, on abstract values, into sub-jaxprs (``trace_to_jaxpr``
on flattened pytrees). Whatever a body closes over (arrays, tracers of
enclosing traces) becomes a const of its jaxpr and is then hoisted into the
primitive's leading operands (``close_over_consts``), so the primitives hold
ClosedJaxprs without consts. Outside any trace, binding the primitive runs it
eagerly (its impl).

Loop carries must keep their type. A weakly typed initial carry (a Python
scalar such as ``0.0``) whose body output differs from it is converted to the
joined (strong) type and the body traced again. JAX's
``_promote_weak_typed_input`` does this when the dtypes differ; we also do it
when only the weak bit differs (``~f32`` in, ``f32`` out), so the carry types
of the loops we build are exactly equal. The results' types are JAX's either
way. Remaining mismatches are errors that list both types per leaf with its
pytree path.
"""
from __future__ import annotations

import functools
import inspect
import operator
import weakref
from typing import Callable, NamedTuple

import numpy as np
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters import partial_eval as pe
from jaxprc.ir import dtypes as dt
from jaxprc.ir import sharding_type
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprTypeError, Literal, Primitive, ShapedArray, Var
from jaxprc.ir.effects import Effect, has_ordered_effects, jaxpr_effects
from jaxprc.ir.params import Bool, ClosedJaxprParam, Int, Size, Tuple
from jaxprc.ir.shape_poly import DimExpr, non_negative_dim
from jaxprc.engine import dynamic_shapes
from jaxprc.engine.evaluate import evaluate_jaxpr
from jaxprc.ir.tracing import ConcretizationTypeError, Tracer, close_over_consts, get_aval, trace_to_jaxpr
from jaxprc.passes.canonicalize import CANONICALIZE
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.patterns import Pat, bind, pattern
from jaxprc.passes.jet import jet_jaxpr
from jaxprc.passes.jvp import Zero, add_tangents, aval_of, instantiate_zeros, jvp_jaxpr, tangent_aval, zeros
from jaxprc.passes.partial_eval import partial_eval_jaxpr
from jaxprc.passes.transpose import UndefinedPrimal, backward_pass, is_undefined_primal
from jaxprc.passes.vmap import (align, axis_size_of, batch_eval, batch_jaxpr, batched_aval, matchaxis, moveaxis,
                                unbatched_aval)
from jaxprc.engine.traceback_filtering import api_boundary

from . import ref_threading as _ref
from .common import (_convert, _flatten, _front_dims, _fun_name, _leaf_aval, _new_vars, _nonzero_tangents,
                     _pick, _split_outs, _trace, check_count, check_operand_types, check_subjaxpr, fmt_types)
from .common import _flat_series, _series_chunks
from .common import (as_array, differences, forwarded_inputs, inputs_to_front, jax_type, joined_vma, keep_outputs,
                     merge, mismatch_extra, same_type, vma_hints)
from ..remat import remat_split, remat_split_rules

__all__ = ["while_p", "scan_p", "while_loop", "fori_loop", "scan", "map"]


# ---------------------------------------------------------------- primitives

while_p = Primitive("while")
while_p.multiple_results = True
while_p.def_params(cond_jaxpr=ClosedJaxprParam(), body_jaxpr=ClosedJaxprParam(), cond_nconsts=Int(min=0),
                   body_nconsts=Int(min=0))


@while_p.def_abstract_eval
def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    check_subjaxpr("while", "cond_jaxpr", cond_jaxpr)
    check_subjaxpr("while", "body_jaxpr", body_jaxpr)
    check_count("while", "cond_nconsts", cond_nconsts, len(avals))
    check_count("while", "body_nconsts", body_nconsts, len(avals) - cond_nconsts)
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
    return joined_vma(body_jaxpr.out_avals, body_jaxpr.in_avals[body_nconsts:], extra=pred[0].vma)


scan_p = Primitive("scan")
scan_p.multiple_results = True
scan_p.def_params(jaxpr=ClosedJaxprParam(), length=Size(min=0), reverse=Bool(), unroll=Int(min=0),
                  num_consts=Int(min=0), num_carry=Int(min=0), linear=Tuple(Bool()))


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    check_subjaxpr("scan", "jaxpr", jaxpr)
    if type(length) not in (int, DimExpr) or length < 0:
        raise JaxprTypeError(f"scan: param length must be a non-negative int, got {length!r}")
    if type(reverse) is not bool:
        raise JaxprTypeError(f"scan: param reverse must be a bool, got {reverse!r}")
    if type(unroll) is not int or unroll < 0:
        raise JaxprTypeError(f"scan: param unroll must be a non-negative int, got {unroll!r}")
    check_count("scan", "num_consts", num_consts, len(avals))
    check_count("scan", "num_carry", num_carry, len(avals) - num_consts)
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
    carry_out = joined_vma(carry_out, jaxpr.in_avals[num_consts:num_consts + num_carry])
    stacked = [y.update(shape=(length, *y.shape), sharding=sharding_type.with_dims(y, ((),) + sharding_type.dims(y)))
               for y in ys]        # the stacking dimension is whole on each device
    return [*carry_out, *stacked]


# ------------------------------------------------------------------ carries

def _param_name(fun, position: int) -> str:
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    return params[position] if position < len(params) else "carry"


class _Body(NamedTuple):
    """A loop body as the user wrote it, for error messages.

    fori_loop's loops run a wrapper whose carry is a tuple holding the user's carry as element
    ``index`` (next to the counter); errors then name the user's function and the paths inside
    the user's own carry, not the wrapper's.
    """
    api: str                    # "while_loop", "scan", "fori_loop"
    arg: str                    # the parameter that took the function: "body_fun", "f"
    fun: Callable
    carry_position: int         # which of fun's parameters is the carry
    index: int | None = None    # the user's carry within the loop's carry tuple; None: all of it

    def __str__(self) -> str:
        return f"{self.api} {self.arg} ({_fun_name(self.fun)})"

    def carry_name(self) -> str:
        return _param_name(self.fun, self.carry_position)

    def user_tree(self, treedef):
        return treedef if self.index is None else treedef.children()[self.index]

    def user_path(self, path):
        """The path of a loop-carry leaf inside the user's carry; None for the wrapper's own."""
        if self.index is None:
            return path
        return path[1:] if path[0].idx == self.index else None


def _carry_component(name: str, path: str) -> str:
    return f"the input carry component {name}{path}" if path else f"the input carry {name}"


def _check_carry_tree(body: _Body, in_tree, out_tree) -> None:
    in_tree, out_tree = body.user_tree(in_tree), body.user_tree(out_tree)
    if in_tree != out_tree:
        diffs = [f"{_carry_component(body.carry_name(), p)} is a {seen} but the corresponding component of "
                 f"the carry output is a {given}, so {why}"
                 for p, seen, given, why in tu.equality_errors(tu.tree_unflatten(in_tree, [0] * in_tree.num_leaves),
                                                               tu.tree_unflatten(out_tree, [0] * out_tree.num_leaves))]
        raise TypeError(
            f"{body.api} body function carry input and carry output must have the same pytree structure, "
            f"but they differ:\n\n{differences(diffs)}\nRevise the function so that the carry output has the "
            "same pytree structure as the carry input.")


def _check_carry_types(body: _Body, paths, in_avals, out_avals) -> None:
    """Each output carry leaf must have its input's shape and dtype (weak bits aside) and vary
    over no manual axis its input does not (shard_map's check_vma)."""
    name = body.carry_name()
    diffs, hints = [], []
    for p, a, b in zip([body.user_path(p) for p in paths], in_avals, out_avals):
        if p is None or (same_type(a, b) and b.vma <= a.vma):
            continue
        component = _carry_component(name, tu.keystr(p))
        diffs.append(f"{component} has type {jax_type(a)} but the corresponding output carry component has "
                     f"type {jax_type(b)}{mismatch_extra(a, b)}")
        if same_type(a, b):
            hints.append(f"applying `jax.lax.pcast(..., {tuple(sorted(b.vma - a.vma))}, to='varying')`, to the "
                         f"initial carry value corresponding to {component}")
    if diffs:
        raise TypeError(
            f"{body.api} body function carry input and carry output must have equal types, but they "
            f"differ:\n\n{differences(diffs)}\n{vma_hints(hints) + chr(10) if hints else ''}Revise the "
            "function so that all output types match the corresponding input types.")


def _promote_weak_carry(leaves, in_avals, out_avals):
    """Convert weakly typed initial carries to the type joined with the body's output.

    Returns the new leaves and whether any changed (then the body is traced again).
    """
    new, changed = list(leaves), False
    for i, (x, a, b) in enumerate(zip(leaves, in_avals, out_avals)):
        if a.weak_type and a.shape == b.shape and (a.dtype != b.dtype or not b.weak_type):
            dtype, _ = dt.promote_types((a.dtype, True), (b.dtype, b.weak_type))
            new[i], changed = _convert(x, dtype), True
    return new, changed


def _avals(leaves, paths, what):
    return [_leaf_aval(x, what, p) for x, p in zip(leaves, paths)]


# -------------------------------------------------------------- while_loop

@api_boundary
def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val)``, traced once."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    def run(refs):
        if not refs:
            return _while_loop(cond_fun, body_fun, init_val, _Body("while_loop", "body_fun", body_fun, 0))

        def cond_with_refs(state):
            _ref.enter_body(refs, state[1])
            pred = cond_fun(state[0])
            if any(a is not b for a, b in zip(_ref.body_values(refs), state[1])):
                raise _ref.RefEscapeError("lax.while_loop: cond_fun writes a ref; only body_fun may")
            return pred

        def body_with_refs(state):
            _ref.enter_body(refs, state[1])
            return body_fun(state[0]), _ref.body_values(refs)
        out, finals = _while_loop(cond_with_refs, body_with_refs, (init_val, _ref.initial_values(refs)),
                                  _Body("while_loop", "body_fun", body_fun, 0, index=0))
        _ref.settle(refs, finals)
        return out
    return _ref.thread_through_bodies(run)


def _while_loop(cond_fun: Callable, body_fun: Callable, init_val, body: _Body):
    leaves, in_tree, avals, paths = _flatten(init_val, "while_loop init_val")

    def trace_loop(avals):
        cond_cj, cond_tree = _trace(cond_fun, in_tree, avals,
                                    f"while_loop cond_fun ({_fun_name(cond_fun)})")
        pred = cond_cj.out_avals
        if cond_tree.num_leaves != 1 or not tu.treedef_is_leaf(cond_tree) or \
                pred[0].shape != () or pred[0].dtype != dt.bool_:
            got = (f"pytree {cond_tree}" if not tu.treedef_is_leaf(cond_tree) else
                   f"output type(s) [{', '.join(f'ShapedArray({jax_type(a)})' for a in pred)}]")
            raise TypeError(f"cond_fun must return a boolean scalar, but got {got}.")
        body_cj, body_tree = _trace(body_fun, in_tree, avals, str(body))
        _check_carry_tree(body, in_tree, body_tree)
        return cond_cj, body_cj

    cond_cj, body_cj = trace_loop(avals)
    leaves, changed = _promote_weak_carry(leaves, avals, body_cj.out_avals)
    if changed:
        avals = _avals(leaves, paths, "while_loop init_val")
        cond_cj, body_cj = trace_loop(avals)
    _check_carry_types(body, paths, avals, body_cj.out_avals)
    cond_jaxpr, cond_consts = close_over_consts(cond_cj)
    body_jaxpr, body_consts = close_over_consts(body_cj)
    # A carry the body forwards unchanged and cond_fun does not read becomes a body const (JAX's
    # forwarding): under vmap a batched predicate then does not batch it.
    nb = len(body_consts)
    forwarded = [f == nb + i for i, f in enumerate(forwarded_inputs(body_jaxpr.jaxpr))]
    pruned_cond, cond_used = dce_closed(cond_jaxpr, [True], [True] * len(cond_consts) +
                                        [not f for f in forwarded])
    move = [not u for u in cond_used[len(cond_consts):]]
    if any(move):
        cond_jaxpr = pruned_cond
        body_jaxpr = inputs_to_front(keep_outputs(body_jaxpr, [not m for m in move]), [False] * nb + move)
        body_consts = [*_pick(leaves, move), *body_consts]
    outs = while_p.bind(*cond_consts, *body_consts, *_pick(leaves, move, keep=False), cond_jaxpr=cond_jaxpr,
                        body_jaxpr=body_jaxpr, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tu.tree_unflatten(in_tree, merge(move, outs, _pick(leaves, move)))


# -------------------------------------------------------------------- scan

@api_boundary
def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns (carry, stacked ys).

    >>> step = lambda total, x: (total + x, total * x)
    >>> jaxprc.lax.scan(step, 0.0, jnp.arange(1.0, 4.0))
    (Array(6., dtype=float32), Array([0., 2., 9.], dtype=float32))
    """
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    def run(refs):
        if not refs:
            return _scan(f, init, xs, length, reverse, unroll, _Body("scan", "f", f, 0))

        def f_with_refs(state, x):
            _ref.enter_body(refs, state[1])
            carry, y = f(state[0], x)
            return (carry, _ref.body_values(refs)), y
        (carry, finals), ys = _scan(f_with_refs, (init, _ref.initial_values(refs)), xs, length, reverse,
                                    unroll, _Body("scan", "f", f, 0, index=0))
        _ref.settle(refs, finals)
        return carry, ys
    return _ref.thread_through_bodies(run)


def _x_slice(aval):
    """The type of one slice of a scanned operand: its other dimensions keep their mesh axes; the
    scanned one must be whole on each device (JAX's error)."""
    per_dim = sharding_type.dims(aval)
    if per_dim and per_dim[0]:
        raise ValueError(f"0th dimension of all xs should be replicated. Got {sharding_type.spec_of(per_dim)}")
    return aval.update(shape=aval.shape[1:], sharding=sharding_type.with_dims(aval, per_dim[1:]))


def _scan(f: Callable, init, xs, length, reverse, unroll, f_body: _Body):
    init_leaves, init_tree, init_avals, init_paths = _flatten(init, "scan init")
    xs_leaves, xs_tree, xs_avals, xs_paths = _flatten(xs, "scan xs")
    length = _scan_length(xs_avals, xs_paths, length)
    x_avals = [_x_slice(a) for a in xs_avals]
    unroll = _scan_unroll(unroll, length)
    in_tree = tu.treedef_tuple([init_tree, xs_tree])

    def body(args):
        out = f(*args)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"scan body output must be a pair, got {_jax_avals_text(out)}.")
        return tuple(out)

    def trace_body(carry_avals):
        cj, out_tree = _trace(body, in_tree, [*carry_avals, *x_avals], str(f_body))
        carry_tree, ys_tree = out_tree.children()
        _check_carry_tree(f_body, init_tree, carry_tree)
        return cj, ys_tree

    cj, ys_tree = trace_body(init_avals)
    num_carry = len(init_leaves)
    init_leaves, changed = _promote_weak_carry(init_leaves, init_avals, cj.out_avals[:num_carry])
    if changed:
        init_avals = _avals(init_leaves, init_paths, "scan init")
        cj, ys_tree = trace_body(init_avals)
    _check_carry_types(f_body, init_paths, init_avals, cj.out_avals[:num_carry])
    jaxpr, consts = close_over_consts(cj)
    # JAX's forwarding: a carry the body returns unchanged becomes a const, and a y that is the
    # body's x is xs itself.
    nc, nx = len(consts), len(xs_leaves)
    fwd = forwarded_inputs(jaxpr.jaxpr)
    move = [f == nc + i for i, f in enumerate(fwd[:num_carry])]
    xs_fwd = [f - nc - num_carry if f is not None and f >= nc + num_carry else None for f in fwd[num_carry:]]
    jaxpr = keep_outputs(jaxpr, [not m for m in move] + [f is None for f in xs_fwd])
    jaxpr = inputs_to_front(jaxpr, [False] * nc + move + [False] * nx)
    consts = [*_pick(init_leaves, move), *consts]
    carry = _pick(init_leaves, move, keep=False)
    operands = [*consts, *carry, *xs_leaves]
    outs = scan_p.bind(*operands, jaxpr=jaxpr, length=length, reverse=bool(reverse),
                       unroll=unroll, num_consts=len(consts), num_carry=len(carry),
                       linear=(False,) * len(operands))
    ys = iter(outs[len(carry):])
    return (tu.tree_unflatten(init_tree, merge(move, outs[:len(carry)], _pick(init_leaves, move))),
            tu.tree_unflatten(ys_tree, [next(ys) if f is None else as_array(xs_leaves[f]) for f in xs_fwd]))


def _jax_avals_text(out) -> str:
    """What a scan body returned, as JAX shows it: a type, or a tuple of ShapedArrays."""
    def text(x):
        a = get_aval(x)
        return f"ShapedArray({jax_type(a)}{', weak_type=True' if a.weak_type else ''})"
    if isinstance(out, (tuple, list)):
        return "(" + ", ".join(text(x) for x in out) + ("," if len(out) == 1 else "") + ")"
    try:
        a = get_aval(out)
    except TypeError:
        return repr(out)
    return ("~" if a.weak_type else "") + jax_type(a)


# JAX's wording (users match it), first line and second line
_ABSTRACT = "Abstract tracer value encountered where concrete value is expected: traced array with shape "


def _shape_text(tracer) -> str:
    a = aval_of(tracer)
    return f"{np.dtype(a.dtype).name}[{','.join(str(d) for d in a.shape)}]"


def _scan_length(xs_avals, xs_paths, length) -> int:
    for a, p in zip(xs_avals, xs_paths):
        if a.ndim == 0:
            raise TypeError(f"scan got a value with no leading axis to scan over: "
                            f"xs{tu.keystr(p)} of type {a.str_short()}")
    sizes = {a.shape[0] for a in xs_avals}
    if length is not None:
        if isinstance(length, Tracer):
            raise ConcretizationTypeError(
                f"{_ABSTRACT}{_shape_text(length)}\nThe `length` argument to `scan` expects a concrete "
                "`int` value. For scan-like iteration with a dynamic length, use `while_loop` or "
                f"`fori_loop`.\n(got the traced value {length!r})")
        if type(length) is not DimExpr:     # (a symbolic length is a dimension: in range)
            length = int(length)
            check_counter_range("scan", "length", length, length)
        if sizes and sizes != {length}:
            raise ValueError(f"scan got `length` argument of {length} which disagrees with leading axis "
                             f"sizes {[a.shape[0] for a in xs_avals]}.")
        return length
    if not sizes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    if len(sizes) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(a.shape[0]) for a in xs_avals)}.")
    return sizes.pop()


def check_counter_range(api: str, what: str, low: int, high: int) -> None:
    """A loop's counter (and so its trip count) runs in [low, high]: an OverflowError, as in JAX,
    where that leaves the default integer dtype (int32 unless x64 is enabled); the loop would
    otherwise run a wrapped-around number of times."""
    info = np.iinfo(dt.canonicalize_dtype(dt.int64))
    for n in (low, high):
        if not info.min <= n <= info.max:
            hint = "" if info.bits == 64 else " (enable x64 for int64 loop counters)"
            raise OverflowError(f"{api}: {what} {n} does not fit the loop counter's dtype "
                                f"{info.dtype.name}, [{info.min}, {info.max}]{hint}")


def _scan_unroll(unroll, length: int) -> int:
    if isinstance(unroll, Tracer):
        raise ConcretizationTypeError(f"{_ABSTRACT}{_shape_text(unroll)}\nThe `unroll` argument to "
                                      "`scan` expects a concrete `int` or `bool` value.\n(got the "
                                      f"traced value {unroll!r})")
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    unroll = operator.index(unroll)      # a TypeError for floats, as in JAX
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return unroll


@api_boundary
def map(f: Callable, xs, *, batch_size: int | None = None):  # noqa: A001 (JAX's name)
    """``stack([f(x) for x in xs])`` over the leading axis of (a pytree of) ``xs``, as a scan.

    With ``batch_size``, each scan step applies ``vmap(f)`` to that many elements, and the
    elements left over (the length modulo ``batch_size``) go through one more ``vmap(f)``;
    ``batch_size=0`` is a single ``vmap`` of all of them (JAX's meaning)."""
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    vmap = functools.partial(_vmap_leading, what=f"lax.map f ({_fun_name(f)})")
    leaves, tree = tu.tree_flatten(xs)
    if not leaves:
        raise ValueError("lax.map: batch_size needs at least one array to map over")
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 0:
        raise ValueError(f"lax.map: batch_size must be a non-negative int, got {batch_size!r}")
    length = _leaf_aval(leaves[0], "lax.map xs", ()).shape[0]
    batches = 0 if batch_size == 0 else length // batch_size
    split = batches * batch_size
    parts = []
    if batches:
        def batched(leaf):
            head = lax.slice_in_dim(leaf, 0, split, axis=0)
            return lax.reshape(head, (batches, batch_size, *aval_of(leaf).shape[1:]))
        _, ys = scan(lambda _, x: ((), vmap(f)(x)), (), tree.unflatten([batched(x) for x in leaves]))
        parts.append(tu.tree_map(lambda y: lax.reshape(y, (split, *aval_of(y).shape[2:])), ys))
    if split < length:
        parts.append(vmap(f)(tree.unflatten([lax.slice_in_dim(x, split, length, axis=0) for x in leaves])))
    if len(parts) == 1:
        return parts[0]
    return tu.tree_map(lambda a, b: lax.concatenate([a, b], 0), *parts)


def _vmap_leading(f: Callable, what: str):
    """``vmap(f)`` over the leading axis of every leaf: ``f`` traced once, batched by the vmap pass
    and run where it is called (inlined into a trace, compiled at top level)."""
    def batched(xs):
        leaves, tree = tu.tree_flatten(xs)
        size = aval_of(leaves[0]).shape[0]
        cj, out_tree = _trace(f, tree, [unbatched_aval(aval_of(x), 0) for x in leaves], what)
        cj, consts = close_over_consts(cj)
        cj, _ = batch_jaxpr(cj, size, [None] * len(consts) + [0] * len(leaves),
                            force_out=[True] * len(cj.out_avals))
        return tu.tree_unflatten(out_tree, evaluate_jaxpr(cj, [*consts, *leaves], "map"))
    return batched


# --------------------------------------------------------------- fori_loop

def _increment(i):
    """``i + 1`` with a literal of i's own type (weak bit included)."""
    return lax.add_p.bind(i, Literal(1, ShapedArray((), i.dtype, i.weak_type)))


@api_boundary
def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    A scan when both bounds are concrete (reverse-differentiable), else a while_loop.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")

    def run(refs):
        if not refs:
            return _fori_loop(lower, upper, body_fun, init_val, unroll)

        def body_with_refs(i, state):
            _ref.enter_body(refs, state[1])
            return body_fun(i, state[0]), _ref.body_values(refs)
        out, finals = _fori_loop(lower, upper, body_with_refs, (init_val, _ref.initial_values(refs)), unroll)
        _ref.settle(refs, finals)
        return out
    return _ref.thread_through_bodies(run)


def _fori_loop(lower, upper, body_fun: Callable, init_val, unroll):
    lo, hi = _leaf_aval(lower, "fori_loop lower", ()), _leaf_aval(upper, "fori_loop upper", ())
    dtype = _fori_dtype(lo, hi)
    # The loops below carry (i, val) or (i, stop, val); errors about the carry must still
    # name body_fun and paths inside val, never these wrappers or their tuples.
    body = _Body("fori_loop", "body_fun", body_fun, 1)

    def step(i, x):
        out = body_fun(i, x)
        _flatten(out, f"{body} output")     # a non-array leaf is named by its path in out
        return out

    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        # Concrete bounds are Python ints (floats truncate, as in JAX); the counter has the
        # default integer dtype, so both bounds must fit it.
        symbolic = DimExpr in (type(lower), type(upper))     # x.shape[0]: a trip count that is a dimension
        start, stop = (lower, upper) if symbolic else (int(np.asarray(lower)), int(np.asarray(upper)))
        if not symbolic:
            check_counter_range("fori_loop", "bound", start, stop)

        def scanned(carry, _):
            i, x = carry
            return (_increment(i), step(i, x)), None

        (_, result), _ = _scan(scanned, (start, init_val), None, non_negative_dim(stop - start), False,
                               False if unroll is None else unroll, body._replace(index=1))
        return result
    if unroll not in (None, False, 1):
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    if dtype.kind == "b":
        raise TypeError(f"fori_loop with traced bounds needs integer or floating bounds to count "
                        f"with, got {lo.str_short()} and {hi.str_short()}")
    if lo.dtype != dtype:
        lower = _convert(lower, dtype)
    if hi.dtype != dtype:
        upper = _convert(upper, dtype)

    def loop_cond(carry):
        i, stop, _ = carry
        return lax.lt_p.bind(i, stop)

    def loop_body(carry):
        i, stop, x = carry
        return _increment(i), stop, step(i, x)

    _, _, result = _while_loop(loop_cond, loop_body, (lower, upper, init_val),
                               body._replace(index=2))
    return result


def _fori_dtype(lo: ShapedArray, hi: ShapedArray):
    """Equal bound dtypes; a weakly typed bound takes the other's signed integer dtype.
    Floating (and, when concrete, boolean) bounds are accepted, as in JAX."""
    for a in (lo, hi):
        if a.shape != () or a.dtype.kind not in "iufb":
            raise TypeError(f"fori_loop bounds must be integer, floating or boolean scalars, got "
                            f"lower {lo.str_short()} and upper {hi.str_short()}")
    if lo.dtype == hi.dtype:
        return lo.dtype
    if dt.is_signed(lo.dtype) and dt.is_signed(hi.dtype) and lo.weak_type != hi.weak_type:
        return hi.dtype if lo.weak_type else lo.dtype
    raise TypeError(f"lower and upper arguments to fori_loop must have equal types, got "
                    f"{np.dtype(lo.dtype).name} and {np.dtype(hi.dtype).name}")


# ----------------------------------------------------------------------- jvp
# Bodies are differentiated with jvp_jaxpr; whatever the new body closes over (consts) is
# hoisted into leading operands. A carry tangent is nonzero if its next value's is.

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
    outs = scan_p.bind(*operands, jaxpr=body, length=length, reverse=reverse, unroll=unroll,
                       num_consts=nh + nc + len(t_consts), num_carry=nk + len(t_carry),
                       linear=new_linear)
    n_tk = len(t_carry)
    carry, t_carry_out = outs[:nk], outs[nk:nk + n_tk]
    ys, t_ys = outs[nk + n_tk:nk + n_tk + n_ys], outs[nk + n_tk + n_ys:]
    out_avals = scan_p.abstract_eval(*[aval_of(p) for p in primals], jaxpr=jaxpr, length=length,
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
    outs = while_p.bind(*primals[:cn], *hoisted, *primals[cn:cn + bn], *t_bconsts,
                        *primals[cn + bn:], *t_carry, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=cn, body_nconsts=len(hoisted) + bn + len(t_bconsts))
    avals = body_jaxpr.out_avals
    return _split_outs(outs, nk, carry_nz, avals)


ad.primitive_jvps[scan_p] = _scan_jvp
ad.primitive_jvps[while_p] = _while_jvp


# ----------------------------------------------------------------- transpose

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
    outs = scan_p.bind(*operands, jaxpr=t_body, length=length, reverse=not reverse, unroll=unroll,
                       num_consts=n_consts, num_carry=len(init), linear=(False,) * len(operands))
    ct_consts, ct_init, ct_xs = outs[:len(const_avals)], outs[len(const_avals):len(init)], outs[len(init):]
    cc, cx = iter(ct_consts), iter(ct_xs)
    return ([next(cc) if lin else None for lin in lin_consts]
            + [ct if is_undefined_primal(c) else None for ct, c in zip(ct_init, carry)]
            + [next(cx) if lin else None for lin in lin_xs])


def _while_t(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
                     "with dynamic start/stop values. Try using lax.scan, or using fori_loop with "
                     "static start/stop.")


ad.primitive_transposes[scan_p] = _scan_t
ad.primitive_transposes[while_p] = _while_t


# ------------------------------------------------------------------ batching

def _carry_fixpoint(body: ClosedJaxpr, size: int, carry_batched: list[bool],
                    in_dims_for: Callable[[list[bool]], list], num_ys: int = 0) -> list[bool]:
    """Which loop carries end up batched: those batched on entry, and those an iteration batches."""
    while True:
        force = [*carry_batched, *[False] * num_ys]
        _, out_batched = batch_jaxpr(body, size, in_dims_for(carry_batched), force)
        joined = [a or b for a, b in zip(carry_batched, out_batched)]
        if joined == carry_batched:
            return carry_batched
        carry_batched = joined


def _while_rule(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    effects = jaxpr_effects(cond_jaxpr) | jaxpr_effects(body_jaxpr)
    if Effect.ordered_io in effects:        # JAX's refusals, in its words
        raise Exception("Ordered IO effects not supported in vmap.")
    size = axis_size_of(args, dims)
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, init = args[:nc], args[nc:nc + nb], args[nc + nb:]
    cdims, bdims, idims = dims[:nc], dims[nc:nc + nb], dims[nc + nb:]
    carry_b = _carry_fixpoint(body_jaxpr, size, [d is not None for d in idims],
                              lambda cb: [*bdims, *_front_dims(cb)])
    carry_dims = _front_dims(carry_b)
    _, (pred_batched,) = batch_jaxpr(cond_jaxpr, size, [*cdims, *carry_dims])
    if pred_batched:
        if Effect.io in effects:
            raise Exception("Unordered IO effects not supported in while_loop with batched predicate")
        return _while_batched_pred(cconsts, cdims, bconsts, bdims, init, idims, size,
                                   cond_jaxpr, body_jaxpr)
    new_cond, _ = batch_jaxpr(cond_jaxpr, size, [*cdims, *carry_dims])
    new_body, _ = batch_jaxpr(body_jaxpr, size, [*bdims, *carry_dims], carry_b)
    init = [matchaxis(x, d, cd, size) for x, d, cd in zip(init, idims, carry_dims)]
    outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=new_cond, body_jaxpr=new_body,
                        cond_nconsts=nc, body_nconsts=nb)
    return outs, carry_dims


class PerMemberLoop(NamedTuple):
    """What a while made by ``vmap`` of a loop whose members stop at different steps came
    from: the unbatched loop and its operands' batch dims (the carry's are 0). Its body also
    runs for members that have finished (their results dropped), so checkify, which must not
    check those, checks the unbatched loop batched instead."""
    cond_jaxpr: ClosedJaxpr
    body_jaxpr: ClosedJaxpr
    cond_dims: tuple
    body_dims: tuple


_PER_MEMBER_LOOPS = weakref.WeakKeyDictionary()     # the batched cond's jaxpr -> PerMemberLoop


def per_member_loop(cond_jaxpr: ClosedJaxpr) -> PerMemberLoop | None:
    """The unbatched loop of a while's cond made by ``vmap`` for members stopping apart."""
    return _PER_MEMBER_LOOPS.get(cond_jaxpr.jaxpr)


def _while_batched_pred(cconsts, cdims, bconsts, bdims, init, idims, size, cond_jaxpr, body_jaxpr):
    """Examples stop at different steps: loop while any continues; the others keep their carry."""
    nc, nb, n = len(cconsts), len(bconsts), len(init)
    carry_dims = [0] * n
    cond_avals = [batched_aval(a, d, size) for a, d in zip(cond_jaxpr.in_avals, [*cdims, *carry_dims])]
    body_avals = [batched_aval(a, d, size) for a, d in zip(body_jaxpr.in_avals, [*bdims, *carry_dims])]

    def predicate(consts, carry):
        (pred,), (d,) = batch_eval(cond_jaxpr.jaxpr, (), [*consts, *carry], [*cdims, *carry_dims])
        return matchaxis(pred, d, 0, size)

    def new_cond(*args):
        return [lax.reduce_or_p.bind(predicate(args[:nc], args[nc:]), axes=(0,))]

    def new_body(*args):
        cc, bc, carry = args[:nc], args[nc:nc + nb], args[nc + nb:]
        pred = predicate(cc, carry)
        stepped, dims = batch_eval(body_jaxpr.jaxpr, (), [*bc, *carry], [*bdims, *carry_dims])
        outs = []
        for old, new, d in zip(carry, stepped, dims):
            which, old, new = align([pred, old, matchaxis(new, d, 0, size)], [0, 0, 0])[0]
            outs.append(lax.select_n(which, old, new))
        return outs

    cond_j = trace_to_jaxpr(new_cond, cond_avals, name="vmap")
    _PER_MEMBER_LOOPS[cond_j.jaxpr] = PerMemberLoop(cond_jaxpr, body_jaxpr, tuple(cdims), tuple(bdims))
    body_j = trace_to_jaxpr(new_body, [*cond_avals[:nc], *body_avals], name="vmap")
    init = [matchaxis(x, d, 0, size) for x, d in zip(init, idims)]
    # The body evaluates the predicate too, so it gets the cond consts ahead of its own.
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=cond_j, body_jaxpr=body_j,
                        cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, carry_dims


def _scan_rule(args, dims, *, jaxpr, num_consts, num_carry, **params):
    size = axis_size_of(args, dims)
    nc, nk = num_consts, num_carry
    consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    cdims, idims, xdims = dims[:nc], dims[nc:nc + nk], dims[nc + nk:]
    # The scanned axis is 0, so batched xs carry their batch axis at 1 (0 in the body's slices).
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xdims)]
    slice_dims = [None if d is None else 0 for d in xdims]
    ny = len(jaxpr.out_avals) - nk
    in_dims_for = lambda cb: [*cdims, *_front_dims(cb), *slice_dims]
    carry_b = _carry_fixpoint(jaxpr, size, [d is not None for d in idims], in_dims_for, ny)
    new_jaxpr, out_b = batch_jaxpr(jaxpr, size, in_dims_for(carry_b), [*carry_b, *[False] * ny])
    carry_dims = _front_dims(carry_b)
    init = [matchaxis(x, d, cd, size) for x, d, cd in zip(init, idims, carry_dims)]
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=new_jaxpr, num_consts=nc, num_carry=nk, **params)
    return outs, [*carry_dims, *(1 if b else None for b in out_b[nk:])]


batching.primitive_batchers[while_p] = _while_rule
batching.primitive_batchers[scan_p] = _scan_rule


# ---------------------------------------------------------- partial eval, DCE

def _pe_scan(eqn, uk_in):
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    body = p["jaxpr"]
    n_ys = len(eqn.outvars) - nk
    consts_uk, carry_uk, xs_uk = uk_in[:nc], list(uk_in[nc:nc + nk]), uk_in[nc + nk:]
    while True:   # a carry is unknown if its next value is
        _, _, out_uk, _ = partial_eval_jaxpr(body, consts_uk + carry_uk + xs_uk, carry_uk + [False] * n_ys)
        new = [a or b for a, b in zip(carry_uk, out_uk[:nk])]
        if new == carry_uk:
            break
        carry_uk = new
    body_uk = consts_uk + carry_uk + xs_uk
    known, unknown, out_uk, n_res = partial_eval_jaxpr(body, body_uk, carry_uk + [False] * n_ys)
    ys_uk = out_uk[nk:]
    # Residuals that are known consts of the body pass through as consts; the rest are stacked.
    n_known_consts = nc - sum(consts_uk)
    known_consts_in = known.jaxpr.invars[:n_known_consts]
    res_vars = known.jaxpr.outvars[len(known.jaxpr.outvars) - n_res:]
    is_const_res = [isinstance(v, Var) and v in known_consts_in for v in res_vars]
    outer_known_consts = _pick(eqn.invars[:nc], consts_uk, False)
    const_res = [outer_known_consts[known_consts_in.index(v)] for v, c in zip(res_vars, is_const_res) if c]

    # Residuals that are known xs slices are read from those xs, not stacked again (as in JAX).
    k_carry_n = nk - sum(carry_uk)
    known_xs_in = known.jaxpr.invars[n_known_consts + k_carry_n:]
    outer_known_xs = _pick(eqn.invars[nc + nk:], xs_uk, False)
    is_xs_res = [not c and isinstance(v, Var) and v in known_xs_in for v, c in zip(res_vars, is_const_res)]
    is_fwd = [c or x for c, x in zip(is_const_res, is_xs_res)]

    k_body = Jaxpr(known.jaxpr.constvars, known.jaxpr.invars,
                   known.jaxpr.outvars[:len(known.jaxpr.outvars) - n_res] + _pick(res_vars, is_fwd, False),
                   known.jaxpr.eqns)
    k_body = dce_closed(ClosedJaxpr(k_body, known.consts), [True] * len(k_body.outvars), True)[0]
    new_stacked = _new_vars([a.update(shape=(p["length"],) + a.shape)
                             for a in _pick([v.aval for v in res_vars], is_fwd, False)])
    fresh = iter(new_stacked)
    stacked = [outer_known_xs[known_xs_in.index(v)] if x else next(fresh)
               for v, c, x in zip(res_vars, is_const_res, is_xs_res) if not c]
    known_operands = _pick(eqn.invars, body_uk, False)
    k_eqn = eqn.replace(invars=known_operands,
                        outvars=_pick(eqn.outvars, carry_uk + ys_uk, False) + new_stacked,
                        params={**p, "jaxpr": k_body, "num_consts": n_known_consts,
                                "num_carry": k_carry_n, "linear": (False,) * len(known_operands)})

    # unknown body invars: residuals + uk consts + uk carry + uk xs -> [const res, uk consts,
    # uk carry, stacked res, uk xs]
    u_in = unknown.jaxpr.invars
    res_in, rest = u_in[:n_res], u_in[n_res:]
    n_uc, n_ukc = sum(consts_uk), sum(carry_uk)
    u_body = Jaxpr([], _pick(res_in, is_const_res) + rest[:n_uc + n_ukc] + _pick(res_in, is_const_res, False)
                   + rest[n_uc + n_ukc:], unknown.jaxpr.outvars, unknown.jaxpr.eqns)
    uk_ops = _pick(eqn.invars, body_uk)
    u_operands = const_res + uk_ops[:n_uc + n_ukc] + stacked + uk_ops[n_uc + n_ukc:]
    u_eqn = eqn.replace(invars=u_operands, outvars=_pick(eqn.outvars, carry_uk + ys_uk),
                        params={**p, "jaxpr": ClosedJaxpr(u_body, []), "num_consts": len(const_res) + n_uc,
                                "num_carry": n_ukc, "linear": (False,) * len(u_operands)})
    return [k_eqn], [u_eqn], carry_uk + ys_uk


def _pe_while(eqn, uk_in):
    """Known carries run in a known loop (when the condition only reads known values); the
    whole loop is re-run in the unknown program for the unknown carries (forward mode only,
    as in JAX)."""
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond_uk, bconsts_uk, carry_uk = uk_in[:cn], uk_in[cn:cn + bn], list(uk_in[cn + bn:])
    while True:
        _, _, out_uk, _ = partial_eval_jaxpr(p["body_jaxpr"], bconsts_uk + carry_uk, carry_uk)
        new = [a or b for a, b in zip(carry_uk, out_uk)]
        if new == carry_uk:
            break
        carry_uk = new
    _, cond_reads = dce_closed(p["cond_jaxpr"], [True])
    if any(cond_uk) or any(r and u for r, u in zip(cond_reads[cn:], carry_uk)):
        return [], [eqn], [True] * len(eqn.outvars)
    known_body = partial_eval_jaxpr(p["body_jaxpr"], bconsts_uk + carry_uk, carry_uk)[0]
    n_known = len(carry_uk) - sum(carry_uk)
    n_res = len(known_body.out_avals) - n_known
    known_body = dce_closed(known_body, [True] * n_known + [False] * n_res, True)[0]
    cj = p["cond_jaxpr"].jaxpr
    known_cond = ClosedJaxpr(Jaxpr([], cj.invars[:cn] + _pick(cj.invars[cn:], carry_uk, False),
                                   cj.outvars, cj.eqns), [])
    k_eqn = eqn.replace(invars=eqn.invars[:cn] + _pick(eqn.invars[cn:cn + bn], bconsts_uk, False)
                        + _pick(eqn.invars[cn + bn:], carry_uk, False),
                        outvars=_pick(eqn.outvars, carry_uk, False),
                        params={**p, "cond_jaxpr": known_cond, "body_jaxpr": known_body,
                                "body_nconsts": bn - sum(bconsts_uk)})
    u_eqn = eqn.replace(outvars=[v if u else Var(v.aval) for v, u in zip(eqn.outvars, carry_uk)])
    return [k_eqn], [u_eqn], carry_uk


def _dce_scan(used_outputs, eqn):
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    body = p["jaxpr"]
    used_carry = list(used_outputs[:nk])
    used_ys = list(used_outputs[nk:])
    while True:   # a carry is live if its next value feeds a live carry or output
        _, used_in = dce_closed(body, used_carry + used_ys)
        carry_in = used_in[nc:nc + nk]
        new_carry = [a or b for a, b in zip(used_carry, carry_in)]
        if new_carry == used_carry:
            break
        used_carry = new_carry
    keep = [False] * nc + used_carry + [False] * (len(used_in) - nc - nk)
    new_body, used_in = dce_closed(body, used_carry + used_ys, keep_inputs=keep)
    used_consts = used_in[:nc]
    params = {**p, "jaxpr": new_body, "num_consts": sum(used_consts), "num_carry": sum(used_carry),
              "linear": tuple(_pick(p["linear"], used_in))}
    return used_in, eqn.replace(invars=_pick(eqn.invars, used_in),
                                outvars=_pick(eqn.outvars, used_carry + used_ys), params=params)


def _dce_while(used_outputs, eqn):
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]
    _, cond_used = dce_closed(cond, [True])
    used_carry = [a or b for a, b in zip(used_outputs, cond_used[cn:])]
    while True:
        _, body_used = dce_closed(body, used_carry)
        new_carry = [a or b for a, b in zip(used_carry, body_used[bn:])]
        if new_carry == used_carry:
            break
        used_carry = new_carry
    new_body, body_used = dce_closed(body, used_carry, keep_inputs=[False] * bn + used_carry)
    new_cond, cond_used = dce_closed(cond, [True], keep_inputs=[False] * cn + used_carry)
    used_inputs = cond_used[:cn] + body_used[:bn] + used_carry
    params = {**p, "cond_jaxpr": new_cond, "body_jaxpr": new_body,
              "cond_nconsts": sum(cond_used[:cn]), "body_nconsts": sum(body_used[:bn])}
    return used_inputs, eqn.replace(invars=_pick(eqn.invars, used_inputs),
                                    outvars=_pick(eqn.outvars, used_carry), params=params)


def _remat_split_scan(eqn, policy):
    """A scan a checkpoint recomputes, split as JAX's remat splits it: the forward scan also
    stacks what the policy saves in each iteration, and the recomputing scan reads those as
    extra scanned inputs. None when the body saves nothing."""
    p = eqn.params
    body = p["jaxpr"]
    if body.consts or type(p["length"]) is not int:
        return None
    saved, recompute, known_eqns = remat_split(body.jaxpr, list(body.jaxpr.outvars), policy)
    if not saved:
        return None
    stacked = [Var(ShapedArray((p["length"], *v.aval.shape), v.aval.dtype, v.aval.weak_type)) for v in saved]
    forward = Jaxpr([], body.jaxpr.invars, list(body.jaxpr.outvars) + saved, known_eqns)
    k_eqn = eqn.replace(outvars=list(eqn.outvars) + stacked, params={**p, "jaxpr": ClosedJaxpr(forward, [])})
    n_front = p["num_consts"] + p["num_carry"]
    invars = body.jaxpr.invars
    again = Jaxpr([], invars[:n_front] + saved + invars[n_front:], body.jaxpr.outvars, recompute)
    r_eqn = eqn.replace(invars=list(eqn.invars[:n_front]) + stacked + list(eqn.invars[n_front:]),
                        params={**p, "jaxpr": ClosedJaxpr(again, []),
                                "linear": p["linear"][:n_front] + (False,) * len(saved) + p["linear"][n_front:]})
    return k_eqn, stacked, r_eqn


pe.partial_eval_jaxpr_custom_rules[scan_p] = _pe_scan
remat_split_rules[scan_p] = _remat_split_scan
pe.partial_eval_jaxpr_custom_rules[while_p] = _pe_while
pe.dce_rules[scan_p] = _dce_scan
pe.dce_rules[while_p] = _dce_while


# ------------------------------------------------------------------ lowering

def _hlo_while(init, cond_fn, body_fn):
    """stablehlo.while over ``init``; cond_fn/body_fn take the loop-carried values."""
    types = [v.type for v in init]
    op = hlo.WhileOp(types, list(init))
    mlir.add_region(op.cond, types, cond_fn)
    mlir.add_region(op.body, types, body_fn)
    return list(op.results)


def _threaded_while(ctx, init, cond_fn, body_fn, threaded: bool):
    """``_hlo_while``, the ordered-effects token carried first in the state when ``threaded``
    (the body's ordered callbacks then run in order, after those before the loop)."""
    if not threaded:
        return _hlo_while(init, cond_fn, body_fn)

    def body(token, *state):
        ctx.set_token(token)
        new = body_fn(*state)
        return [ctx.get_token(), *new]
    token, *outs = _hlo_while([ctx.get_token(), *init], lambda _, *state: cond_fn(*state), body)
    ctx.set_token(token)
    return outs


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # Consts travel in the loop state, so the regions only use their own block arguments.
    split = cond_nconsts + body_nconsts

    def cond_fn(*state):
        (pred,) = ctx.lower_jaxpr(cond_jaxpr, *state[:cond_nconsts], *state[split:])
        return pred

    def body_fn(*state):
        new = ctx.lower_jaxpr(body_jaxpr, *state[cond_nconsts:split], *state[split:])
        return [*state[:split], *new]

    if not has_ordered_effects(cond_jaxpr):
        return _threaded_while(ctx, args, cond_fn, body_fn, has_ordered_effects(body_jaxpr))[split:]
    # A while region's condition returns no token, so an ordered cond_fun runs in the body (as in
    # JAX): once before the loop, then after each step, its predicate carried in the state.
    def body_then_cond(_, *state):
        new = body_fn(*state)
        return [cond_fn(*new), *new]
    final = _threaded_while(ctx, [cond_fn(*args), *args], lambda pred, *_: pred, body_then_cond, True)
    return final[1 + split:]


def _index_tuple(idx, ndim, dtype=dt.int32):
    return [idx] + [mlir.full((), 0, dtype) for _ in range(ndim - 1)]


def _scan_lowering(ctx, *args, jaxpr, length, reverse, num_consts, num_carry, **_):
    """A while loop over i in [0, length): slice xs[i], run the body, write ys[i] (i mirrored if reverse)."""
    full, aval_to_ir_type = mlir.full, mlir.aval_to_ir_type
    consts, init, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    xs_avals = ctx.avals_in[num_consts + num_carry:]
    ys_avals = ctx.avals_out[num_carry:]
    if length == 0:
        return [*init, *[full(a.shape, 0, a.dtype) for a in ys_avals]]
    nc, nx = num_consts, len(xs)
    symbolic = type(length) is DimExpr      # a dynamic lowering (export): the count is computed
    i32 = dt.int64 if symbolic or length > np.iinfo(np.int32).max else dt.int32    # the counter's dtype

    def count(n):
        if type(n) is DimExpr:
            return hlo.convert(mlir.aval_to_ir_type(ShapedArray((), i32)), dynamic_shapes.dim_value(n))
        return full((), n, i32)

    def cond_fn(i, *_):
        return mlir.compare(i, count(length), "LT", i32)

    def body_fn(i, *state):
        c, x, carry, ys = (state[:nc], state[nc:nc + nx], state[nc + nx:nc + nx + num_carry],
                           state[nc + nx + num_carry:])
        at = hlo.subtract(count(length - 1), i) if reverse else i
        x_t = [hlo.reshape(aval_to_ir_type(a.update(shape=a.shape[1:])),
                           hlo.dynamic_slice(v, _index_tuple(at, a.ndim, i32), [1, *a.shape[1:]]))
               for v, a in zip(x, xs_avals)]
        outs = ctx.lower_jaxpr(jaxpr, *c, *carry, *x_t)
        ys = [hlo.dynamic_update_slice(y, hlo.reshape(aval_to_ir_type(a.update(shape=(1, *a.shape[1:]))), y_t),
                                       _index_tuple(at, a.ndim, i32))
              for y, y_t, a in zip(ys, outs[num_carry:], ys_avals)]
        return [hlo.add(i, full((), 1, i32)), *c, *x, *outs[:num_carry], *ys]

    init_state = [full((), 0, i32), *consts, *xs, *init, *[full(a.shape, 0, a.dtype) for a in ys_avals]]
    final = _threaded_while(ctx, init_state, cond_fn, body_fn, has_ordered_effects(jaxpr))
    return final[1 + nc + nx:]


mlir.register_lowering(while_p, _while_lowering)
mlir.register_lowering(scan_p, _scan_lowering)


# ---------------------------------------------------------- jet (Taylor series)
def _scan_jet(primals_in, series_in, *, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    """Beyond JAX: the body's jet, the series of consts, carries and xs beside them."""
    order = len(series_in[0])
    nc, nk = num_consts, num_carry
    nx, ny = len(primals_in) - nc - nk, len(jaxpr.out_avals) - nk
    body, _ = jet_jaxpr(jaxpr, order, [True] * len(primals_in), instantiate=True)
    body, hoisted = close_over_consts(body)
    # body inputs: hoisted, consts, carry, xs, their series -> consts, carry, xs each with series
    h, c, k, x, sc, sk, sx = _groups([len(hoisted), nc, nk, nx, nc * order, nk * order, nx * order])
    oc, oy, osc, osy = _groups([nk, ny, nk * order, ny * order])
    body = _reorder(body, h + c + sc + k + sk + x + sx, oc + osc + oy + osy)
    p, s = primals_in, series_in
    operands = [*hoisted, *p[:nc], *_flat_series(s[:nc]), *p[nc:nc + nk], *_flat_series(s[nc:nc + nk]),
                *p[nc + nk:], *_flat_series(s[nc + nk:])]
    outs = scan_p.bind(*operands, jaxpr=body, length=length, reverse=reverse, unroll=unroll,
                       num_consts=len(hoisted) + nc * (1 + order), num_carry=nk * (1 + order),
                       linear=(False,) * len(operands))
    carry, s_carry, ys, s_ys = ([outs[i] for i in g] for g in _groups([nk, nk * order, ny, ny * order]))
    return carry + ys, _series_chunks(s_carry, order, nk) + _series_chunks(s_ys, order, ny)


def _while_jet(primals_in, series_in, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """Beyond JAX: the body's jet carries the series; the condition ignores them."""
    order = len(series_in[0])
    cn, bn = cond_nconsts, body_nconsts
    nk = len(primals_in) - cn - bn
    body, _ = jet_jaxpr(body_jaxpr, order, [True] * (bn + nk), instantiate=True)
    body, hoisted = close_over_consts(body)
    h, b, k, sb, sk = _groups([len(hoisted), bn, nk, bn * order, nk * order])
    body = _reorder(body, h + b + sb + k + sk, list(range(nk * (1 + order))))
    cj = cond_jaxpr.jaxpr
    ignored = [Var(v.aval) for v in body.jaxpr.invars[len(h + b + sb) + nk:]]
    cond = ClosedJaxpr(Jaxpr(cj.constvars, cj.invars + ignored, cj.outvars, cj.eqns), cond_jaxpr.consts)
    p, s = primals_in, series_in
    outs = while_p.bind(*p[:cn], *hoisted, *p[cn:cn + bn], *_flat_series(s[cn:cn + bn]),
                        *p[cn + bn:], *_flat_series(s[cn + bn:]), cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=cn, body_nconsts=len(hoisted) + bn * (1 + order))
    return outs[:nk], _series_chunks(outs[nk:], order, nk)


jet.jet_rules[scan_p] = _scan_jet
jet.jet_rules[while_p] = _while_jet


# ---------------------------------------------------------------- canonicalization

@pattern(CANONICALIZE, Pat(while_p, "*operands", cond_jaxpr=bind("cond_jaxpr"), cond_nconsts=bind("cond_nconsts"),
                           body_nconsts=bind("body_nconsts")))
def _while_never_entered(operands, cond_jaxpr, cond_nconsts, body_nconsts):
    """A predicate that is the literal False: the loop returns its initial carry."""
    (pred,) = cond_jaxpr.jaxpr.outvars
    if type(pred) is Literal and not pred.val:
        return operands[cond_nconsts + body_nconsts:]
    return None


def _invariant_carries(body: Jaxpr, first_carry: int, n_carry: int) -> list[bool]:
    """Which carries the body returns unchanged (its carry output k is its carry input k)."""
    return [body.outvars[k] is body.invars[first_carry + k] for k in range(n_carry)]


def _hoist(jaxpr: ClosedJaxpr, n_consts: int, invariant: list[bool], n_outs_after: int = 0) -> ClosedJaxpr:
    """``jaxpr`` (inputs: consts, carries, ...; outputs: carries, ...) with its invariant carries
    moved to the end of its consts and their outputs dropped; ``n_outs_after`` outputs follow
    the carries (a scan's ys)."""
    j, n = jaxpr.jaxpr, len(invariant)
    carries = j.invars[n_consts:n_consts + n]
    invars = (j.invars[:n_consts] + [v for v, i in zip(carries, invariant) if i]
              + [v for v, i in zip(carries, invariant) if not i] + j.invars[n_consts + n:])
    outvars = j.outvars
    if len(outvars) == n + n_outs_after:      # (the cond of a while returns no carries)
        outvars = [v for v, i in zip(outvars[:n], invariant) if not i] + outvars[n:]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, outvars, j.eqns), jaxpr.consts)


def _split_invariant(values, start: int, invariant: list[bool]) -> tuple[list, list]:
    """``values[start:start+len(invariant)]`` (carries) split: invariant ones first."""
    n = len(invariant)
    carries = values[start:start + n]
    return ([c for c, i in zip(carries, invariant) if i], [c for c, i in zip(carries, invariant) if not i])


@pattern(CANONICALIZE, Pat(while_p, "*operands", cond_jaxpr=bind("cond_jaxpr"), body_jaxpr=bind("body_jaxpr"),
                           cond_nconsts=bind("cond_nconsts"), body_nconsts=bind("body_nconsts")))
def _while_invariant_carries(operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """Carries the body never changes become consts of the loop; their results are their inits."""
    start = cond_nconsts + body_nconsts
    invariant = _invariant_carries(body_jaxpr.jaxpr, body_nconsts, len(operands) - start)
    if not any(invariant) or all(invariant):
        return None
    fixed, moving = _split_invariant(operands, start, invariant)
    outs = iter(while_p.bind(*operands[:cond_nconsts], *fixed, *operands[cond_nconsts:start], *fixed, *moving,
                             cond_jaxpr=_hoist(cond_jaxpr, cond_nconsts, invariant),
                             body_jaxpr=_hoist(body_jaxpr, body_nconsts, invariant),
                             cond_nconsts=cond_nconsts + len(fixed), body_nconsts=body_nconsts + len(fixed)))
    return [init if i else next(outs) for init, i in zip(operands[start:], invariant)]


@pattern(CANONICALIZE, Pat(scan_p, "*operands", as_="scan"))
def _scan_invariant_carries(operands, scan):
    """Carries the body never changes become consts of the scan; their results are their inits."""
    p = dict(scan.params)
    n_consts, n_carry, body = p["num_consts"], p["num_carry"], p["jaxpr"]
    invariant = _invariant_carries(body.jaxpr, n_consts, n_carry)
    if not any(invariant):
        return None
    fixed, moving = _split_invariant(operands, n_consts, invariant)
    fixed_lin, moving_lin = _split_invariant(list(p["linear"]), n_consts, invariant)
    xs = operands[n_consts + n_carry:]
    p.update(jaxpr=_hoist(body, n_consts, invariant, len(body.jaxpr.outvars) - n_carry),
             num_consts=n_consts + len(fixed), num_carry=len(moving),
             linear=(*p["linear"][:n_consts], *fixed_lin, *moving_lin, *p["linear"][n_consts + n_carry:]))
    outs = scan_p.bind(*operands[:n_consts], *fixed, *moving, *xs, **p)
    carries = iter(outs[:len(moving)])
    return [init if i else next(carries) for init, i in zip(operands[n_consts:], invariant)] + outs[len(moving):]
