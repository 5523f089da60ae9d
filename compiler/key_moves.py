"""jax.numpy and lax functions that move typed PRNG keys, as JAX's do on key arrays.

A key array is its uint32 key data with the key words as trailing axes (``PRNGKeyArray``).
Functions that only move, select or replicate elements (``concatenate``, ``stack``, ``where``,
``take``, ``lax.dynamic_slice``, ...) run on that data under ``vmap`` over the key words, so inside
they see arrays of the keys' own shape (their ``axis`` arguments, negative ones included, mean
what they say) and the results are wrapped back as keys. ``install`` puts these versions in the
``jaxprc.numpy`` and ``jaxprc.lax`` namespaces when the package is imported (as ``array_methods``
installs the array methods); calls without keys go straight to the function.
"""
from __future__ import annotations

import functools


_KEY_ARRAY: list = []      # PRNGKeyArray, once random is imported (it is built on numpy and lax)


def _key_array_type():
    if not _KEY_ARRAY:
        from .random import PRNGKeyArray
        _KEY_ARRAY.append(PRNGKeyArray)
    return _KEY_ARRAY[0]


def _is_key(x) -> bool:
    return isinstance(x, _key_array_type())


def holds_keys(value) -> bool:
    """``value`` is a key array, or a list or tuple holding one."""
    return _holds_keys((value,))


def _holds_keys(values) -> bool:
    """Whether any value is a key array or a list/tuple holding one: on every call of the wrapped
    functions, so written as plain loops (no generator, no per-value call)."""
    key_array = _KEY_ARRAY[0] if _KEY_ARRAY else _key_array_type()
    for v in values:
        if isinstance(v, key_array):
            return True
        if type(v) is list or type(v) is tuple:
            for e in v:
                if isinstance(e, key_array):
                    return True
    return False


def _refuse_mixed(values, keys_dtype):
    """JAX promotes the values a function combines: keys mix only with keys of the same dtype."""
    for v in values:
        if not _is_key(v) and v is not None:
            dtype = getattr(v, "dtype", None) or type(v).__name__
            raise ValueError(f"dtype={keys_dtype} is not a valid dtype for JAX type promotion "
                             f"(keys combined with a value of type {dtype}).")


def _on_key_data(fn, together, args, kwargs):
    from .transformations.vmap import vmap
    from .tree_util import tree_flatten, tree_map, tree_structure

    leaves, tree = tree_flatten((args, kwargs), is_leaf=_is_key)
    keys = [leaf for leaf in leaves if _is_key(leaf)]
    dtypes = {k.dtype for k in keys}
    if len(dtypes) > 1:
        raise ValueError(f"dtype={sorted(map(str, dtypes))[1]} is not a valid dtype for JAX type promotion "
                         f"(keys of different implementations combined: {sorted(map(str, dtypes))}).")
    combined = [a for a in args if isinstance(a, (list, tuple)) and any(map(_is_key, a))]
    if together is not None:
        outside = [i for i, a in enumerate(args) if _is_key(a) and i not in range(len(args))[together]]
        if outside:
            raise TypeError(f"{getattr(fn, '__name__', fn)} does not accept dtype {keys[0].dtype} at "
                            f"position {outside[0]}")
        if any(map(_is_key, args[together])):
            combined.append(args[together])
    for group in combined:
        _refuse_mixed(group, keys[0].dtype)

    positions = [i for i, leaf in enumerate(leaves) if _is_key(leaf)]

    def on_data(*data):
        filled = list(leaves)
        for i, d in zip(positions, data):
            filled[i] = d
        a, kw = tree.unflatten(filled)
        return fn(*a, **kw)

    for _ in range(keys[0].ndim, keys[0]._base.ndim):      # one vmap per key word axis
        on_data = vmap(on_data, in_axes=-1, out_axes=-1)
    key_tree = tree_structure(keys[0])
    return tree_map(lambda d: key_tree.unflatten([d]), on_data(*(k._base for k in keys)))


def moves_keys(fn, together: slice | None = None):
    """``fn`` that also takes key arrays (of one dtype). ``together``: the slice of positional
    arguments that are combined (``where``'s x and y): a key there must meet keys there."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _holds_keys(args) and not (kwargs and _holds_keys(kwargs.values())):
            return fn(*args, **kwargs)
        return _on_key_data(fn, together, args, kwargs)
    return wrapper


NUMPY_MOVERS = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays", "broadcast_to",
    "column_stack", "concat", "concatenate", "copy", "delete", "dsplit", "dstack", "expand_dims", "flip",
    "fliplr", "flipud", "hsplit", "hstack", "insert", "matrix_transpose", "moveaxis", "permute_dims", "ravel",
    "repeat", "reshape", "roll", "rollaxis", "rot90", "select", "split", "squeeze", "stack", "swapaxes", "take",
    "take_along_axis", "tile", "transpose", "unstack", "vsplit", "vstack", "where"]
LAX_MOVERS = [
    "broadcast", "broadcast_in_dim", "concatenate", "dynamic_index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "expand_dims", "index_in_dim", "reshape", "rev", "select", "select_n", "slice", "slice_in_dim", "squeeze",
    "transpose"]
# the arguments combined elementwise, where a key must meet keys (the others are conditions or sizes)
TOGETHER = {"where": slice(1, 3), "select": slice(1, 3), "select_n": slice(1, None),
            "dynamic_update_slice": slice(0, 2), "dynamic_update_slice_in_dim": slice(0, 2),
            "dynamic_update_index_in_dim": slice(0, 2)}


def install():
    """The key-moving versions of the functions above in ``jaxprc.numpy`` and ``jaxprc.lax``, and
    ``jnp.equal``/``not_equal`` comparing keys."""
    from . import lax, numpy
    for module, names in ((numpy, NUMPY_MOVERS), (lax, LAX_MOVERS)):
        for name in names:
            together = TOGETHER.get(name) if not (module is numpy and name == "select") else None
            setattr(module, name, moves_keys(getattr(module, name), together))
    numpy.equal, numpy.not_equal = compares_keys(numpy.equal), compares_keys(numpy.not_equal)


def is_key_dtype(dtype) -> bool:
    from .random import PRNGKeyDType
    return isinstance(dtype, PRNGKeyDType)


def full_keys(shape: tuple, fill_value, dtype):
    """Keys of ``dtype`` filling ``shape``: copies of a key ``fill_value``, or keys whose every
    data word is the integer ``fill_value`` (``jnp.zeros(n, key_dtype)``), as JAX."""
    from .numpy.creation import full
    from .numpy.shape_ops import broadcast_to
    if _is_key(fill_value):
        if fill_value.dtype != dtype:
            raise ValueError(f"Cannot convert_element_type from {fill_value.dtype} to {dtype}")
        return moves_keys(broadcast_to)(fill_value, shape)
    impl = dtype._impl
    return _key_array_type()(full((*shape, *impl.key_shape), fill_value, "uint32"), impl)


def array_of_keys(obj, dtype):
    """``jnp.array``/``asarray`` of keys (one key array, or a list of keys): keys again; another
    dtype is a conversion keys refuse."""
    from .numpy._dtypes import to_dtype
    from .numpy.shape_ops import stack
    keys = obj if _is_key(obj) else moves_keys(stack)(list(obj))
    if dtype is not None and dtype != keys.dtype:
        raise ValueError(f"Cannot convert_element_type from {keys.dtype} to "
                         f"{dtype if is_key_dtype(dtype) else to_dtype(dtype)}")
    return keys


def compares_keys(fn):
    """``jnp.equal``/``not_equal`` of key arrays: the keys' own comparison (all words equal)."""
    @functools.wraps(fn)
    def wrapper(x, y, *args, **kwargs):
        if _is_key(x) or _is_key(y):
            if not (_is_key(x) and _is_key(y)):
                raise TypeError(f"{fn.__name__} does not accept dtypes {getattr(x, 'dtype', type(x).__name__)}, "
                                f"{getattr(y, 'dtype', type(y).__name__)}.")
            return (x == y) if fn.__name__ == "equal" else (x != y)
        return fn(x, y, *args, **kwargs)
    return wrapper


def abstract_keys_in(tree):
    """``tree`` with each ``ShapeDtypeStruct`` of a key dtype as abstract keys over their data
    (what ``eval_shape``/``make_jaxpr``/``lower`` trace with)."""
    from .api import ShapeDtypeStruct
    from .tree_util import tree_map

    def keys_of(x):
        if isinstance(x, ShapeDtypeStruct) and is_key_dtype(x.dtype):
            impl = x.dtype._impl
            return _key_array_type()(ShapeDtypeStruct((*x.shape, *impl.key_shape), "uint32"), impl)
        return x
    return tree_map(keys_of, tree)


def abstract_keys_out(tree):
    """``tree`` with each key array over abstract data as a ``ShapeDtypeStruct`` of its key dtype."""
    from .api import ShapeDtypeStruct
    from .tree_util import tree_map
    return tree_map(lambda x: ShapeDtypeStruct(x.shape, x.dtype) if _is_key(x) else x, tree, is_leaf=_is_key)
