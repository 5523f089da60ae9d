"""jaxprc.scipy.ndimage: ``map_coordinates`` (``jax.scipy.ndimage``), interpolation of an array
at fractional coordinates of order 0 (nearest) or 1 (linear), with scipy's boundary modes."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from jaxprc import lax
from jaxprc import numpy as jnp
from jaxprc.ir import dtypes as dt

__all__ = ["map_coordinates"]


def _mirror(index, size):
    """Reflection about the edge elements (``d c b | a b c d | c b a``): a triangle wave."""
    half = size - 1
    return jnp.abs((index + half) % (2 * half) - half) if half else jnp.zeros_like(index)


def _reflect(index, size):
    """Reflection about the edges (``d c b a | a b c d | d c b a``)."""
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_INDEX_FIXERS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round(x):
    return x if dt.is_int(jnp.asarray(x).dtype) or dt.is_unsigned(jnp.asarray(x).dtype) else lax.round(x)


def _nearest(coordinate):
    return [(_round(coordinate).astype(np.int32), np.asarray(1, coordinate.dtype)[()])]


def _linear(coordinate):
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """``input`` sampled at ``coordinates`` (one array per dimension of ``input``), interpolated
    with splines of ``order`` 0 or 1; points outside follow ``mode`` ('constant' fills ``cval``)."""
    array = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, array.dtype)
    if len(coords) != array.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but {len(coords)} != {array.ndim}")
    fixer = _INDEX_FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(f"jaxprc.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
                                  f"Currently supported modes are {set(_INDEX_FIXERS)}.")
    nodes = {0: _nearest, 1: _linear}.get(order)
    if nodes is None:
        raise NotImplementedError("jaxprc.scipy.ndimage.map_coordinates currently requires order<=1")
    per_dim = []
    for coordinate, size in zip(coords, array.shape):
        per_dim.append([(fixer(index, size), (index >= 0) & (index < size) if mode == "constant" else None, weight)
                        for index, weight in nodes(coordinate)])
    terms = []
    for corner in itertools.product(*per_dim):
        indices, valid, weights = zip(*corner)
        value = array[tuple(indices)]
        if mode == "constant":
            value = jnp.where(functools.reduce(operator.and_, valid), value, cval)
        terms.append(functools.reduce(operator.mul, weights) * value)
    result = functools.reduce(operator.add, terms)
    if dt.is_int(array.dtype) or dt.is_unsigned(array.dtype):
        result = _round(result)
    return result.astype(array.dtype)
