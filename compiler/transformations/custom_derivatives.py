"""custom_jvp and custom_vjp: user-defined differentiation rules for Python functions.

Outside any trace a custom function just runs its Python function (evaluation
ignores the rules). Inside a trace it is staged out as one node,
``custom_jvp_call_jaxpr`` or ``custom_vjp_call_jaxpr``, holding the function's
jaxpr and its rule as a memoized ``Thunk``; the passes then apply the rules
(the node primitives and their rules are in ``jaxprc.lax.custom_derivatives``).

Operands of a node: the values its rule closes over, the values its function
closes over, then the arguments. Rule jaxprs take the rule's closed-over
values first. Rules are traced when the node is bound, while whatever they
close over is alive, with the call's own values: outside ``jit`` they can
branch on primal values. A rule calling its own custom function (with the
same types and non-differentiable arguments, compared by value where hashable)
refers to the thunk being formed, so the recursion ends and the printed program
names the rule once. Unlike JAX, whose rule thunks wait for differentiation,
tracing at bind is what lets rules close over live tracers and branch on
concrete values; the price is one trace of each rule per call site.

The custom_vjp ``bwd`` is kept as a Python function: transposition calls it,
on concrete values outside ``jit`` (a ``print`` in it shows numbers).
"""
from __future__ import annotations

import functools
import inspect
import threading
import weakref
from typing import Callable, Sequence

import numpy as np

from ..ir import dtypes as dt
from .. import lax
from ..ir.core import ClosedJaxpr, Jaxpr, ShapedArray, Thunk, Var
from ..lax.custom_derivatives import custom_jvp_call_jaxpr_p, custom_vjp_call_jaxpr_p
from ..lax.linear_call import linear_call_p
from ..ir.tracing import (Tracer, UnexpectedTracerError, close_over_consts, current_builder, eval_jaxpr,
                          get_aval, trace_to_jaxpr)
from ..ir.tree_util import (keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_structure,
                            tree_unflatten, treedef_is_leaf)
from .nested_tracing import trace_hoisting_consts, trace_on_values
from ..passes.jvp import Zero, instantiate_zeros, is_differentiable, tangent_aval
from ..engine.traceback_filtering import api_boundary

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "SymbolicZero",
           "CustomVJPPrimal", "custom_vjp_primal_tree_values", "zero_from_primal", "linear_call"]


class SymbolicZero:
    """A zero tangent or cotangent given to a rule defined with ``symbolic_zeros=True``.

    Like JAX's, it answers the attributes of its type (``shape``, ``dtype``, ``ndim``,
    ``size``, ``weak_type``) without holding an array.
    """

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __getattr__(self, name):
        if name == "aval":             # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.aval, name)

    @staticmethod
    def from_primal_value(value) -> SymbolicZero:
        """The symbolic zero tangent of ``value``: float0 for integers and booleans."""
        return SymbolicZero(tangent_aval(get_aval(value)))

    def instantiate(self):
        if self.aval.dtype == dt.float0:        # no program value: a host zero, as in JAX
            return np.zeros(self.aval.shape, dt.float0)
        return lax.full(self.aval.shape, 0, self.aval.dtype)

    def __repr__(self):
        return f"SymbolicZero({self.aval.str_short()})"


def zero_from_primal(x, symbolic_zeros: bool = False):
    """Zero tangents for the primal pytree ``x``, of the tangent types JAX gives: the primal's
    dtype and weak type for floats, float0 for integers and booleans; SymbolicZeros when
    ``symbolic_zeros``."""
    def zero(leaf):
        if symbolic_zeros:
            return SymbolicZero.from_primal_value(leaf)
        aval = get_aval(leaf)
        return lax.full_like(leaf, 0) if is_differentiable(aval) else np.zeros(aval.shape, dt.float0)
    return tree_map(zero, x)


class CustomVJPPrimal:
    """A primal argument of a ``symbolic_zeros=True`` custom_vjp fwd: its value and whether it is
    perturbed (differentiated)."""

    def __init__(self, value, perturbed: bool):
        self.value, self.perturbed = value, perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


# ------------------------------------------------------------- arguments

def _nondiff_positions(fun: Callable, nums: Sequence[int], names: Sequence[str]) -> tuple[int, ...]:
    """``nondiff_argnums`` plus the positions of the parameters named in ``nondiff_argnames``."""
    names = (names,) if isinstance(names, str) else tuple(names)
    positions = set(nums)
    if names:
        try:
            params = list(inspect.signature(fun).parameters)
        except (TypeError, ValueError):
            raise TypeError(f"{_name(fun)}: nondiff_argnames needs a function with a signature") from None
        for n in names:
            if n not in params:
                raise ValueError(f"{_name(fun)}: nondiff_argnames entry {n!r} is not a parameter of the "
                                 f"function (parameters: {params})")
            positions.add(params.index(n))
    return tuple(sorted(positions))


def custom_vjp_primal_tree_values(tree):
    """``tree`` with each ``CustomVJPPrimal`` (what a ``symbolic_zeros`` fwd receives) replaced
    by its value."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_map(value, tree)


def _resolve_kwargs(fun: Callable, args, kwargs, kind: str) -> tuple:
    """The call's arguments as positions (inspect.signature), positional defaults filled in, so
    the rules see every argument; keyword-only parameters left at their defaults are dropped
    (the function uses its default), keyword-only arguments passed are an error (as in JAX)."""
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):       # no signature (some builtins): positions as given
        if kwargs:
            raise TypeError(f"{_name(fun)}: keyword arguments need a function with a signature") from None
        return tuple(args)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(_unresolved(kind, fun, str(e))) from None
    bound.apply_defaults()
    passed = [k for k in bound.kwargs if k in kwargs]
    if passed:
        raise TypeError(_unresolved(kind, fun, "The following keyword arguments could not be resolved "
                                               f"to positions: {', '.join(passed)}"))
    return tuple(bound.args)


def _unresolved(kind: str, fun, error: str) -> str:
    """JAX's text (users match it in tests): the call's arguments do not map to positions."""
    return (f"The input arguments to the {kind}-decorated function {_name(fun)} could not be resolved "
            f"to positional-only arguments. Binding failed with the error:\n{error}")


def _jax_type(aval: ShapedArray) -> str:
    """A type as JAX's error messages write it: ``float32[3]``."""
    name = "float0" if aval.dtype == dt.float0 else aval.dtype.name     # numpy calls it void
    return f"{name}[{','.join(map(str, aval.shape))}]"


def _name(f) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


def _split(args, nondiff_argnums):
    static = [args[i] for i in nondiff_argnums]
    dynamic = [a for i, a in enumerate(args) if i not in nondiff_argnums]
    return static, dynamic


def _merger(nondiff_argnums, n_args):
    def merge(static, dynamic):
        static, dynamic = iter(static), iter(dynamic)
        return [next(static) if i in nondiff_argnums else next(dynamic) for i in range(n_args)]
    return merge


def _check_nondiff_argnums(nums, n_args, fun):
    for i in nums:
        if not 0 <= i < n_args:
            raise TypeError(f"{_name(fun)}: nondiff_argnums entry {i} is out of range for a call with "
                            f"{n_args} positional arguments")


# ---------------------------------------------------------------- tracing

def _hoist_tracer_consts(cj: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Move the consts that are tracers of enclosing traces into leading inputs."""
    j = cj.jaxpr
    traced = [isinstance(c, Tracer) for c in cj.consts]
    if not any(traced):
        return cj, []
    keep = [(v, c) for v, c, t in zip(j.constvars, cj.consts, traced) if not t]
    hoisted = [(v, c) for v, c, t in zip(j.constvars, cj.consts, traced) if t]
    jaxpr = Jaxpr([v for v, _ in keep], [v for v, _ in hoisted] + j.invars, j.outvars, j.eqns)
    return ClosedJaxpr(jaxpr, [c for _, c in keep]), [c for _, c in hoisted]


def _with_leading_inputs(cj: ClosedJaxpr, avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """``cj`` taking (and ignoring) extra leading inputs of the given types."""
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [Var(a) for a in avals] + j.invars, j.outvars, j.eqns), cj.consts)


class _RulesBeingFormed(threading.local):
    """Rules being formed by this thread, by (custom function, rule kind, input types): a call
    met while forming a rule for the same key refers to that rule's thunk (a rule calling its own
    function). Per thread: another thread forming the same rule is not a recursive call."""

    def __init__(self):
        self.by_key: dict = {}


_FORMING = _RulesBeingFormed()


class _Forming:
    def __init__(self, thunk):
        self.thunk = thunk
        self.const_objs: list | None = None    # the rule's closed-over tracers, once known
        self.recursive = False


class RuleThunk(Thunk):
    """The memoized jaxpr of a custom rule; ``consts`` are the tracers it closes over (operands
    of the node). ``for_nonzeros`` re-traces a symbolic-zeros rule for one tangent pattern."""

    def __init__(self, fn, name, retrace=None):
        super().__init__(fn, name)
        self.retrace = retrace
        self.fwd_store = None     # custom_vjp: the residuals' tree, filled when fwd is traced
        self.out_zeros = None     # custom_jvp: {tangent pattern: outputs the rule gave SymbolicZeros}

    def zero_outputs(self, nonzeros):
        """Which output tangents the rule traced for ``nonzeros`` returned as SymbolicZero (they are
        zeros for the jvp that follows, as in JAX); None when unknown."""
        return (self.out_zeros or {}).get(tuple(nonzeros))

    def settle(self, value: ClosedJaxpr) -> None:
        """Memoize a value formed eagerly, outside ``__call__``."""
        self._value, self._fn = value, None

    def for_nonzeros(self, nonzeros):
        if self.retrace is None:
            return None
        try:
            return self.retrace(nonzeros)
        except Exception:  # noqa: BLE001 -- e.g. it closes over a finished trace: use the full rule
            return None


def _form_rule(key, name: str, trace: Callable[[], ClosedJaxpr], retrace=None):
    """Trace a rule now (see module doc); returns its thunk and the tracers it closes over.

    When a rule cannot be traced now (e.g. it branches on a value under jit), its thunk stays
    lazy and raises the error when differentiation needs the rule.
    """
    entry = _FORMING.by_key.get(key)
    if entry is not None:
        entry.recursive = True
        return entry.thunk, list(entry.const_objs or [])

    def form():
        cj, objs = _hoist_tracer_consts(trace())
        if objs:
            raise ValueError(f"the custom rule {name} closes over traced values of a computation "
                             "that has finished; define the custom function where those values are "
                             "live, or pass them as arguments")
        return cj
    thunk = RuleThunk(form, name, retrace)
    entry = _FORMING.by_key[key] = _Forming(thunk)
    try:
        cj, objs = _hoist_tracer_consts(trace())
        if objs and entry.recursive:       # the recursive calls must pass these values too
            entry.const_objs, first = objs, objs
            cj, objs = _hoist_tracer_consts(trace())
            cj = _order_consts(cj, objs, first)
            objs = first
    except Exception:
        return thunk, []
    finally:
        del _FORMING.by_key[key]
    thunk.settle(cj)
    return thunk, objs


def _retrace_as(key, thunk: RuleThunk, consts, trace: Callable):
    """Run ``trace`` (a rule traced again for one zero pattern) with ``thunk`` standing for the
    rule of the calls it makes to its own function at the same types: those need no rule of their
    own, so the user's rule runs once per pattern (JAX runs it once). Not when the rule closes over
    traced values: a call's node would lack them."""
    if consts or key in _FORMING.by_key:
        return trace()
    _FORMING.by_key[key] = _Forming(thunk)
    try:
        return trace()
    finally:
        del _FORMING.by_key[key]


def _order_consts(cj: ClosedJaxpr, objs, wanted) -> ClosedJaxpr:
    """Reorder the leading const inputs of ``cj`` (values ``objs``) to the order ``wanted``."""
    pos = {id(o): i for i, o in enumerate(objs)}
    if sorted(pos) != sorted(id(o) for o in wanted):
        raise ValueError("a recursive custom rule closes over different values on its second trace")
    j, n = cj.jaxpr, len(objs)
    invars = [j.invars[pos[id(o)]] for o in wanted] + j.invars[n:]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.outvars, j.eqns), cj.consts)


def _static_key(static) -> tuple:
    """Non-differentiable arguments as a memo key: containers by structure, hashable leaves by
    value (a rule rebuilding ``(0, 1)`` still matches), tracers and other leaves by identity."""
    leaves, tree = tree_flatten(list(static))
    return (tree, *(_leaf_key(x) for x in leaves))


def _leaf_key(x):
    if isinstance(x, Tracer):
        return ("id", id(x))
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return ("value", type(x), x)


def _check_avals(what: str, expected: Sequence[ShapedArray], got: Sequence[ShapedArray], labels=None):
    for i, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape or e.dtype != g.dtype:
            where = labels[i] if labels else f"output {i}"
            raise TypeError(f"{what}: {where} has shape/dtype {g.strip_weak_type().str_short()}, "
                            f"expected {e.strip_weak_type().str_short()}.")


def forward_def_attr(self, name):
    """``__getattr__`` of the custom-function decorators: ``def*`` names come from the wrapped
    function, so stacked decorators (``custom_vjp`` over ``custom_vmap``) each take their rule."""
    if name.startswith("def"):
        return getattr(self.fun, name)
    raise AttributeError(name)


# -------------------------------------------------------------- custom_jvp

class custom_jvp:
    """A function with a custom JVP rule (``defjvp``), used by jvp, grad and everything built on
    them; vmap, jit and control flow keep the rule attached.

    ``nondiff_argnums``: arguments the rule receives first, before ``primals`` and ``tangents``;
    they may be any Python values, traced arrays included (closed over).

    >>> @jaxprc.custom_jvp
    ... def f(x):
    ...     return jnp.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return f(x), 10.0 * t                     # not sin's derivative: the rule decides
    >>> print(jaxprc.grad(f)(0.0))
    10.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    __getattr__ = forward_def_attr

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self, instance)

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``."""
        self.jvp, self.symbolic_zeros = jvp, symbolic_zeros
        return jvp

    def defjvps(self, *tangent_fns: Callable | None) -> None:
        """One rule per argument: ``fn(t, primal_out, *primals) -> tangent_out contribution``
        (None: no contribution); the contributions are added."""
        if self.nondiff_argnums:
            raise TypeError("defjvps is not compatible with nondiff_argnums")

        def jvp(primals, tangents):
            out = self(*primals)
            contributions = [fn(t, out, *primals) for fn, t in zip(tangent_fns, tangents) if fn is not None]
            if not contributions:
                return out, zero_from_primal(out)
            return out, functools.reduce(lambda a, b: tree_map(_add_tangents, a, b), contributions)
        jvp.__name__ = f"{_name(self.fun)}_jvps"
        self.defjvp(jvp)

    @api_boundary
    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {_name(self.fun)} using defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_jvp")
        if current_builder() is None:        # evaluation ignores the rule
            return self.fun(*args)
        _check_nondiff_argnums(self.nondiff_argnums, len(args), self.fun)
        static, dynamic = _split(args, self.nondiff_argnums)
        static = [tree_map(_nondiff_value, s) for s in static]
        merge = _merger(self.nondiff_argnums, len(args))
        flat_args, in_tree = tree_flatten(tuple(dynamic))
        in_avals = [get_aval(x) for x in flat_args]
        fun_cj, fun_consts, out_tree = _trace_custom_fun(self.fun, static, merge, in_tree, flat_args)
        out_avals = fun_cj.out_avals
        diff_in = [is_differentiable(a) for a in in_avals]
        rule_name = _name(self.jvp)
        out_zeros = {}

        def flat_rule(nonzeros):
            def rule(*leaves):
                primals, tangents = list(leaves[:len(in_avals)]), iter(leaves[len(in_avals):])
                ts = [next(tangents) if nz else self._zero_tangent(a)
                      for a, nz in zip(in_avals, nonzeros)]
                outs, out_zeros[tuple(nonzeros)] = self._run_rule(static, in_tree, primals, ts, out_tree,
                                                                  out_avals)
                return outs
            return rule

        def trace_rule(nonzeros=tuple(diff_in)):
            avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
            return trace_on_values(flat_rule(nonzeros), flat_args, rule_name, avals)

        def retrace(nonzeros):
            cj = _retrace_as(key, thunk, rule_consts, lambda: trace_rule(nonzeros))
            if cj.consts and any(isinstance(c, Tracer) for c in cj.consts):
                return None
            return cj
        key = (id(self), "jvp", in_tree, tuple(in_avals), _static_key(static))
        thunk, rule_consts = _form_rule(key, rule_name, trace_rule, retrace if self.symbolic_zeros else None)
        if thunk.out_zeros is None:
            thunk.out_zeros = out_zeros
        rule_avals = [get_aval(c) for c in rule_consts]
        fun_cj = _with_leading_inputs(fun_cj, rule_avals)
        outs = custom_jvp_call_jaxpr_p.bind(*rule_consts, *fun_consts, *flat_args, fun_jaxpr=fun_cj,
                                            jvp_jaxpr_thunk=thunk,
                                            num_consts=len(rule_consts) + len(fun_consts),
                                            symbolic_zeros=self.symbolic_zeros)
        return tree_unflatten(out_tree, outs)

    def _zero_tangent(self, aval):
        t = tangent_aval(aval)
        if self.symbolic_zeros:
            return SymbolicZero(t)
        return np.zeros(t.shape, dt.float0) if t.dtype == dt.float0 else lax.full(t.shape, 0, t.dtype)

    def _run_rule(self, static, in_tree, primals, tangents, out_tree, out_avals):
        """Call the user's rule; check its outputs against the function's; flat outputs, and which
        output tangents it gave as SymbolicZero."""
        name = _name(self.jvp)
        primals_tree = tuple(tree_unflatten(in_tree, primals))
        tangents_tree = tuple(tree_unflatten(in_tree, tangents))
        result = self.jvp(*static, primals_tree, tangents_tree)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"Custom JVP rule {name} for function {_name(self.fun)} must produce a pair "
                            f"(list or tuple of length two) representing primal and tangent outputs, "
                            f"but got {result!r}.")
        primal_out, tangent_out = result
        p_leaves, p_tree = tree_flatten(primal_out)
        t_leaves, t_tree = tree_flatten(tangent_out, is_leaf=lambda x: isinstance(x, SymbolicZero))
        if t_tree != p_tree:
            raise TypeError(f"Custom JVP rule {name} for function {_name(self.fun)} must produce primal "
                            f"and tangent outputs with equal container (pytree) structures, but got "
                            f"{p_tree} and {t_tree} respectively.")
        fname = _name(self.fun)
        got_avals = [get_aval(x) for x in p_leaves]
        got, want = (str(tree_unflatten(tree, [_jax_type(a) for a in avals])).replace("'", "")
                     for tree, avals in ((p_tree, got_avals), (out_tree, out_avals)))
        pair = (f"Custom JVP rule {name} for function {fname} must produce a pair (list or tuple of length "
                "two) where the first element represents the primal output (equal in value to the output "
                f"of the custom_jvp-decorated function {fname}, and in particular ")
        if p_tree != out_tree:          # JAX's texts, which users match
            raise TypeError(pair + "of the same container/pytree structure), but instead the JVP rule "
                            f"output's first element had container/pytree structure:\n    {got}\nwhile the "
                            f"custom_jvp-decorated function {fname} had output container/pytree "
                            f"structure:\n    {want}.")
        if any(g.shape != w.shape or g.dtype != w.dtype for g, w in zip(got_avals, out_avals)):
            raise TypeError(pair + "with leaves of the same shape/dtype), but instead the JVP rule output's "
                            f"first element had shapes/dtypes of:\n    {got}\nwhile the custom_jvp-decorated "
                            f"function {fname} had output shapes/dtypes of:\n    {want}")
        tangents_out, mismatches = [], []
        for p, t in zip(p_leaves, t_leaves):
            pa = get_aval(p).strip_weak_type()
            expected = tangent_aval(pa)        # float0 for an integer or boolean output, as in JAX
            ta = t.aval if isinstance(t, SymbolicZero) else get_aval(t).strip_weak_type()
            if ta.shape != expected.shape or ta.dtype != expected.dtype:
                mismatches.append((pa, expected, ta))
            elif is_differentiable(pa):        # integer outputs: their float0 tangents are dropped
                tangents_out.append(t.instantiate() if isinstance(t, SymbolicZero) else t)
        if len(mismatches) == 1 and len(p_leaves) == 1:
            pa, expected, ta = mismatches[0]
            raise TypeError("Custom JVP rule must produce primal and tangent outputs with corresponding "
                            f"shapes and dtypes. Expected {_jax_type(expected)} (tangent type of "
                            f"{_jax_type(pa)}) but got {_jax_type(ta)}.")
        if mismatches:
            raise TypeError("Custom JVP rule must produce primal and tangent outputs with corresponding "
                            "shapes and dtypes, but got:\n" + "\n".join(
                                f"  primal {_jax_type(pa)} with tangent {_jax_type(ta)}, expecting "
                                f"tangent {_jax_type(expected)}" for pa, expected, ta in mismatches))
        return list(p_leaves) + tangents_out, tuple(isinstance(t, SymbolicZero) for t in t_leaves)


def _nondiff_value(x):
    """A traced non-differentiable argument is closed over with a zero derivative (as in JAX).
    The stopped value is marked, so a rule passing it back to its own function keeps the same
    object, and the recursive call finds the rule being formed (``_static_key``)."""
    if not isinstance(x, Tracer) or _STOPPED.get(id(x)) is x:
        return x
    stopped = lax.stop_gradient(x)
    _STOPPED[id(stopped)] = stopped
    return stopped


_STOPPED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _trace_custom_fun(fun, static, merge, in_tree, flat_args):
    """The custom function itself on the flat dynamic arguments: its jaxpr (closed-over values
    hoisted to leading inputs), those values, and its output tree."""
    store = {}

    def flat_fun(*leaves):
        out_leaves, store["out_tree"] = tree_flatten(fun(*merge(static, tree_unflatten(in_tree, leaves))))
        return out_leaves
    cj, consts = trace_hoisting_consts(flat_fun, flat_args, _name(fun))
    return cj, consts, store["out_tree"]


def _add_tangents(a, b):
    if isinstance(a, SymbolicZero):
        return b
    if isinstance(b, SymbolicZero):
        return a
    return lax.add(a, b)


# -------------------------------------------------------------- custom_vjp

_NONDIFF_TRACER = (
    "Found a JAX Tracer object passed as an argument to a custom_vjp function in a position "
    "indicated by nondiff_argnums as non-differentiable. Tracers cannot be passed as "
    "non-differentiable arguments to custom_vjp functions; instead, nondiff_argnums should only be "
    "used for arguments that can't be or contain JAX tracers, e.g. function-valued arguments. In "
    "particular, array-valued arguments should typically not be indicated as nondiff_argnums: pass "
    "them as regular arguments, save them as residuals in fwd, and return None for them from bwd.")


class custom_vjp:
    """A function with a custom VJP rule: ``defvjp(fwd, bwd)``. Reverse mode (grad, vjp) uses
    ``fwd`` and ``bwd``; forward mode (jvp) is an error; vmap, jit and control flow keep the
    rules attached.

    ``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, out_cotangent) -> a
    tuple with one cotangent (or None) per non-static argument``.

    >>> @jaxprc.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> def fwd(x):
    ...     return x, None                             # no residuals
    >>> def bwd(residuals, g):
    ...     return (jnp.clip(g, -1.0, 1.0),)
    >>> clip_gradient.defvjp(fwd, bwd)
    >>> print(jaxprc.grad(lambda x: 5.0 * clip_gradient(x))(3.0))
    1.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = self.optimize_remat = False

    __getattr__ = forward_def_attr

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self, instance)

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Set the rules. ``optimize_remat`` asks JAX to recompute ``fwd``'s residuals in the
        backward pass instead of saving them (jaxprc saves them either way); what it changes, as
        in JAX, is where the primal value comes from when reverse mode is staged (under jit or
        remat): from the function itself, ``fwd`` then giving only the residuals."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros
        self.optimize_remat = optimize_remat

    @api_boundary
    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {_name(self.fun)} using defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
        if current_builder() is None:        # evaluation ignores the rules
            return self.fun(*args)
        _check_nondiff_argnums(self.nondiff_argnums, len(args), self.fun)
        static, dynamic = _split(args, self.nondiff_argnums)
        for s in static:
            if any(isinstance(leaf, Tracer) for leaf in tree_flatten(s)[0]):
                raise UnexpectedTracerError(_NONDIFF_TRACER)
        merge = _merger(self.nondiff_argnums, len(args))
        flat_args, in_tree = tree_flatten(tuple(dynamic))
        in_avals = [get_aval(x) for x in flat_args]
        fun_cj, fun_consts, out_tree = _trace_custom_fun(self.fun, static, merge, in_tree, flat_args)
        out_avals = fun_cj.out_avals
        store = {}
        fwd_name = _name(self.fwd)

        diff_in = tuple(is_differentiable(a) for a in in_avals)

        def flat_fwd(*leaves, perturbed=diff_in, store=store):
            if self.symbolic_zeros:
                leaves = [CustomVJPPrimal(x, p) for x, p in zip(leaves, perturbed)]
            result = self.fwd(*merge(static, tree_unflatten(in_tree, leaves)))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                fname = _name(self.fun)
                raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fname} must produce a "
                                "pair (list or tuple of length two) where the first element represents "
                                "the primal output (equal to those of the custom_vjp-decorated function "
                                f"{fname}) and the second element represents residuals (i.e. values "
                                "stored from the forward pass for use on the backward pass), but "
                                f"instead of a pair the fwd rule {fwd_name} produced {result!r}.")
            out, res = result
            o_leaves, o_tree = tree_flatten(out)
            if o_tree != out_tree:
                raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {_name(self.fun)} must "
                                "produce primal outputs with the same container (pytree) structure as "
                                f"the function: expected {out_tree}, got {o_tree}.")
            _check_avals(f"Custom VJP fwd rule {fwd_name} for function {_name(self.fun)} must produce "
                         "primal outputs with the function's shapes and dtypes", out_avals,
                         [get_aval(x) for x in o_leaves], [f"primal output {i}" for i in range(len(o_leaves))])
            r_leaves, store["res_tree"] = tree_flatten(res)
            return list(o_leaves) + list(r_leaves)

        key = (id(self), "fwd", in_tree, tuple(in_avals), _static_key(static))
        thunk, rule_consts = _form_rule(key, fwd_name, lambda: trace_on_values(flat_fwd, flat_args, fwd_name))
        if thunk.fwd_store is None or "res_tree" in store:   # a recursive call shares its caller's
            thunk.fwd_store = store
        def fwd_for(perturbed):
            variant = {}
            cj = _retrace_as(key, thunk, rule_consts, lambda: trace_on_values(
                functools.partial(flat_fwd, perturbed=perturbed, store=variant), flat_args, fwd_name))
            return cj, variant
        bwd = CustomBwd(self, static, in_tree, in_avals, out_tree, out_avals, thunk,
                        fwd_for if self.symbolic_zeros else None)
        fun_cj = _with_leading_inputs(fun_cj, [get_aval(c) for c in rule_consts])
        outs = custom_vjp_call_jaxpr_p.bind(
            *rule_consts, *fun_consts, *flat_args, fun_jaxpr=fun_cj, fwd_jaxpr_thunk=thunk, bwd=bwd,
            num_consts=len(rule_consts) + len(fun_consts),
            out_trees=(str(out_tree),), symbolic_zeros=self.symbolic_zeros)
        return tree_unflatten(out_tree, outs)


class CustomBwd(Thunk):
    """The ``bwd`` param: the user's Python function behind a flat calling convention,
    ``call(residuals..., cotangents of the differentiable outputs...)`` -> cotangents of the
    differentiable inputs (``Zero`` where bwd returned None). As a thunk it is that function's
    jaxpr, traced when first needed (for the text form); the parsed copy is a plain thunk."""

    runs_on_values = True     # transposition may call it on concrete arrays

    def __init__(self, cvjp: custom_vjp, static, in_tree, in_avals, out_tree, out_avals, fwd_thunk,
                 fwd_for=None):
        self.cvjp, self.static = cvjp, static
        self.in_tree, self.in_avals = in_tree, in_avals
        self.out_tree, self.out_avals = out_tree, out_avals
        self._fwd_thunk = fwd_thunk   # residual types and structure come from fwd
        self._fwd_for = fwd_for       # symbolic_zeros: fwd traced for one perturbation pattern
        super().__init__(self._trace, _name(cvjp.bwd))

    def for_perturbed(self, perturbed):
        """``(fwd jaxpr, bwd)`` for a call where only the ``perturbed`` inputs are differentiated
        (symbolic_zeros: fwd sees ``CustomVJPPrimal.perturbed``, and its residuals may differ);
        None when the full rule must serve (no symbolic zeros, or fwd cannot be traced again)."""
        if self._fwd_for is None:
            return None
        try:
            cj, store = self._fwd_for(tuple(perturbed))
        except Exception:  # noqa: BLE001 -- e.g. fwd closes over a finished trace: use the full rule
            return None
        if any(isinstance(c, Tracer) for c in cj.consts):
            return None
        thunk = RuleThunk(None, self._fwd_thunk.name)
        thunk.settle(cj)
        thunk.fwd_store = store
        return cj, CustomBwd(self.cvjp, self.static, self.in_tree, self.in_avals, self.out_tree,
                             self.out_avals, thunk)

    optimize_remat = property(lambda self: self.cvjp.optimize_remat)
    res_tree = property(lambda self: self._fwd_thunk.fwd_store["res_tree"])
    res_avals = property(lambda self: list(self._fwd_thunk().out_avals[len(self.out_avals):]))

    def call(self, *args):
        n_res = len(self.res_avals)
        res, cts = args[:n_res], iter(args[n_res:])
        cvjp = self.cvjp
        full_cts = []
        for a in self.out_avals:
            if not is_differentiable(a):
                ct = np.zeros(a.shape, dt.float0)
            else:
                ct = next(cts)
                if isinstance(ct, Zero):
                    ct = SymbolicZero(ct.aval) if cvjp.symbolic_zeros else lax.full(a.shape, 0, a.dtype)
            full_cts.append(ct)
        result = cvjp.bwd(*self.static, tree_unflatten(self.res_tree, list(res)),
                          tree_unflatten(self.out_tree, full_cts))
        return self._check_output(result)

    def _check_output(self, result):
        name, fname = self.name, _name(self.cvjp.fun)
        args_tree = self.in_tree
        n_args = args_tree.num_nodes and len(tree_unflatten(args_tree, [0] * args_tree.num_leaves))
        if not isinstance(result, (tuple, list)) or len(result) != n_args:
            got = tree_structure(result, is_leaf=lambda x: x is None)
            raise TypeError("Custom VJP bwd rule must produce an output with "
                            "the same container (pytree) structure as the args tuple of the primal "
                            "function, and in particular must produce a tuple of length equal to the "
                            f"number of arguments to the primal function, but got bwd output structure "
                            f"{got} for primal input structure {args_tree}.")
        arg_subtrees = tree_unflatten(args_tree, list(range(args_tree.num_leaves)))
        out = []
        for i, (sub, r) in enumerate(zip(arg_subtrees, result)):
            leaves = _cotangent_leaves(r, sub)
            if leaves is None:
                tree = tree_structure(r, is_leaf=lambda x: x is None or isinstance(x, SymbolicZero))
                raise TypeError(f"Custom VJP bwd rule {name} for function {fname} must produce an output "
                                "with the same container (pytree) structure as the args tuple of the "
                                f"primal function: for argument {i} expected {tree_structure(sub)}, got {tree}.")
            out += leaves
        cts = []
        for i, (ct, a) in enumerate(zip(out, self.in_avals)):
            if not is_differentiable(a):
                continue
            if isinstance(ct, SymbolicZero) and (ct.aval.shape != a.shape or
                                                 ct.aval.dtype != tangent_aval(a).dtype):
                raise ValueError("Custom VJP bwd rule produced a SymbolicZero with a shape/dtype that does "
                                 "not match the corresponding input tangent shape/dtype: at "
                                 f"output{self._leaf_path(i)} the SymbolicZero had shape/dtype "
                                 f"{_jax_type(ct.aval)} while the corresponding input had shape/dtype "
                                 f"{_jax_type(a)}. Consider just returning a None here instead of a "
                                 "SymbolicZero object.")
            if ct is None or isinstance(ct, SymbolicZero):
                cts.append(Zero(a))
                continue
            ca = get_aval(ct)
            if ca.shape != a.shape or (ca.dtype != a.dtype and dt.is_inexact(ca.dtype)):
                what = "shapes" if ca.shape != a.shape else "dtypes"
                error = ValueError if ca.shape != a.shape else TypeError
                raise error("Custom VJP bwd rule must produce an output with the same type as the args "
                            f"tuple of the primal function, but at output{self._leaf_path(i)} the bwd rule "
                            f"produced an output of type {_jax_type(ca)} corresponding to an input of "
                            f"type {_jax_type(a)}, so the {what} do not match")
            if ca.dtype != a.dtype:
                ct = lax.convert_element_type(ct, a.dtype)
            cts.append(ct)
        return cts

    def _leaf_path(self, i: int) -> str:
        """Where leaf ``i`` of the arguments sits in the args tuple: ``[0]['a']``."""
        paths = tree_flatten_with_path(tree_unflatten(self.in_tree, range(self.in_tree.num_leaves)))[0]
        return keystr(paths[i][0])

    def _trace(self) -> ClosedJaxpr:
        ct_avals = [a for a in self.out_avals if is_differentiable(a)]
        return trace_to_jaxpr(lambda *a: [instantiate_zeros(c) for c in self.call(*a)],
                              self.res_avals + ct_avals, name=self.name)

    def __repr__(self):
        return f"CustomBwd({self.name})"


def _cotangent_leaves(result, expected) -> list | None:
    """The leaves of a bwd output for an argument of structure ``expected``, one per leaf there;
    as in JAX a None stands for a whole subtree (its cotangents are zero). None on a mismatch."""
    leaves = []

    def take(x, sub):
        tree = tree_structure(sub)
        if x is None:
            leaves.extend([None] * tree.num_leaves)
        elif treedef_is_leaf(tree) or tree.num_leaves == 1:    # JAX takes a leaf for a one-leaf node
            leaves.append(x)
        else:
            raise ValueError("a leaf where a subtree is expected")
    try:
        tree_map(take, result, expected, is_leaf=lambda x: x is None or isinstance(x, SymbolicZero))
    except ValueError:
        return None
    return leaves


# ------------------------------------------------------------ conveniences

def custom_gradient(fun: Callable) -> Callable:
    """``fun(*args) -> (out, vjp_fn)`` where ``vjp_fn(ct)`` gives the input cotangents (a tuple,
    or one value for one argument); ``vjp_fn`` may close over values computed by ``fun``."""
    from ..ir.tree_util import Partial

    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        out, vjp_fn = fun(*args)
        out_leaves, out_tree = tree_flatten(out)
        store = {}

        def flat_rule(*ct_leaves):
            cts, store["tree"] = tree_flatten(vjp_fn(tree_unflatten(out_tree, ct_leaves)))
            return cts
        ct_avals = [tangent_aval(get_aval(x)).strip_weak_type() for x in out_leaves]
        # the traced values the rule closes over become residuals; each call's rule travels in
        # its residuals' structure (Partial's function), so calls never mix up their rules
        rule, residuals = _hoist_tracer_consts(trace_to_jaxpr(flat_rule, ct_avals, name=_name(vjp_fn)))

        def run_rule(*residuals_and_ct):
            *res, ct = residuals_and_ct
            outs = eval_jaxpr(rule.jaxpr, rule.consts, *res, *tree_flatten(ct)[0])
            return tree_unflatten(store["tree"], outs)
        return out, Partial(run_rule, *residuals)

    def bwd(rule, ct):
        cts = rule(ct)
        return tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)
    wrapped.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: wrapped(*args))


def closure_convert(fun: Callable, *example_args):
    """``(converted, consts)``: ``converted(*args, *consts) == fun(*args)`` with the traced values
    ``fun`` closes over made explicit, so a custom_vjp can differentiate with respect to them.

    As in JAX only values that may carry a derivative (traced floating-point values) are hoisted;
    concrete values and traced integers stay closed over.
    """
    flat, in_tree = tree_flatten(example_args)
    store = {}

    def flat_fun(*leaves):
        out_leaves, store["tree"] = tree_flatten(fun(*tree_unflatten(in_tree, leaves)))
        return out_leaves
    cj = trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat], name=_name(fun))
    hoist = [isinstance(c, Tracer) and is_differentiable(c.aval) for c in cj.consts]
    j = cj.jaxpr
    jaxpr = Jaxpr([v for v, h in zip(j.constvars, hoist) if not h],
                  [v for v, h in zip(j.constvars, hoist) if h] + j.invars, j.outvars, j.eqns)
    closed = [c for c, h in zip(cj.consts, hoist) if not h]
    consts = [c for c, h in zip(cj.consts, hoist) if h]

    def converted(*args_and_consts):
        n_args = len(args_and_consts) - len(consts)
        leaves, tree = tree_flatten(args_and_consts[:n_args])
        if tree != in_tree:
            raise TypeError("The inputs to the closure produced by closure_convert must have the same "
                            "Pytree structure as the example arguments passed when closure_convert was "
                            f"called. Expected {in_tree}, but got {tree} (the closure of {_name(fun)} "
                            f"takes those arguments, then the {len(consts)} hoisted values).")
        outs = eval_jaxpr(jaxpr, closed, *args_and_consts[n_args:], *leaves)
        return tree_unflatten(store["tree"], outs)
    return converted, consts


# ------------------------------------------------------------- linear_call

def _with_inputs_at(cj: ClosedJaxpr, at: int, avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """``cj`` taking (and ignoring) extra inputs of the given types before its input ``at``."""
    j = cj.jaxpr
    invars = j.invars[:at] + [Var(a) for a in avals] + j.invars[at:]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.outvars, j.eqns), cj.consts)


def linear_call(fun: Callable, fun_transpose: Callable, residual_args, linear_args):
    """``fun(residual_args, linear_args)``, where ``fun`` is linear in ``linear_args`` and its
    transpose is ``fun_transpose(residual_args, cotangents) -> cotangents of linear_args``: reverse
    mode (and ``linear_transpose``) calls ``fun_transpose`` instead of transposing ``fun``, and the
    transpose of that call is ``fun`` again. Forward mode applies ``fun`` to the tangents; vmap maps
    both. Errors of ``fun_transpose`` (structure, types) show when it is needed, as in JAX.
    Outside any trace ``fun``'s jaxpr runs op by op (JAX's impl), without the transpose."""
    res_flat, res_tree = tree_flatten(residual_args)
    lin_flat, lin_tree = tree_flatten(linear_args)
    res_avals, lin_avals = [get_aval(x) for x in res_flat], [get_aval(x) for x in lin_flat]
    n_res = len(res_flat)
    store = {}

    def flat_fun(*leaves):
        out = fun(tree_unflatten(res_tree, leaves[:n_res]), tree_unflatten(lin_tree, leaves[n_res:]))
        out_leaves, store["out_tree"] = tree_flatten(out)
        return out_leaves
    callee, f_consts = close_over_consts(trace_to_jaxpr(flat_fun, res_avals + lin_avals, name=_name(fun)))
    out_tree, out_avals = store["out_tree"], callee.out_avals
    if current_builder() is None:
        return tree_unflatten(out_tree, eval_jaxpr(callee.jaxpr, [], *f_consts, *res_flat, *lin_flat))
    t_name = _name(fun_transpose)

    def flat_transpose(*leaves):
        cts = fun_transpose(tree_unflatten(res_tree, leaves[:n_res]), tree_unflatten(out_tree, leaves[n_res:]))
        ct_leaves, ct_tree = tree_flatten(cts)
        if ct_tree != lin_tree:      # JAX's text
            raise TypeError("transpose output pytree structure must match that of linear inputs, got "
                            f"output structure {ct_tree} and input structure {lin_tree}.")
        for i, (ct, a) in enumerate(zip(ct_leaves, lin_avals)):
            ca = get_aval(ct)
            if ca.shape != a.shape or ca.dtype != a.dtype:
                raise ValueError(f"linear_call transpose {t_name} for function {_name(fun)}: cotangent {i} "
                                 f"of the linear arguments: Expected cotangent type {_jax_type(a)} but got "
                                 f"{_jax_type(ca)}")
        return ct_leaves
    key = (id(fun_transpose), "linear_call", id(fun), res_tree, lin_tree, tuple(res_avals), tuple(lin_avals))
    thunk, t_consts = _form_rule(key, t_name, lambda: trace_to_jaxpr(
        flat_transpose, res_avals + list(out_avals), name=t_name))
    # callee and transpose both take every const: the transpose's, then the callee's
    t_avals, f_avals = [get_aval(c) for c in t_consts], [get_aval(c) for c in f_consts]
    n_t = len(t_consts)
    transpose = Thunk(lambda: _with_inputs_at(thunk(), n_t, f_avals), name=t_name) if f_consts else thunk
    callee = _with_inputs_at(callee, 0, t_avals)
    outs = linear_call_p.bind(*t_consts, *f_consts, *res_flat, *lin_flat, callee=callee,
                              transpose_thunk=transpose, num_consts=n_t + len(f_consts), num_res=n_res)
    return tree_unflatten(out_tree, outs)

# JAX's names for the primitives that stage a custom function (jaxprc's hold the rules as jaxprs)
custom_jvp_call_p = custom_jvp_call_jaxpr_p
custom_vjp_call_p = custom_vjp_call_jaxpr_p
