"""jaxprc.tree: JAX's ``jax.tree`` namespace, short names over ``jaxprc.ir.tree_util``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .ir import tree_util as tu

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]


def all(tree, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:  # noqa: A001 (JAX's name)
    """Whether every leaf is truthy."""
    return tu.tree_all(tree, is_leaf=is_leaf)


def flatten(tree, is_leaf: Callable[[Any], bool] | None = None):
    """(leaves, treedef)."""
    return tu.tree_flatten(tree, is_leaf)


def flatten_with_path(tree, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False):
    """([(key path, leaf)], treedef)."""
    return tu.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves(tree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tu.tree_leaves(tree, is_leaf)


def leaves_with_path(tree, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False) -> list:
    """[(key path, leaf)]."""
    return tu.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path)


def map(f: Callable, tree, *rest, is_leaf: Callable[[Any], bool] | None = None):  # noqa: A001
    """``f`` applied leafwise to ``tree`` and the matching leaves of ``rest`` (same structure)."""
    return tu.tree_map(f, tree, *rest, is_leaf=is_leaf)


def map_with_path(f: Callable, tree, *rest, is_leaf: Callable[..., bool] | None = None,
                  is_leaf_takes_path: bool = False):
    """``f(key_path, leaf, *other_leaves)`` applied leafwise."""
    return tu.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf, is_leaf_takes_path=is_leaf_takes_path)


def reduce(function: Callable, tree, initializer: Any = dataclasses.MISSING,
           is_leaf: Callable[[Any], bool] | None = None):
    """``functools.reduce`` over the leaves."""
    return tu.tree_reduce(function, tree, initializer, is_leaf=is_leaf)


def structure(tree, is_leaf: Callable[[Any], bool] | None = None):
    """The treedef."""
    return tu.tree_structure(tree, is_leaf)


def transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """A tree of ``outer`` trees of ``inner`` trees turned into ``inner`` of ``outer``.

    ``inner_treedef=None`` takes the structure of the first inner tree.
    """
    return tu.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def unflatten(treedef, leaves):
    return tu.tree_unflatten(treedef, leaves)


def broadcast(prefix_tree, full_tree, is_leaf: Callable[[Any], bool] | None = None):
    """``prefix_tree``'s leaves repeated over the matching subtrees of ``full_tree``."""
    return tu.tree_broadcast(prefix_tree, full_tree, is_leaf)


def reduce_associative(operation: Callable, tree, *, identity=tu._Unspecified,
                       is_leaf: Callable[[Any], bool] | None = None):
    """Reduce the leaves with an associative ``operation`` in log depth; ``identity`` for no leaves."""
    return tu.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def static(**kwargs):
    """``dataclasses.field`` marked ``static=True`` (metadata for ``register_dataclass``)."""
    metadata = {**kwargs.pop("metadata", {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)
