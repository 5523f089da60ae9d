"""tree_transpose (custom nodes, its leaf-count check), Partial (a Partial of a partial is not
merged; equality and hashing of its structure), register_static, ravel_pytree's unravel (equal
layouts share a compiled program) and nn.one_hot's refusals, against JAX."""
import dataclasses
import re
import warnings

import jax
import jax.flatten_util
import numpy as np
import pytest

import jaxprc
import jaxprc.flatten_util
from jaxprc.runtime import compile_cache


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


@dataclasses.dataclass(frozen=True)
class Static:
    a: int


for _lib in (jax, jaxprc):
    _lib.tree_util.register_pytree_node(Point, lambda p: ((p.x, p.y), None), lambda _, c: Point(*c))
    _lib.tree_util.register_static(Static)


def _add(a, b=1):
    return a + b


def _outcome(lib, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            value = make(lib)
        except Exception as e:     # noqa: BLE001 - the type is what is compared
            return type(e).__name__, re.sub(r"0x[0-9a-f]+", "ADDR", str(e).split("\n")[0])
    leaves, tree = lib.tree_util.tree_flatten(value)
    return str(tree).replace("Point", "P"), [np.asarray(x).tolist() for x in leaves]


def _transpose(lib, outer, inner, tree):
    tu = lib.tree_util
    return tu.tree_transpose(tu.tree_structure(outer), None if inner is None else tu.tree_structure(inner), tree)


CASES = {
    "transpose_custom_outer": lambda lib: _transpose(lib, Point(0, 0), (0, 0), Point((1, 2), (3, 4))),
    "transpose_custom_inner": lambda lib: _transpose(lib, [0, 0], Point(0, 0), [Point(1, 2), Point(3, 4)]),
    "transpose_inferred_inner": lambda lib: _transpose(lib, [0, 0], None, [Point(1, 2), Point(3, 4)]),
    "transpose_too_few_leaves": lambda lib: _transpose(lib, [0, 0], (0, 0), [(1, 2), (3,)]),
    "transpose_too_many_outer": lambda lib: _transpose(lib, [0, 0, 0], (0, 0), [(1, 2), (3, 4)]),
    # only the leaf count is checked: an inner list where a tuple was declared is read in order
    "transpose_other_inner_node": lambda lib: _transpose(lib, [0, 0], (0, 0), [(1, 2), [3, 4]]),
    "partial_call": lambda lib: lib.tree_util.Partial(lib.tree_util.Partial(_add, 1), b=2)(),
    "static_is_no_leaf": lambda lib: [Static(1), 2],
    "one_hot_float_input": lambda lib: lib.nn.one_hot(np.array([1.0, 2.0], np.float32), 3),
    "one_hot_bool_input": lambda lib: lib.nn.one_hot(np.array([True]), 3),
    "one_hot_float_num_classes": lambda lib: lib.nn.one_hot(np.array([0, 1]), 3.0),
    "one_hot_traced_num_classes": lambda lib: lib.jit(lambda n: lib.nn.one_hot(np.array([1, 2]), n))(3),
    "one_hot_axis_out_of_bounds": lambda lib: lib.nn.one_hot(np.array([0, 1]), 3, axis=3),
    "one_hot_first_axis": lambda lib: lib.nn.one_hot(np.array([0, 1]), 3, axis=-2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_outcome_as_jax(name):
    assert _outcome(jaxprc, CASES[name]) == _outcome(jax, CASES[name])


def test_partial_structures_equal_and_hash_alike_and_never_merge():
    for lib in (jax, jaxprc):
        tu = lib.tree_util
        one, other = tu.Partial(_add, 1), tu.Partial(_add, 2.0)
        assert tu.tree_structure(one) == tu.tree_structure(other)
        assert hash(tu.tree_structure(one)) == hash(tu.tree_structure(other))
        inner = tu.Partial(_add, 1)
        outer = tu.Partial(inner, b=2)
        assert outer.args == () and tu.tree_leaves(outer) == [2] and outer.func == inner
        assert tu.tree_structure(outer) == tu.tree_structure(tu.Partial(inner, b=5))
        assert tu.tree_structure(outer) != tu.tree_structure(tu.Partial(tu.Partial(_add, 1), b=5))


def test_one_hot_float_input_is_deprecated_as_in_jax():
    for lib in (jax, jaxprc):
        with pytest.warns(DeprecationWarning, match="one_hot input should be integer-typed; got dtype=float32"):
            lib.nn.one_hot(np.array([1.0], np.float32), 2)


def test_equal_unravels_share_the_compiled_program():
    tree = {"a": np.ones(3, np.float32), "b": np.zeros((2, 2), np.float32)}
    for lib in (jax, jaxprc):
        (flat, first), (_, second) = (lib.flatten_util.ravel_pytree(tree) for _ in range(2))
        assert first == second and hash(first) == hash(second)
        assert first != lib.flatten_util.ravel_pytree({"a": np.ones(2, np.float32)})[1]
    flat, first = jaxprc.flatten_util.ravel_pytree(tree)
    jaxprc.jit(first)(flat)
    before = compile_cache.stats["compiles"]
    out = jaxprc.jit(jaxprc.flatten_util.ravel_pytree(tree)[1])(flat)     # while `first` lives
    assert compile_cache.stats["compiles"] == before
    np.testing.assert_array_equal(out["b"], tree["b"])
