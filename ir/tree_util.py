"""Pytrees on jaxlib's C++ registry (a private one, so jaxprc never shares JAX's state).

Containers (tuple, list, dict, None, namedtuple) are built in; other classes
register with ``register_pytree_node`` and friends. Key paths use jaxlib's key
types (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from jaxlib._jax import pytree as _pytree

registry = _pytree.PyTreeRegistry()
PyTreeDef = _pytree.PyTreeDef
SequenceKey, DictKey = _pytree.SequenceKey, _pytree.DictKey
GetAttrKey, FlattenedIndexKey = _pytree.GetAttrKey, _pytree.FlattenedIndexKey


def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None):
    return registry.flatten(tree, is_leaf)


def tree_unflatten(treedef: PyTreeDef, leaves):
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    return registry.flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    return registry.flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    leaves, treedef = registry.flatten(tree, is_leaf)
    all_leaves = [leaves] + [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(*xs) for xs in zip(*all_leaves)])


def tree_reduce(f: Callable, tree, initializer=dataclasses.MISSING, is_leaf=None):
    leaves = tree_leaves(tree, is_leaf)
    if initializer is dataclasses.MISSING:
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def tree_all(tree, is_leaf=None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    inner = [inner_treedef.flatten_up_to(x) for x in flat]
    columns = [outer_treedef.unflatten(col) for col in zip(*inner)]
    return inner_treedef.unflatten(columns)


def treedef_tuple(treedefs) -> PyTreeDef:
    return _pytree.treedef_tuple(registry, list(treedefs))


def treedef_children(treedef: PyTreeDef):
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def all_leaves(iterable) -> bool:
    return _pytree.all_leaves(registry, iterable)


def tree_flatten_with_path(tree, is_leaf=None):
    return registry.flatten_with_path(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    return registry.flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf=None):
    keyed, treedef = registry.flatten_with_path(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(k, x, *xs) for (k, x), *xs in zip(keyed, *others)])


def _simple_key(key) -> str:
    """A key's bare index, dict key or attribute name (``keystr(..., simple=True)``)."""
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def keystr(keys, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['a'][1]`` by default, ``a/1`` with ``simple=True, separator='/'``."""
    return separator.join(map(_simple_key if simple else str, keys))


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None):
    registry.register_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)
    return nodetype


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    if flatten_func is None:
        def flatten_func(x):
            kids, aux = flatten_with_keys(x)
            return [c for _, c in kids], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten()`` / ``cls.tree_unflatten(aux, children)``."""
    registry.register_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass; without explicit fields, fields marked ``static=True`` are metadata."""
    if data_fields is None or meta_fields is None:
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    registry.register_dataclass_node(nodetype, list(data_fields), list(meta_fields))
    return nodetype


class Partial(functools.partial):
    """A functools.partial whose bound arguments are pytree leaves (JAX's tree_util.Partial)."""


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, kids: Partial(func, *kids[0], **kids[1]))
