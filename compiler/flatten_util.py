"""jaxprc.flatten_util: ``ravel_pytree``, a pytree of arrays as one 1-D array and back."""
from __future__ import annotations

import numpy as np

from . import lax
from .ir import dtypes as dt
from .ir.tracing import get_aval
from .ir.tree_util import tree_flatten, tree_unflatten
from .numpy._dtypes import result_type

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """``(flat, unravel)``: the leaves raveled and concatenated (dtypes promoted; an empty tree
    gives ``float32[0]``), and the function that turns such a vector back into the tree."""
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, dt.float32), _Unravel(treedef, (), (), (), None)
    avals = [get_aval(x) for x in leaves]
    from_dtypes = tuple(a.dtype for a in avals)
    to_dtype = result_type(*from_dtypes)
    sizes = tuple(a.size for a in avals)
    shapes = tuple(a.shape for a in avals)
    flat = lax.concatenate([lax.reshape(lax.convert_element_type(x, to_dtype), (a.size,))
                            for x, a in zip(leaves, avals)], 0)
    # One dtype: unravel keeps whatever dtype it is given (JAX's dtype-polymorphic unravel).
    check = None if all(d == to_dtype for d in from_dtypes) else to_dtype
    return flat, _Unravel(treedef, sizes, shapes, from_dtypes, check)


class _Unravel:
    """ravel_pytree's inverse for one layout. Two of the same layout are equal (and hash alike),
    so ``jit(unravel)`` of a new one reuses the compiled program of a live equal one, as in JAX."""

    def __init__(self, treedef, sizes, shapes, from_dtypes, to_dtype):
        self._layout = (treedef, sizes, shapes, from_dtypes, to_dtype)

    def __eq__(self, other):
        return type(other) is _Unravel and self._layout == other._layout

    def __hash__(self):
        return hash(self._layout)

    def __call__(self, flat):
        return _unravel(*self._layout, flat)


def _unravel(treedef, sizes, shapes, from_dtypes, to_dtype, flat):
    aval = get_aval(flat)
    if to_dtype is not None and aval.dtype != to_dtype:
        raise TypeError(f"unravel function given array of dtype {aval.dtype}, but expected dtype {to_dtype}")
    if aval.shape != (sum(sizes),):
        raise ValueError(f"unravel function given array of shape {aval.shape}, but expected "
                         f"({sum(sizes)},)")
    starts = np.cumsum((0,) + sizes)
    chunks = [lax.reshape(lax.slice_in_dim(flat, int(a), int(b)), shape)
              for a, b, shape in zip(starts[:-1], starts[1:], shapes)]
    if to_dtype is not None:
        chunks = [lax.convert_element_type(c, d) for c, d in zip(chunks, from_dtypes)]
    return tree_unflatten(treedef, chunks)
