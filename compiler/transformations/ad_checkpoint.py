"""``jaxprc.ad_checkpoint``: ``checkpoint`` (alias ``remat``), its saving policies and
``checkpoint_name`` -- trading compute for memory in reverse mode.

``checkpoint(f)`` traces ``f`` into a ``checkpoint`` equation holding its jaxpr and a saving
policy. Differentiating it keeps as residuals only what the policy saves (by default: only
``f``'s inputs) and recomputes the rest in the backward pass (``jaxprc.lax.remat``).
"""
from __future__ import annotations

import functools
import inspect
from types import SimpleNamespace
from typing import Callable, Sequence

from ..api import argnums_positions
from ..ir.core import Literal, ShapedArray
from ..ir.tree_util import keystr, tree_flatten_with_path
from ..lax.remat import CheckpointPolicy, checkpoint_p, name_p
from ..ir import dtypes as dt
from ..ir.tracing import Tracer, close_over_consts, get_aval, trace_to_jaxpr
from ..ir.tree_util import tree_flatten, tree_unflatten
from ..engine.traceback_filtering import api_boundary

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name", "print_saved_residuals"]
# (JAX's module name: a module ``jaxprc.checkpoint`` would clash with the function.)


class _Deprecated:
    """The default of an option JAX has removed: passing anything is an error."""

    def __repr__(self):
        return "Deprecated"


_DEPRECATED = _Deprecated()


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


def _offload_dot_with_no_batch_dims(offload_src, offload_dst) -> CheckpointPolicy:
    """JAX's offloading twin of ``dots_with_no_batch_dims_saveable``. jaxprc keeps every residual
    in device memory, so the residuals it offloads are saved (the same values, the same count)."""
    return _policy("dots_with_no_batch_dims_saveable")


def _save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                       offload_src, offload_dst) -> CheckpointPolicy:
    """``save_only_these_names`` of both lists (offloaded residuals are saved, as above), with
    JAX's check that no name is in both."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError(
            "The names should be exclusive and should not intersect in `names_which_can_be_saved` and "
            f"`names_which_can_be_offloaded`. Got names_which_can_be_saved={saved}, "
            f"names_which_can_be_offloaded={offloaded} and the intersection={saved & offloaded}")
    return _names_policy("save_only_these_names")(*sorted(saved | offloaded))


def _save_from_both_policies(policy_1, policy_2) -> Callable:
    """A residual is saved when either policy saves it (JAX's: both must answer with a bool)."""
    def policy(prim, *avals, **params):
        out1, out2 = policy_1(prim, *avals, **params), policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(f"The return value of the policies should be a boolean. Got: {out1} and {out2}. "
                             "Please write a custom policy function directly, rather than using this "
                             "helper function.")
        return out1 or out2
    return policy


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
    offload_dot_with_no_batch_dims=_offload_dot_with_no_batch_dims,
    save_and_offload_only_these_names=_save_and_offload_only_these_names,
    save_from_both_policies=_save_from_both_policies,
)


def checkpoint_name(x, name: str):
    """``x`` itself, tagged ``name`` so that ``save_only_these_names(name)`` saves it."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {name!r}")
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [name_p.bind(leaf, name=name) for leaf in leaves])


_CONCRETE_REMOVED = (
    "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and removed in JAX v0.10.0. In its "
    "place please use `static_argnums`; for details refer to "
    "https://docs.jax.dev/en/latest/jep/11830-new-remat-checkpoint.html.")


def _prevent_cse_flags(prevent_cse, dynamic, n_consts: int):
    """The ``prevent_cse`` param: one bool, or a tuple of bools per positional argument (a prefix
    of them, as JAX takes it) spread over the operands (closed-over constants: True)."""
    if isinstance(prevent_cse, bool):
        return prevent_cse
    if not isinstance(prevent_cse, tuple) or not all(isinstance(p, bool) for p in prevent_cse):
        raise TypeError(f"prevent_cse must be a bool or tuple of bools, got {type(prevent_cse)=}")
    per_arg = prevent_cse + (True,) * (len(dynamic) - len(prevent_cse))
    return (True,) * n_consts + tuple(p for p, a in zip(per_arg, dynamic) for _ in tree_flatten(a)[0])


def checkpoint(fun: Callable, *, prevent_cse: bool | tuple = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
               concrete=_DEPRECATED) -> Callable:
    """``fun`` made rematerializable: under differentiation only what ``policy`` saves (a
    ``jaxprc.checkpoint_policies`` entry, or ``policy(prim, *avals, **params) -> bool``; ``None``
    saves only the inputs) is stored for the backward pass; the rest is recomputed there.
    Arguments at ``static_argnums`` (or named by ``static_argnames``) are passed to ``fun`` as
    Python values, not traced. ``fun`` is traced once per argument signature, as in JAX.
    ``prevent_cse`` (per positional argument when a tuple) fences the recomputation off from
    the forward pass."""
    if concrete is not _DEPRECATED:
        raise NotImplementedError(_CONCRETE_REMOVED)
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be None or a saving policy "
                        f"(jaxprc.checkpoint_policies.*), got {policy!r}")
    static_names = frozenset((static_argnames,) if isinstance(static_argnames, str) else static_argnames)
    traces: dict = {}        # argument signature -> (jaxpr without consts, consts, output tree)

    def trace(args, kwargs, static):
        dynamic = [a for i, a in enumerate(args) if i not in static]
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
        leaves, in_tree = tree_flatten((dynamic, dyn_kwargs))
        avals = [get_aval(x) for x in leaves]
        statics = (tuple((i, args[i]) for i in sorted(static)),
                   tuple(sorted((k, v) for k, v in kwargs.items() if k in static_names)))
        key = (in_tree, tuple(avals), statics, dt.config.jax_enable_x64)
        try:
            hit = traces.get(key)
        except TypeError:            # an unhashable static argument: traced every time
            key, hit = None, None
        if hit is None:
            store = {}

            def flat_fun(*flat):
                dyn, kw = tree_unflatten(in_tree, flat)
                dyn = iter(dyn)
                out = fun(*[a if i in static else next(dyn) for i, a in enumerate(args)],
                          **{**kw, **{k: v for k, v in kwargs.items() if k in static_names}})
                out_leaves, store["tree"] = tree_flatten(out)
                return out_leaves

            traced = trace_to_jaxpr(flat_fun, avals, name=getattr(fun, "__name__", "checkpoint"))
            body, consts = close_over_consts(traced)
            hit = (body, consts, store["tree"])
            if key is not None and not any(isinstance(c, Tracer) for c in consts):   # tracers: this trace's
                traces[key] = hit
        return hit, leaves, dynamic

    @api_boundary
    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        static = frozenset(argnums_positions(static_argnums, len(args), "checkpoint", "static_argnums"))
        (body, consts, out_tree), leaves, dynamic = trace(args, kwargs, static)
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=body, policy=policy,
                                 prevent_cse=_prevent_cse_flags(prevent_cse, dynamic, len(consts)))
        return tree_unflatten(out_tree, outs)
    return fun_remat


remat = checkpoint


def _argument_names(fun, args) -> list[str]:
    """Each argument leaf named by its parameter and its path in it (``x[1]``, ``a[0]``)."""
    try:
        bound = inspect.signature(fun).bind(*args).arguments
    except (TypeError, ValueError):
        bound = {"args": args}
    return [name + keystr(path) for name, value in bound.items()
            for path, _ in tree_flatten_with_path(value)[0]]


def _saved_residuals(fun, *args) -> list[tuple[ShapedArray, str]]:
    """What reverse mode saves of ``fun(*args)`` for the backward pass: (type, where it comes
    from) per residual: constants and arguments first, then results in program order."""
    from .ad import _Linearized
    lz = _Linearized(fun, args, False, "saved_residuals")
    known = lz.known.jaxpr
    n_consts = len(lz.args) - len(tree_flatten(args)[0])
    arguments = dict(zip(known.invars[n_consts:], _argument_names(fun, args)))
    producers = {v: e for e in known.eqns for v in e.outvars}
    order = {v: i for i, v in enumerate(known.invars)}
    order.update((v, len(order) + i) for i, v in enumerate(producers))
    out = []
    for r in sorted(known.outvars[lz.n_primal_outs:], key=lambda v: order.get(v, -1)):
        eqn = producers.get(r)
        if r in arguments:
            where = f"from the argument {arguments[r]}"
        elif isinstance(r, Literal) or eqn is None:
            where = "from a constant"
        else:
            src = eqn.source_info
            at = f"{src.file}:{src.line} ({src.name})" if src is not None else ""
            where = (f"named '{eqn.params['name']}' from {at}" if eqn.primitive is name_p
                     else f"output of {eqn.primitive.name} from {at}")
        out.append((ShapedArray(r.aval.shape, r.aval.dtype), where))
    return out


def print_saved_residuals(fun, *args) -> None:
    """Print what reverse mode saves of ``fun(*args)`` for the backward pass: each residual's
    type and where it comes from (an argument, a constant, a named value or an operation)."""
    for aval, where in _saved_residuals(fun, *args):
        print(f"{aval.str_short()} {where}")
