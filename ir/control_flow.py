"""Initial-style control flow: cond, switch, while_loop, fori_loop, scan, map.

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

import inspect
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from . import dtypes as dt
from . import tree_util as tu
from .core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from .prims import elementwise as ew
from .prims.control_flow import cond_p, scan_p, typematch, while_p
from .tracing import Tracer, close_over_consts, get_aval, is_scalar_constant, trace_to_jaxpr

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]

_NO_OPERAND = object()   # the legacy ``operand=`` keyword of cond/switch was not given


# ------------------------------------------------------------------ pytrees

def _leaf_aval(x, what: str, path) -> ShapedArray:
    try:
        return get_aval(x)
    except TypeError:
        raise TypeError(
            f"{what}{tu.keystr(path)} is a {type(x).__name__} ({x!r:.60}), not an array: every "
            "leaf of a control-flow operand or result must be an array or a scalar. Close over "
            "other Python values (capture them in the function) instead of passing them.") from None


def _flatten(tree, what: str):
    """Leaves, treedef, avals and key paths of a pytree of arrays."""
    keyed, treedef = tu.tree_flatten_with_path(tree)
    paths = [p for p, _ in keyed]
    leaves = [x for _, x in keyed]
    return leaves, treedef, [_leaf_aval(x, what, p) for p, x in keyed], paths


def _trace(fun: Callable[[Any], Any], in_tree, in_avals: Sequence[ShapedArray], what: str):
    """Trace ``fun(pytree) -> pytree``; returns (ClosedJaxpr with consts, output treedef)."""
    box = {}

    def flat_fun(*args):
        out = fun(tu.tree_unflatten(in_tree, args))
        leaves, box["tree"], _, _ = _flatten(out, f"{what} output")
        return leaves

    return trace_to_jaxpr(flat_fun, in_avals, name=what), box["tree"]


def _fun_name(fun) -> str:
    """``name at file:line`` of a Python function, for error messages."""
    name, code = getattr(fun, "__name__", repr(fun)), getattr(fun, "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name


def _convert(x, dtype):
    """``x`` as a strong ``dtype``: numpy for Python/numpy values, the primitive otherwise."""
    if is_scalar_constant(x) or type(x) is np.ndarray:
        return np.asarray(x, dtype)[()] if np.ndim(x) == 0 else np.asarray(x, dtype)
    return ew.convert_element_type_p.bind(x, new_dtype=np.dtype(dtype), weak_type=False)


# ------------------------------------------------------------------- cond

def _scalar_aval(x, api: str, what: str) -> ShapedArray:
    if x is None:
        raise TypeError(f"{api} {what} is None")
    aval = _leaf_aval(x, f"{api} {what}", ())
    if aval.shape != ():
        raise TypeError(f"{api} {what} must be a scalar, got a value of type {aval.str_short()}")
    return aval


def _pred_to_index(pred):
    """cond's predicate (bool or number; nonzero is true) as the i32 index of [false, true]."""
    aval = _scalar_aval(pred, "cond", "predicate")
    if aval.dtype.kind not in "biuf":
        raise TypeError(f"cond predicate type must be boolean or a number, got {aval.str_short()}")
    if not isinstance(pred, Tracer):
        return np.int32(np.asarray(pred) != 0)
    if aval.dtype.kind != "b":
        pred = ew.ne_p.bind(pred, np.zeros((), aval.dtype)[()])
    return _convert(pred, dt.int32)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, both traced."""
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _legacy_operand("cond", operands, operand)
    index = _pred_to_index(pred)
    return _cond((false_fun, true_fun), ("false_fun", "true_fun"), index, operands, "cond")


def switch(index, branches: Sequence[Callable], *operands, operand=_NO_OPERAND):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``, all branches traced."""
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _legacy_operand("switch", operands, operand)
    aval = _scalar_aval(index, "switch", "index")
    if aval.dtype.kind not in "iu":
        raise TypeError(f"switch index must be an integer scalar, got {aval.str_short()}")
    if not branches:
        raise ValueError("switch: empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    hi = len(branches) - 1
    if isinstance(index, Tracer):
        if aval.dtype != dt.int32 or aval.weak_type:
            index = _convert(index, dt.int32)
        index = ew.clamp_p.bind(np.int32(0), index, np.int32(hi))
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
    leaves, in_tree, avals, _ = _flatten(operands, f"{api} operands")
    traced = [_trace(lambda ops, b=b: b(*ops), in_tree, avals, f"{api} {name} ({_fun_name(b)})")
              for b, name in zip(branches, names)]
    (cj0, tree0), name0 = traced[0], names[0]
    for (cj, tree), name, fun in zip(traced[1:], names[1:], branches[1:]):
        where = f" ({name0} is {_fun_name(branches[0])}; {name} is {_fun_name(fun)})"
        _check_branch_outputs(api, where, name0, tree0, cj0.out_avals, name, tree, cj.out_avals)
    jaxprs, consts = _merge_consts([cj for cj, _ in traced])
    outs = cond_p.bind(index, *consts, *leaves, branches=tuple(jaxprs))
    return tu.tree_unflatten(tree0, outs)


def _check_branch_outputs(api, where, name1, tree1, avals1, name2, tree2, avals2):
    if tree1 != tree2:
        raise TypeError(
            f"{api} branch outputs must have the same pytree structure, but {name1} returns "
            f"{tree1} and {name2} returns {tree2}{where}. Revise the branches so that they "
            "return the same structure.")
    paths = [p for p, _ in tu.tree_flatten_with_path(tree1.unflatten(avals1))[0]]
    diffs = [f"the output of {name1}{tu.keystr(p)} has type {a.str_short()} but the "
             f"corresponding output of {name2} has type {b.str_short()}"
             for p, a, b in zip(paths, avals1, avals2) if not typematch(a, b)]
    if diffs:
        raise TypeError(
            f"{api} branch outputs must have identical types (shape and dtype), but "
            + "; ".join(diffs) + f"{where}. Convert the outputs (e.g. with .astype or "
            "jnp.broadcast_to) so that every branch returns the same types.")


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

    def function(self) -> str:
        return f"{self.api} body function ({_fun_name(self.fun)})"

    def carry_name(self) -> str:
        return _param_name(self.fun, self.carry_position)

    def user_tree(self, treedef):
        return treedef if self.index is None else treedef.children()[self.index]

    def user_path(self, path):
        """The path of a loop-carry leaf inside the user's carry; None for the wrapper's own."""
        if self.index is None:
            return path
        return path[1:] if path[0].idx == self.index else None


def _check_carry_tree(body: _Body, in_tree, out_tree) -> None:
    in_tree, out_tree = body.user_tree(in_tree), body.user_tree(out_tree)
    if in_tree != out_tree:
        raise TypeError(
            f"{body.function()} carry input and carry output must have the same pytree "
            f"structure, but the input carry {body.carry_name()} is {in_tree} and the output "
            f"carry is {out_tree}. Revise the function so that the carry output has the same "
            "pytree structure as the carry input.")


def _check_carry_types(body: _Body, paths, in_avals, out_avals) -> None:
    """Each output carry leaf must have its input's shape and dtype (weak bits aside)."""
    name = body.carry_name()
    diffs = [f"the input carry component {name}{tu.keystr(p)} has type {a.str_short()} but the "
             f"corresponding output carry component has type {b.str_short()}"
             for p, a, b in zip([body.user_path(p) for p in paths], in_avals, out_avals)
             if p is not None and not typematch(a, b)]
    if diffs:
        raise TypeError(
            f"{body.function()} carry input and carry output must have equal types, but "
            + "; ".join(diffs) + ". Revise the function so that each carry output has the type of "
            "its input (cast with .astype), or give the initial carry the type the body returns.")


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

def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val)``, traced once."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: cond_fun and body_fun arguments should be callable.")
    return _while_loop(cond_fun, body_fun, init_val, _Body("while_loop", "body_fun", body_fun, 0))


def _while_loop(cond_fun: Callable, body_fun: Callable, init_val, body: _Body):
    leaves, in_tree, avals, paths = _flatten(init_val, "while_loop init_val")

    def trace_loop(avals):
        cond_cj, cond_tree = _trace(cond_fun, in_tree, avals,
                                    f"while_loop cond_fun ({_fun_name(cond_fun)})")
        pred = cond_cj.out_avals
        if cond_tree.num_leaves != 1 or not tu.treedef_is_leaf(cond_tree) or \
                pred[0].shape != () or pred[0].dtype != dt.bool_:
            raise TypeError("while_loop cond_fun must return a boolean scalar, but "
                            f"{_fun_name(cond_fun)} returns {cond_tree} of type(s) "
                            f"({ew.fmt_types(pred)}). "
                            "Reduce it to one boolean (e.g. with jnp.all or jnp.any, or compare "
                            "with < or ==).")
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
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=cond_jaxpr,
                        body_jaxpr=body_jaxpr, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tu.tree_unflatten(in_tree, outs)


# -------------------------------------------------------------------- scan

def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns (carry, stacked ys)."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    return _scan(f, init, xs, length, reverse, unroll, _Body("scan", "f", f, 0))


def _scan(f: Callable, init, xs, length, reverse, unroll, f_body: _Body):
    init_leaves, init_tree, init_avals, init_paths = _flatten(init, "scan init")
    xs_leaves, xs_tree, xs_avals, xs_paths = _flatten(xs, "scan xs")
    length = _scan_length(xs_avals, xs_paths, length)
    x_avals = [a.update(shape=a.shape[1:]) for a in xs_avals]
    unroll = _scan_unroll(unroll, length)
    in_tree = tu.treedef_tuple([init_tree, xs_tree])

    def body(args):
        out = f(*args)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"scan body function must return a pair (carry, y), got "
                            f"{tu.tree_structure(out)}.")
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
    operands = [*consts, *init_leaves, *xs_leaves]
    outs = scan_p.bind(*operands, jaxpr=jaxpr, length=length, reverse=bool(reverse),
                       unroll=unroll, num_consts=len(consts), num_carry=num_carry,
                       linear=(False,) * len(operands))
    return (tu.tree_unflatten(init_tree, outs[:num_carry]),
            tu.tree_unflatten(ys_tree, outs[num_carry:]))


def _scan_length(xs_avals, xs_paths, length) -> int:
    for a, p in zip(xs_avals, xs_paths):
        if a.ndim == 0:
            raise TypeError(f"scan got a value with no leading axis to scan over: "
                            f"xs{tu.keystr(p)} of type {a.str_short()}")
    sizes = {a.shape[0] for a in xs_avals}
    if length is not None:
        if isinstance(length, Tracer):
            raise TypeError("scan: the `length` argument must be a concrete Python int, got a "
                            f"traced value {length!r}")
        length = int(length)
        if sizes and sizes != {length}:
            raise ValueError(f"scan got `length` argument of {length} which disagrees with the "
                             f"leading axis sizes {sorted(sizes)} of xs")
        return length
    if not sizes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    if len(sizes) > 1:
        shapes = ", ".join(f"xs{tu.keystr(p)}.shape[0]={a.shape[0]}"
                           for a, p in zip(xs_avals, xs_paths))
        raise ValueError(f"scan got values with different leading axis sizes: {shapes}")
    return sizes.pop()


def _scan_unroll(unroll, length: int) -> int:
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    if isinstance(unroll, Tracer) or int(unroll) != unroll or unroll < 0:
        raise ValueError(f"scan: `unroll` must be a bool or a non-negative int, got {unroll!r}")
    return int(unroll)


def map(f: Callable, xs, *, batch_size: int | None = None):  # noqa: A001 (JAX's name)
    """``stack([f(x) for x in xs])`` over the leading axis of (a pytree of) ``xs``, as a scan."""
    if batch_size is not None:
        raise NotImplementedError("lax.map: batch_size is not supported; apply vmap inside f "
                                  "to batch the mapped function.")
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys


# --------------------------------------------------------------- fori_loop

def _increment(i):
    """``i + 1`` with a literal of i's own type (weak bit included)."""
    return ew.add_p.bind(i, Literal(1, ShapedArray((), i.dtype, i.weak_type)))


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    A scan when both bounds are concrete (reverse-differentiable), else a while_loop.
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
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
        start, stop = int(np.asarray(lower)), int(np.asarray(upper))

        def scanned(carry, _):
            i, x = carry
            return (_increment(i), step(i, x)), None

        (_, result), _ = _scan(scanned, (start, init_val), None, max(stop - start, 0), False,
                               False if unroll is None else unroll, body._replace(index=1))
        return result
    if unroll not in (None, False, 1):
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    if lo.dtype != dtype:
        lower = _convert(lower, dtype)
    if hi.dtype != dtype:
        upper = _convert(upper, dtype)

    def loop_cond(carry):
        i, stop, _ = carry
        return ew.lt_p.bind(i, stop)

    def loop_body(carry):
        i, stop, x = carry
        return _increment(i), stop, step(i, x)

    _, _, result = _while_loop(loop_cond, loop_body, (lower, upper, init_val),
                               body._replace(index=2))
    return result


def _fori_dtype(lo: ShapedArray, hi: ShapedArray):
    """Equal bound dtypes; a weakly typed bound takes the other's signed integer dtype."""
    for a in (lo, hi):
        if a.shape != () or a.dtype.kind not in "iu":
            raise TypeError(f"fori_loop bounds must be integer scalars, got lower {lo.str_short()} "
                            f"and upper {hi.str_short()}")
    if lo.dtype == hi.dtype:
        return lo.dtype
    if dt.is_signed(lo.dtype) and dt.is_signed(hi.dtype) and lo.weak_type != hi.weak_type:
        return hi.dtype if lo.weak_type else lo.dtype
    raise TypeError(f"lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo.str_short()} and {hi.str_short()}")
