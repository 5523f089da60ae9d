"""``jaxprc.custom_batching``: ``custom_vmap`` (a function with a user-defined vmap rule) and
``sequential_vmap`` (one whose vmap is a loop), as JAX's ``jax.custom_batching``.

A call is traced and staged as one ``custom_vmap_call`` node holding the
function's jaxpr and the rule (compiler/lax/custom_batching.py); vmap calls the
rule, everything else runs the function. As in JAX, jvp differentiates the
function and batches the jvp with the rule differentiated, and reverse mode is
not supported (combine with ``custom_vjp`` on the outside for that).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from .custom_derivatives import _name, _resolve_kwargs, forward_def_attr
from ..ir.tracing import close_over_consts, get_aval, trace_to_jaxpr
from ..ir.tree_util import tree_flatten, tree_map, tree_unflatten
from ..lax.control_flow.loops import map as _lax_map
from ..lax.custom_batching import VmapRule, custom_vmap_call_p

__all__ = ["custom_vmap", "sequential_vmap"]


class custom_vmap:
    """``fun`` with a custom vmap rule, set by ``def_vmap``: ``rule(axis_size, in_batched, *args)
    -> (out, out_batched)``. ``in_batched`` is a list with one pytree of bools per argument
    (whether each leaf is batched); batched leaves have the batch axis first. ``out_batched`` is a
    pytree of bools with the output's structure; unbatched outputs are broadcast where needed."""

    def __init__(self, fun: Callable[..., Any]):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable | None = None

    __getattr__ = forward_def_attr

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self, instance)

    def def_vmap(self, vmap_rule: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
        """Set the vmap rule; returns it unchanged (usable as a decorator)."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vmap")
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {_name(self.fun)} "
                                 "using def_vmap.")
        flat_args, in_tree = tree_flatten(args)
        store = {}

        def flat_fun(*leaves):
            out_leaves, store["out_tree"] = tree_flatten(self.fun(*tree_unflatten(in_tree, leaves)))
            return out_leaves
        call, consts = close_over_consts(trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat_args],
                                                        name=_name(self.fun)))
        out_tree = store["out_tree"]
        rule = VmapRule(_name(self.vmap_rule), len(consts),
                        fn=FlatVmapRule(self.vmap_rule, _name(self.fun), in_tree, out_tree, consts))
        outs = custom_vmap_call_p.bind(*consts, *flat_args, call=call, rule=rule)
        return tree_unflatten(out_tree, outs)


class FlatVmapRule:
    """The user's rule on flat lists: ``(axis_size, in_batched, *args) -> (outs, out_batched)``,
    its output structure checked against the function's. ``closed``: the values the function
    closes over (the node's leading operands), which the rule may use too. Equal when the rule and
    the structures are: tracing a function again gives an equal program."""

    __slots__ = ("rule", "fun_name", "in_tree", "out_tree", "closed")

    def __init__(self, rule: Callable, fun_name: str, in_tree, out_tree, closed=()):
        self.rule, self.fun_name, self.in_tree, self.out_tree = rule, fun_name, in_tree, out_tree
        self.closed = tuple(closed)

    def __call__(self, axis_size, in_batched, *args):
        rule_name = _name(self.rule)
        result = self.rule(axis_size, list(tree_unflatten(self.in_tree, list(in_batched))),
                           *tree_unflatten(self.in_tree, list(args)))
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"custom vmap rule ({rule_name}) for function {self.fun_name} must return a "
                            f"pair (out, out_batched), got {result!r:.200}")
        out, out_batched = result
        outs, tree = tree_flatten(out)
        flags, flags_tree = tree_flatten(out_batched)
        if tree != flags_tree:     # JAX's texts
            raise ValueError("structure of output value and output batching specification returned by "
                             f"custom vmap rule ({rule_name}) do not match.\nOutput values: {tree}\n"
                             f"Batching spec: {flags_tree}")
        if tree != self.out_tree:
            raise ValueError(f"structure of output returned by custom vmap rule ({rule_name}) does not "
                             f"match that of original custom-vmapped function.\nOriginal output: "
                             f"{self.out_tree}\nRule output: {tree}")
        if not all(isinstance(b, (bool, np.bool_)) for b in flags):
            raise TypeError(f"custom vmap rule ({rule_name}) for function {self.fun_name}: its out_batched "
                            f"must be a pytree of bools (one per output), got {out_batched!r:.200}")
        return outs, [bool(b) for b in flags]

    def __eq__(self, other):
        return (type(other) is FlatVmapRule and self.rule is other.rule and self.in_tree == other.in_tree
                and self.out_tree == other.out_tree)

    def __hash__(self):
        return hash((id(self.rule), self.in_tree, self.out_tree))


def sequential_vmap(f: Callable[..., Any]) -> custom_vmap:
    """A ``custom_vmap`` whose rule maps ``f`` over the batched arguments with ``lax.map`` (a
    loop), for functions that do not batch natively."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        args = list(args)
        mapped = tree_map(lambda b, x: x if b else None, in_batched, args)
        fixed = tree_map(lambda b, x: None if b else x, in_batched, args)

        def one(mapped_args):
            return f(*tree_map(lambda b, m, x: m if b else x, in_batched, mapped_args, fixed))
        out = _lax_map(one, mapped)
        return out, tree_map(lambda _: True, out)
    rule.__name__ = f"sequential_vmap_{_name(f.fun)}"
    return f
