"""jax.scipy.interpolate: RegularGridInterpolator, linear and nearest-neighbour interpolation on a
rectilinear grid.

Each query coordinate finds its cell by ``searchsorted`` on its (strictly increasing) axis; the
cell index is clamped to the grid, so points outside extrapolate linearly unless ``fill_value``
replaces them. Everything is traced arithmetic, so the result is differentiable in the values
and in the query points, and works under jit and vmap (the interpolator is a pytree).
"""
from __future__ import annotations

import itertools

import numpy as np

from jaxprc import numpy as jnp
from jaxprc import tree_util

from ..numpy._util import aval_of, located
from ..numpy.convolve import promote_no_broadcast

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")
_NAME = "RegularGridInterpolator"


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method {method!r} is not defined")


def _query_points(xi, ndim: int):
    """``xi`` (an array whose last axis is the ``ndim`` coordinates, or a tuple of coordinate
    arrays) as an array of shape ``(..., ndim)``."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        for x in xi:
            aval_of(x, _NAME)
        parts = jnp.broadcast_arrays(*xi)
        # As JAX: coordinates given as a tuple are gathered into the default float dtype.
        return jnp.stack([jnp.asarray(p, dtype=float) for p in parts], axis=-1)
    aval_of(xi, _NAME)
    xi = jnp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


class RegularGridInterpolator:
    """Interpolate on a regular (rectilinear) grid, as ``scipy.interpolate.RegularGridInterpolator``.

    ``points``: one strictly increasing 1-D coordinate array per leading axis of ``values``;
    ``method``: ``"linear"`` or ``"nearest"``; ``fill_value``: the result at query points outside
    the grid (``None`` extrapolates). ``bounds_error=True`` is not supported (as in JAX: bounds
    cannot be checked on traced points)."""

    def __init__(self, points, values, method="linear", bounds_error=False, fill_value=np.nan):
        _check_method(method)
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        values_aval = aval_of(values, _NAME)
        if len(points) > values_aval.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values_aval.ndim} dimensions")
        values, = promote_no_broadcast(_NAME, values)
        if fill_value is not None:
            aval_of(fill_value, _NAME)
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible with values")
        self.fill_value = fill_value
        for p in points:
            aval_of(p, _NAME)
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        _check_method(method)
        ndim = len(self.grid)
        xi = _query_points(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"{located(_NAME)}: the requested sample points xi have dimension "
                             f"{xi.shape[-1]}, but this RegularGridInterpolator has dimension {ndim}")
        batch_shape = xi.shape[:-1]
        xi = xi.reshape(-1, ndim)
        indices, fractions, outside = self._find_cells(xi)
        if method == "linear":
            result = self._linear(indices, fractions)
        else:
            # Ties (a point halfway between two grid nodes) go to the lower node, as in JAX.
            result = self.values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(indices, fractions))]
        if self.fill_value is not None:
            outside = outside.reshape(outside.shape + (1,) * (result.ndim - 1))
            result = jnp.where(outside, self.fill_value, result)
        return result.reshape(batch_shape + self.values.shape[ndim:])

    def _find_cells(self, xi):
        """Per axis: the index of each point's cell (clamped to the grid), the point's fractional
        position in it, and whether any coordinate lies outside the grid (NaN does not)."""
        indices, fractions = [], []
        outside = jnp.zeros(xi.shape[:1], dtype=bool)
        for axis, g in enumerate(self.grid):
            x = xi[:, axis]
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            indices.append(i)
            fractions.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, fractions, outside

    def _linear(self, indices, fractions):
        """The sum over the cell's 2**ndim corners of value * product of per-axis weights."""
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        result = jnp.asarray(0.)
        for upper in itertools.product((False, True), repeat=len(indices)):
            weight = jnp.asarray(1.)
            for u, t in zip(upper, fractions):
                weight = weight * (t if u else 1 - t)
            corner = tuple(i + 1 if u else i for u, i in zip(upper, indices))
            result = result + self.values[corner] * weight[trailing]
        return result


tree_util.register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(children[0], children[1], *aux, children[2]),
)
