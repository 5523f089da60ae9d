"""``jaxprc.ad_checkpoint``: ``checkpoint`` (alias ``remat``), its saving policies and
``checkpoint_name`` -- trading compute for memory in reverse mode.

``checkpoint(f)`` traces ``f`` into a ``checkpoint`` equation holding its jaxpr and a saving
policy. Differentiating it keeps as residuals only what the policy saves (by default: only
``f``'s inputs) and recomputes the rest in the backward pass (``jaxprc.lax.remat``).
"""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Callable, Sequence

from .api import argnums_positions
from .lax.remat import CheckpointPolicy, checkpoint_p, name_p
from .ir.tracing import close_over_consts, get_aval, trace_to_jaxpr
from .ir.tree_util import tree_flatten, tree_unflatten

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name"]
# (JAX's module name: a module ``jaxprc.checkpoint`` would clash with the function.)


def _policy(kind: str):
    return CheckpointPolicy(kind)


def _names_policy(kind: str):
    def make(*names: str) -> CheckpointPolicy:
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"checkpoint_policies.{kind}: names must be strings (as given to "
                                f"checkpoint_name), got {n!r}")
        return CheckpointPolicy(kind, tuple(names))
    make.__name__ = kind
    return make


checkpoint_policies = SimpleNamespace(
    everything_saveable=_policy("everything_saveable"),
    nothing_saveable=_policy("nothing_saveable"),
    dots_saveable=_policy("dots_saveable"),
    checkpoint_dots=_policy("dots_saveable"),
    dots_with_no_batch_dims_saveable=_policy("dots_with_no_batch_dims_saveable"),
    checkpoint_dots_with_no_batch_dims=_policy("dots_with_no_batch_dims_saveable"),
    save_only_these_names=_names_policy("save_only_these_names"),
    save_anything_except_these_names=_names_policy("save_anything_except_these_names"),
    save_any_names_but_these=_names_policy("save_any_names_but_these"),
)


def checkpoint_name(x, name: str):
    """``x`` itself, tagged ``name`` so that ``save_only_these_names(name)`` saves it."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {name!r}")
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [name_p.bind(leaf, name=name) for leaf in leaves])


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """``fun`` made rematerializable: under differentiation only what ``policy`` saves (a
    ``jaxprc.checkpoint_policies`` entry, or ``policy(prim, *avals, **params) -> bool``; ``None``
    saves only the inputs) is stored for the backward pass; the rest is recomputed there.
    Arguments at ``static_argnums`` are passed to ``fun`` as Python values, not traced."""
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be None or a saving policy "
                        f"(jaxprc.checkpoint_policies.*), got {policy!r}")

    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        static = frozenset(argnums_positions(static_argnums, len(args), "checkpoint", "static_argnums"))
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten((dynamic, kwargs))
        store = {}

        def flat_fun(*flat):
            dyn, kw = tree_unflatten(in_tree, flat)
            dyn = iter(dyn)
            out = fun(*[a if i in static else next(dyn) for i, a in enumerate(args)], **kw)
            out_leaves, store["tree"] = tree_flatten(out)
            return out_leaves

        traced = trace_to_jaxpr(flat_fun, [get_aval(x) for x in leaves],
                                name=getattr(fun, "__name__", "checkpoint"))
        body, consts = close_over_consts(traced)
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=body, prevent_cse=prevent_cse, policy=policy)
        return tree_unflatten(store["tree"], outs)
    return fun_remat


remat = checkpoint
