"""Pytree utilities (tree_util / jax.tree extras), ravel_pytree, segment ops and jaxprc.dtypes."""
import collections
import dataclasses
import pickle

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import dtypes, ops, tree, tree_util as tu
from jaxprc.flatten_util import ravel_pytree


def test_flatten_one_level_and_keys():
    assert tu.flatten_one_level({"a": [1, 2], "b": {"c": 3}}) == (([1, 2], {"c": 3}), ("a", "b"))
    kids, meta = tu.flatten_one_level_with_keys((1, [2]))
    assert [str(k) for k, _ in kids] == ["[0]", "[1]"] and meta is None
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(3)


def test_is_tree_node_and_default_registry():
    assert tu.is_tree_node(dict) and tu.is_tree_node(tuple) and not tu.is_tree_node(int)
    assert tu.default_registry.flatten([1, 2])[0] == [1, 2]


def test_broadcast_and_reduce_associative():
    full = (0, {"a": 0, "b": 0}, (0, 0))
    assert tree.broadcast((1, 2, 3), full) == (1, {"a": 2, "b": 2}, (3, 3))
    assert tu.tree_broadcast((1, 2, 3), full) == (1, {"a": 2, "b": 2}, (3, 3))
    with pytest.raises(ValueError):
        tree.broadcast((1, 2), full)
    assert tree.reduce_associative(lambda a, b: a + b, [1, (2, 3), {"x": 4}]) == 10
    calls = []
    tu.tree_reduce_associative(lambda a, b: calls.append((a, b)) or a + b, [1, 2, 3, 4])
    assert calls == [(1, 2), (3, 4), (3, 7)]          # balanced, log depth
    assert tree.reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        tree.reduce_associative(lambda a, b: a + b, [])


def test_is_leaf_takes_path():
    t = {"a": [1, 2], "b": 3}
    leaves = tree.leaves_with_path(t, is_leaf=lambda p, x: len(p) == 1 and isinstance(x, list),
                                   is_leaf_takes_path=True)
    assert [x for _, x in leaves] == [[1, 2], 3]
    out = tu.tree_map_with_path(lambda p, x: len(p), t, is_leaf=lambda x: isinstance(x, list))
    assert out == {"a": 1, "b": 1}
    flat, _ = tree.flatten_with_path(t, is_leaf=lambda p, x: p == (tu.DictKey("a"),), is_leaf_takes_path=True)
    assert [x for _, x in flat] == [[1, 2], 3]


def test_register_static_and_with_keys_class():
    @tu.register_static
    class Cfg:
        def __init__(self, n):
            self.n = n

        def __eq__(self, other):
            return isinstance(other, Cfg) and other.n == self.n

        def __hash__(self):
            return hash(self.n)

    leaves, treedef = tu.tree_flatten((1.0, Cfg(3)))
    assert leaves == [1.0] and treedef.unflatten([2.0])[1].n == 3
    assert jx.jit(lambda x, c: x * c.n)(2.0, Cfg(3)) == 6.0

    @tu.register_pytree_with_keys_class
    class Pair:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("x"), self.x), (tu.GetAttrKey("y"), self.y)), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Pair(1, 2))]
    assert paths == [".x", ".y"]
    assert tu.tree_map(lambda v: v * 10, Pair(1, 2)).y == 20


def test_register_dataclass_validation():
    @dataclasses.dataclass
    class D:
        a: float
        b: int = tree.static(default=1)

    tu.register_dataclass(D)
    leaves, treedef = tu.tree_flatten(D(2.0, 5))
    assert leaves == [2.0] and treedef.unflatten([3.0]) == D(3.0, 5)

    @dataclasses.dataclass
    class E:
        a: float
        b: float

    with pytest.raises(ValueError, match="Missing fields"):
        tu.register_dataclass(E, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="must not overlap"):
        tu.register_dataclass(E, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TypeError, match="both be specified"):
        tu.register_dataclass(E, data_fields=["a", "b"])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(int)


def test_ordered_and_default_dicts_are_nodes():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(od)
    assert leaves == [1, 2] and list(treedef.unflatten([3, 4]).items()) == [("b", 3), ("a", 4)]
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(dd)
    out = treedef.unflatten([5, 6])
    assert leaves == [2, 1] and out["a"] == 5 and out.default_factory is list


def test_treedef_pickles():
    treedef = tu.tree_structure({"a": [1, (2, 3)], "b": None})
    assert pickle.loads(pickle.dumps(treedef)) == treedef


def test_tree_transpose_infers_inner():
    outer = tu.tree_structure([0, 0])
    assert tu.tree_transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tree.transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])


def test_ravel_pytree_round_trip_and_dtypes():
    t = {"w": jnp.ones((2, 3)), "b": (jnp.arange(3), np.float32(2.0))}
    flat, unravel = ravel_pytree(t)
    assert flat.shape == (10,) and flat.dtype == np.float32
    back = unravel(flat)
    assert back["b"][0].dtype == np.int32
    np.testing.assert_array_equal(back["w"], np.ones((2, 3)))
    with pytest.raises(TypeError, match="expected dtype float32"):
        unravel(flat.astype(np.int32))
    empty, un = ravel_pytree({})
    assert empty.shape == (0,) and empty.dtype == np.float32 and un(empty) == {}
    # One dtype: the unravel is dtype-polymorphic, and it works under jit and grad.
    flat1, un1 = ravel_pytree([jnp.ones(2), jnp.zeros(3)])
    assert un1(flat1.astype(np.int32))[0].dtype == np.int32
    g = jx.grad(lambda v: jnp.sum(un1(v)[0] ** 2))(flat1)
    np.testing.assert_allclose(g, [2, 2, 0, 0, 0])
    np.testing.assert_allclose(jx.jit(lambda v: ravel_pytree(un1(v))[0])(flat1), flat1)


def _segment_ref(data, ids, n, fn, identity):
    out = np.full((n,) + data.shape[1:], identity, data.dtype)
    for s in range(n):
        rows = data[ids == s]
        if len(rows):
            out[s] = fn(rows, axis=0)
    return out


@pytest.mark.parametrize("name,fn,identity", [("segment_sum", np.sum, 0), ("segment_prod", np.prod, 1),
                                              ("segment_max", np.max, -np.inf),
                                              ("segment_min", np.min, np.inf)])
def test_segment_ops_values(name, fn, identity):
    rng = np.random.default_rng(0)
    data = rng.normal(size=(7, 2)).astype(np.float32)
    ids = np.array([0, 2, 2, 0, 4, 9, -1])      # 9 and -1 are out of range: dropped
    op = getattr(ops, name)
    np.testing.assert_allclose(op(data, ids, 5), _segment_ref(data, ids, 5, fn, identity), rtol=1e-6)
    np.testing.assert_allclose(jx.jit(lambda d, i: op(d, i, num_segments=5, bucket_size=3))(data, ids),
                               _segment_ref(data, ids, 5, fn, identity), rtol=1e-5)
    assert op(data, np.array([0, 1, 1, 0, 2, 2, 1])).shape == (3, 2)     # inferred from concrete ids


def test_segment_ops_int_identity_grad_vmap_and_errors():
    out = ops.segment_max(np.array([1, 5], np.int32), np.array([0, 0]), 2)
    assert out.tolist() == [5, np.iinfo(np.int32).min]
    g = jx.grad(lambda d: ops.segment_sum(d, np.array([0, 1, 1]), 2)[1])(jnp.ones(3))
    np.testing.assert_array_equal(g, [0, 1, 1])
    batched = jx.vmap(lambda d: ops.segment_sum(d, np.array([0, 1, 1]), 2))(jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(batched, [[0, 3], [3, 9]])
    with pytest.raises(jx.ConcretizationTypeError, match="num_segments"):
        jx.jit(lambda d, i: ops.segment_sum(d, i))(jnp.ones(3), jnp.zeros(3, np.int32))
    with pytest.raises(ValueError, match="non-negative"):
        ops.segment_sum(jnp.ones(3), np.zeros(3, np.int32), -1)


def test_dtypes_extras():
    assert dtypes.itemsize_bits(np.bool_) == 8 and dtypes.itemsize_bits("bfloat16") == 16
    assert dtypes.itemsize_bits(np.complex64) == 64
    assert dtypes.scalar_type_of(jnp.ones(2, "bfloat16")) is float
    assert dtypes.scalar_type_of(np.int8(1)) is int and dtypes.scalar_type_of(True) is bool
    assert issubclass(dtypes.TypePromotionError, ValueError)
    assert issubclass(dtypes.prng_key, dtypes.extended)
    assert dtypes.issubdtype(jx.random.key(0).dtype, dtypes.prng_key)
    assert not dtypes.issubdtype(np.float32, dtypes.extended)
    assert dtypes.issubdtype(jnp.bfloat16, np.floating)
