"""Pytrees on jaxlib's C++ registry (a private one, so jaxprc never shares JAX's state).

Containers (tuple, list, dict, None, namedtuple) are built in; other classes
register with ``register_pytree_node`` and friends. Key paths use jaxlib's key
types (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, TypeVar

from jaxlib._jax import pytree as _pytree

registry = _pytree.PyTreeRegistry()
# A module-level name lets pickle find the registry by reference (picklable PyTreeDefs).
registry.__module__ = __name__
registry.__name__ = "registry"
default_registry = registry
# The same nodes, plus jaxprc's ``Array`` as a node around its jaxlib buffer: the registry jaxlib's
# C++ jit dispatch flattens arguments and unflattens results with (compiler/cpp_dispatch.py).
dispatch_registry = _pytree.PyTreeRegistry()
PyTreeDef = _pytree.PyTreeDef
# The classes that are pytree nodes of ``registry``: the built-in containers jaxlib knows and every
# class registered through this module (libraries ask ``type(x) in node_types``).
node_types: set[type] = {tuple, list, dict, type(None)}
SequenceKey, DictKey = _pytree.SequenceKey, _pytree.DictKey
GetAttrKey, FlattenedIndexKey = _pytree.GetAttrKey, _pytree.FlattenedIndexKey
KeyEntry = TypeVar("KeyEntry", bound=Any)
KeyPath = tuple[KeyEntry, ...]


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


def tree_reduce(function: Callable, tree, initializer=dataclasses.MISSING, is_leaf=None):
    leaves = tree_leaves(tree, is_leaf)
    if initializer is dataclasses.MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, is_leaf=None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """A tree of ``outer`` trees of ``inner`` trees turned into ``inner`` of ``outer``.

    ``inner_treedef=None`` takes the structure of the first inner tree. As in JAX, only the number
    of leaves is checked (a TypeError showing the expected structure): the leaves are read in
    order, ``inner_treedef.num_leaves`` per outer leaf.
    """
    leaves, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    n_inner, n_outer = inner_treedef.num_leaves, outer_treedef.num_leaves
    if len(leaves) != n_inner * n_outer:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    columns = zip(*[leaves[i * n_inner:(i + 1) * n_inner] for i in range(n_outer)])
    return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in columns])


def treedef_tuple(treedefs) -> PyTreeDef:
    return _pytree.treedef_tuple(registry, list(treedefs))


def treedef_children(treedef: PyTreeDef):
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every item is a leaf (a leaf of its own tree, per ``is_leaf`` when given)."""
    if is_leaf is None:
        return _pytree.all_leaves(registry, iterable)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path: bool = False):
    """([(key path, leaf)], treedef); ``is_leaf(path, x)`` when ``is_leaf_takes_path``."""
    if is_leaf is not None and not is_leaf_takes_path:
        leaf_test = is_leaf
        is_leaf = lambda _, x: leaf_test(x)  # noqa: E731 (jaxlib calls it with the path too)
    return registry.flatten_with_path(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path: bool = False):
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf=None, is_leaf_takes_path: bool = False):
    keyed, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
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
    for r in (registry, dispatch_registry):
        r.register_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)
    node_types.add(nodetype)
    return nodetype


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    if flatten_func is None:
        def flatten_func(x):
            kids, aux = flatten_with_keys(x)
            return [c for _, c in kids], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten()`` / ``cls.tree_unflatten(aux, children)``."""
    return register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass; without explicit fields, fields marked ``static=True`` are metadata.

    The field lists are checked as JAX checks them: both or neither given, and
    for a dataclass exactly its ``init=True`` fields less ``drop_fields``.
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be specified when "
                            f"either is specified. Got data_fields={data_fields!r} meta_fields={meta_fields!r}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required when nodetype "
                            f"is not a dataclass. Got nodetype={nodetype!r}.")
        fields = dataclasses.fields(nodetype)
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    meta_fields, data_fields = tuple(meta_fields), tuple(data_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        given = {*meta_fields, *data_fields}
        if given != init_fields:
            msg = ("data_fields and meta_fields must include all dataclass fields with ``init=True`` "
                   "and only them.")
            if missing := init_fields - given:
                msg += f" Missing fields: {missing}. Add them to drop_fields to suppress this error."
            if unexpected := given - init_fields:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(f"data_fields and meta_fields must not overlap. Overlapping fields: {overlap}.")
    for r in (registry, dispatch_registry):
        r.register_dataclass_node(nodetype, list(data_fields), list(meta_fields))
    node_types.add(nodetype)
    return nodetype


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten_with_keys()`` / ``cls.tree_unflatten(aux, children)``."""
    flatten = getattr(cls, "tree_flatten", None)
    return register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                                     None if flatten is None else lambda x: x.tree_flatten())


def register_static(cls: type) -> type:
    """Register ``cls`` as a pytree with no leaves: instances are static (part of the treedef)."""
    register_pytree_with_keys(cls, lambda obj: ((), obj), lambda obj, _: obj)
    return cls


def is_tree_node(typ: type) -> bool:
    """Whether ``typ`` is a pytree node type (built in, registered, or a namedtuple)."""
    return registry.is_node(typ)


def flatten_one_level(tree):
    """(children, metadata) of one pytree node; ValueError for a leaf type."""
    out = registry.flatten_one_level(tree)
    if out is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return out


def flatten_one_level_with_keys(tree):
    """([(key, child)], metadata) of one pytree node; ValueError for a leaf type."""
    out = registry.flatten_one_level_with_keys(tree)
    if out is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return out


def equality_errors(seen, given, path: str = ""):
    """Where pytrees ``seen`` and ``given`` differ in structure: (path, what was seen, what is
    given, why) for each difference, outermost first, in JAX's words."""
    seen_node, given_node = registry.flatten_one_level(seen), registry.flatten_one_level(given)
    if seen_node is None and given_node is None:
        return
    if seen_node is None or given_node is None or type(seen) is not type(given):
        yield (path, "pytree leaf" if seen_node is None else str(type(seen)),
               "pytree leaf" if given_node is None else str(type(given)), "their Python types differ")
        return
    (seen_children, seen_meta), (given_children, given_meta) = seen_node, given_node
    if isinstance(seen, (list, tuple)) and len(seen) != len(given):
        kind = type(seen).__name__
        yield path, f"{kind} of length {len(seen)}", f"{kind} of length {len(given)}", "the lengths do not match"
        return
    if len(seen_children) != len(given_children):
        def count(n):
            return f"{n} {'children' if n > 1 else 'child'}"
        why = "the numbers of children do not match"
        if isinstance(seen, dict):
            why += f", with the symmetric difference of key sets: {set(seen) ^ set(given)}"
        yield (path, f"{type(seen)} with {count(len(seen_children))}",
               f"{type(given)} with {count(len(given_children))}", why)
        return
    if seen_meta != given_meta:
        def meta(m):
            return tuple(m) if isinstance(m, list) else m
        yield (path, f"{type(seen)} with pytree metadata {meta(seen_meta)}",
               f"{type(given)} with pytree metadata {meta(given_meta)}", "the pytree node metadata does not match")
        return
    keyed = registry.flatten_one_level_with_keys(seen)[0]
    for (key, s), g in zip(keyed, given_children):
        yield from equality_errors(s, g, path + keystr((key,)))


def _prefix_walk(prefix, full: PyTreeDef, start: int, path, name: str, is_leaf, out: list, errors) -> int:
    """Match ``prefix`` against the treedef ``full`` whose leaves are ``out[start:]``: each prefix
    leaf fills its subtree's slots, each mismatch adds a paragraph to ``errors``. Walks treedefs,
    so no user ``unflatten`` ever sees placeholder leaves. Returns the slot after ``full``."""
    end = start + full.num_leaves
    if prefix is None or (is_leaf and is_leaf(prefix)) or registry.flatten_one_level(prefix) is None:
        out[start:end] = [prefix] * full.num_leaves
        return end
    where = f"pytree structure error: different {{}} at key path\n    {name}{keystr(path)}\n"
    at = f"At that key path, the prefix pytree {name} has a subtree of type"
    full_node = full.node_data()
    if full_node is None or full_node[0] is not type(prefix):
        given = "pytree leaf" if full_node is None else full_node[0]
        errors.append(where.format("types") + f"{at}\n    {type(prefix)}\nbut at the same key path the full "
                      f"pytree has a subtree of different type\n    {given}.")
        return end
    full_children = full.children()
    if isinstance(prefix, (list, tuple)) and len(prefix) != len(full_children):
        kind = type(prefix).__name__
        errors.append(where.format(f"lengths of {kind}") + f"{at} {kind} of length {len(prefix)}, but the full "
                      f"pytree has a subtree of the same type but of length {len(full_children)}.")
        return end
    prefix_node = tree_structure(prefix, is_leaf=lambda x: x is not prefix).node_data()
    if prefix_node != full_node or len(registry.flatten_one_level(prefix)[0]) != len(full_children):
        what = "pytree metadata" if prefix_node != full_node else "numbers of pytree children"
        text = (where.format(what) + f"{at}\n    {type(prefix)}\nwith metadata\n    {prefix_node[1]}\nbut at "
                f"the same key path the full pytree has a subtree of the same type but with metadata\n"
                f"    {full_node[1]}")
        if isinstance(prefix, dict):
            text += ("\nso the symmetric difference on key sets is\n    "
                     + " ".join(sorted(map(str, set(prefix) ^ set(full_node[1])))))
        errors.append(text)
        return end
    position = start
    for (key, p), f in zip(registry.flatten_one_level_with_keys(prefix)[0], full_children):
        position = _prefix_walk(p, f, position, path + (key,), name, is_leaf, out, errors)
    return end


def broadcast_prefix(prefix, treedef: PyTreeDef, name: str, is_leaf=None) -> list:
    """One value per leaf of ``treedef`` from ``prefix``, a pytree prefix of it (each prefix leaf,
    None included, stands for a whole subtree); a ValueError in JAX's words listing every
    mismatch, ``name`` saying what the prefix is (``vmap in_axes``)."""
    out = [None] * treedef.num_leaves
    errors: list[str] = []
    _prefix_walk(prefix, treedef, 0, (), name, is_leaf, out, errors)
    if errors:
        raise ValueError(f"{name} specification must be a tree prefix of the corresponding value; \n"
                         f"  Mismatch details ({len(errors)} found):\n  " + "\n  ".join(errors))
    return out


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``prefix_tree``'s leaves repeated over the matching subtrees of ``full_tree``."""
    leaves = []
    try:
        tree_map(lambda x, sub: leaves.extend([x] * tree_structure(sub).num_leaves), prefix_tree, full_tree,
                 is_leaf=is_leaf)
    except ValueError as e:
        raise ValueError(f"broadcast_prefix prefix_tree: {prefix_tree!r} is not a tree prefix of "
                         f"{full_tree!r} ({e})") from None
    return tree_structure(full_tree).unflatten(leaves)


class _Unspecified:
    """No identity given to tree_reduce_associative."""


def tree_reduce_associative(operation: Callable, tree, *, identity=_Unspecified, is_leaf=None):
    """Reduce the leaves with an associative ``operation`` as a balanced tree (log depth)."""
    def reduce(xs):
        if len(xs) == 1:
            return xs[0]
        mid = len(xs) // 2
        return operation(reduce(xs[:mid]), reduce(xs[mid:]))
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _Unspecified:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return reduce(leaves)


class Partial(functools.partial):
    """A functools.partial whose bound arguments are pytree leaves (JAX's tree_util.Partial).

    A partial given as ``func`` is kept whole (functools would merge its arguments into this
    one's): its arguments are then not leaves of this Partial, as in JAX.
    """

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            func = _WholePartial(func)
        return super().__new__(cls, func, *args, **kwargs)


class _WholePartial:
    """A partial called through, hashed and compared as the partial itself."""

    def __init__(self, partial: functools.partial):
        self.partial = partial
        self.func, self.args, self.keywords = partial.func, partial.args, partial.keywords

    def __call__(self, *args, **kwargs):
        return self.partial(*args, **kwargs)

    def __hash__(self):
        return hash(self.partial)

    def __eq__(self, other):
        return self.partial == (other.partial if isinstance(other, _WholePartial) else other)

    def __repr__(self):
        return f"{type(self).__name__}({self.partial!r})"


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, kids: Partial(func, *kids[0], **kids[1]))


# Ordered and default dicts are nodes, as in JAX: keys in insertion order / sorted.
register_pytree_with_keys(
    collections.OrderedDict,
    lambda d: (tuple((DictKey(k), v) for k, v in d.items()), tuple(d.keys())),
    lambda keys, values: collections.OrderedDict(zip(keys, values)))
register_pytree_with_keys(
    collections.defaultdict,
    lambda d: (tuple((DictKey(k), d[k]) for k in sorted(d)), (d.default_factory, tuple(sorted(d)))),
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)))
