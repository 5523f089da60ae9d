"""``jaxprc.api_util``: JAX's ``jax.api_util``, helpers for libraries that build their own
transformations out of ``jaxprc.extend.linear_util`` wrapped functions."""
from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple, Sequence

from .extend import linear_util as lu
from .ir.tracing import get_aval
from .ir.tree_util import tree_flatten, tree_unflatten
from .vmap import _flatten_axes

__all__ = ["DebugInfo", "debug_info", "flatten_fun", "flatten_fun_nokwargs", "safe_map",
           "shaped_abstractify", "argnums_partial", "flatten_axes"]


class DebugInfo(NamedTuple):
    """What a traced function is, for messages: the API that traced it (``traced_for``), the
    function's name and place (``func_src_info``), its argument names, its result paths."""
    traced_for: str
    func_src_info: str | None
    arg_names: tuple[str, ...] | None
    result_paths: tuple[str, ...] | Callable | None = None

    @property
    def func_name(self) -> str:
        return (self.func_src_info or "<unknown>").split(" ")[0]


def debug_info(traced_for: str, fun: Callable, args: Sequence[Any], kwargs: dict, *,
               static_argnums=(), static_argnames=(), result_paths_thunk=None,
               sourceinfo: str | None = None, signature=None) -> DebugInfo:
    """The DebugInfo of tracing ``fun`` on ``args``/``kwargs`` for ``traced_for``."""
    name = getattr(fun, "__name__", type(fun).__name__)
    if sourceinfo is None:
        code = getattr(fun, "__code__", None)
        sourceinfo = f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name
    try:
        signature = signature or inspect.signature(fun)
        bound = signature.bind(*args, **kwargs)
        arg_names = tuple(k for k in bound.arguments)
    except (TypeError, ValueError):
        arg_names = None
    return DebugInfo(traced_for, sourceinfo, arg_names, result_paths_thunk)


@lu.transformation_with_aux2
def flatten_fun(f, store, in_tree, *flat_args):
    """``f(*args, **kwargs)`` as a function of the flat leaves of ``(args, kwargs)`` (``in_tree``)
    returning flat leaves; the output tree is the auxiliary value."""
    args, kwargs = tree_unflatten(in_tree, flat_args)
    leaves, out_tree = tree_flatten(f(*args, **kwargs))
    store.store(out_tree)
    return leaves


@lu.transformation_with_aux2
def flatten_fun_nokwargs(f, store, in_tree, *flat_args):
    """As ``flatten_fun`` for a function of positional arguments only (``in_tree`` of the args
    tuple)."""
    leaves, out_tree = tree_flatten(f(*tree_unflatten(in_tree, flat_args)))
    store.store(out_tree)
    return leaves


def safe_map(f, *seqs):
    """``map`` that insists the sequences have one length."""
    seqs = [list(s) for s in seqs]
    n = len(seqs[0])
    if any(len(s) != n for s in seqs[1:]):
        raise ValueError(f"safe_map: length mismatch: {[len(s) for s in seqs]}")
    return list(map(f, *seqs))


def shaped_abstractify(x):
    """The abstract value (ShapedArray) of a value that can be an argument."""
    return get_aval(x)


@lu.transformation2
def _argnums_partial(f, dyn_argnums, fixed, *dyn_args, **kwargs):
    args = list(fixed)
    for i, x in zip(dyn_argnums, dyn_args):
        args[i] = x
    return f(*args, **kwargs)


def argnums_partial(f: lu.WrappedFun, dyn_argnums, args, require_static_args_hashable=True):
    """``f`` as a function of the args at ``dyn_argnums`` only, the others fixed to ``args``'s;
    returns ``(wrapped_fun, dynamic args)``."""
    dyn_argnums = (dyn_argnums,) if isinstance(dyn_argnums, int) else tuple(dyn_argnums)
    return (_argnums_partial(f, dyn_argnums, tuple(args)),
            tuple(args[i] for i in dyn_argnums))


def flatten_axes(name: str, treedef, axis_tree, *, kws: bool = False, tupled_args: bool = False):
    """``axis_tree`` (a prefix of ``treedef``, as vmap's ``in_axes``) broadcast to one axis per
    leaf of ``treedef``."""
    return _flatten_axes(name, treedef, axis_tree)
