"""``jaxprc.experimental.sparse``: sparse arrays in batched-coordinate (BCOO) form.

A ``BCOO`` holds ``data`` (the ``nse`` stored values) and ``indices`` (``nse`` x ``ndim``
coordinates) of an array of ``shape``; it is a pytree of those two arrays, so ``jit``, ``grad``
and ``vmap`` of functions taking one work as for any pytree. Its operations are written with
jaxprc.numpy's gathers and scatter-adds (there are no sparse primitives): ``todense``,
``fromdense``, ``from_scipy_sparse``, products with dense arrays (``@``), ``sum``, transposition,
and scaling by a scalar. Batch and dense dimensions (JAX's ``n_batch``, ``n_dense``), BCSR and
``sparsify`` are not provided.
"""
from __future__ import annotations

import numpy as np

from .. import numpy as jnp
from ..ir.tree_util import register_pytree_node

__all__ = ["BCOO", "bcoo_fromdense", "bcoo_todense", "todense", "fromdense"]


class BCOO:
    """A sparse array: ``data[i]`` is stored at ``indices[i]`` (repeated indices add up)."""

    __array_priority__ = 200     # ``dense @ bcoo`` and ``scalar * bcoo`` come to this class

    def __init__(self, args, *, shape):
        data, indices = args
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.shape = tuple(int(d) for d in shape)
        if self.indices.ndim != 2 or self.indices.shape[1] != len(self.shape):
            raise ValueError(f"BCOO: indices of shape {self.indices.shape} do not index an array of "
                             f"shape {self.shape} (expected (nse, {len(self.shape)}))")

    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: len(self.shape))
    nse = property(lambda self: self.data.shape[0])
    size = property(lambda self: int(np.prod(self.shape)))

    def __repr__(self):
        return f"BCOO({self.dtype.name}{list(self.shape)}, nse={self.nse})"

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=jnp.int32) -> "BCOO":
        """The nonzeros of ``mat`` (``nse``: how many to store; needed under a trace)."""
        mat = jnp.asarray(mat)
        if nse is None:
            nse = int(jnp.count_nonzero(mat))
        indices = jnp.stack(jnp.nonzero(mat, size=nse), axis=1).astype(index_dtype)
        data = mat[tuple(indices.T)] if nse else jnp.zeros((0,), mat.dtype)
        return cls((data, indices), shape=mat.shape)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=jnp.int32) -> "BCOO":
        """A scipy.sparse matrix's stored entries (its explicit zeros included)."""
        coo = mat.tocoo()
        indices = np.stack([coo.row, coo.col], axis=1).astype(index_dtype)
        return cls((jnp.asarray(coo.data), jnp.asarray(indices)), shape=coo.shape)

    def todense(self):
        """The dense array (repeated indices summed)."""
        out = jnp.zeros(self.shape, self.dtype)
        return out.at[tuple(self.indices.T)].add(self.data) if self.nse else out

    def transpose(self, axes=None) -> "BCOO":
        axes = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        return BCOO((self.data, self.indices[:, list(axes)]), shape=[self.shape[a] for a in axes])

    T = property(lambda self: self.transpose())

    def sum(self, axis=None, keepdims: bool = False):
        """A dense sum over ``axis`` (all axes when None)."""
        return self.todense().sum(axis=axis, keepdims=keepdims) if axis is not None else (
            jnp.sum(self.data) if not keepdims else jnp.sum(self.data).reshape((1,) * self.ndim))

    def _matmul(self, other):
        """``self @ other`` for a 2-d ``self``: the stored values scaled by ``other``'s rows,
        added into their output rows."""
        if self.ndim != 2:
            raise NotImplementedError(f"BCOO @: only 2-d sparse arrays, got shape {self.shape}")
        other = jnp.asarray(other)
        rows, cols = self.indices[:, 0], self.indices[:, 1]
        contrib = self.data.reshape((-1,) + (1,) * (other.ndim - 1)) * other[cols]
        out = jnp.zeros((self.shape[0],) + other.shape[1:], contrib.dtype)
        return out.at[rows].add(contrib)

    def __matmul__(self, other):
        if isinstance(other, BCOO):
            other = other.todense()
        return self._matmul(other)

    def __rmatmul__(self, other):
        other = jnp.asarray(other)
        if other.ndim == 1:
            return self.T._matmul(other)
        return jnp.swapaxes(self.T._matmul(jnp.swapaxes(other, -1, -2)), -1, -2)

    def __mul__(self, scalar):
        if jnp.ndim(scalar) != 0:
            raise NotImplementedError("BCOO *: only by a scalar (use todense() for elementwise products)")
        return BCOO((self.data * scalar, self.indices), shape=self.shape)

    __rmul__ = __mul__

    def __neg__(self):
        return BCOO((-self.data, self.indices), shape=self.shape)


register_pytree_node(BCOO, lambda m: ((m.data, m.indices), m.shape),
                     lambda shape, children: BCOO(children, shape=shape))


def bcoo_fromdense(mat, *, nse: int | None = None, index_dtype=jnp.int32) -> BCOO:
    return BCOO.fromdense(mat, nse=nse, index_dtype=index_dtype)


def bcoo_todense(mat: BCOO):
    return mat.todense()


fromdense = bcoo_fromdense


def todense(mat):
    """A BCOO's dense array; any other array as it is."""
    return mat.todense() if isinstance(mat, BCOO) else mat
