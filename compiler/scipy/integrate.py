"""jax.scipy.integrate: the trapezoidal rule."""
from __future__ import annotations

from .. import numpy as jnp
from ..numpy._util import canonical_axis, located, promote


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x`` (their
    spacing along ``axis``; 1-D ``x`` spans y's axis) or with spacing ``dx``."""
    if x is None:
        (y,), _, _ = promote("trapezoid", y, to_inexact=True)
        y = jnp.asarray(y)
        axis = canonical_axis(axis, y.ndim, "trapezoid")
        y = jnp.moveaxis(y, axis, -1)
        return dx * (jnp.sum(y, axis=-1) - 0.5 * (y[..., 0] + y[..., -1]) if y.shape[-1] else
                     jnp.sum(y, axis=-1))
    y, x = jnp.asarray(y), jnp.asarray(x)
    axis = canonical_axis(axis, y.ndim, "trapezoid")
    y = jnp.moveaxis(y, axis, -1)
    if x.ndim == 1:
        if x.shape[0] != y.shape[-1]:
            raise ValueError(f"{located('trapezoid')}: x has length {x.shape[0]}, y has {y.shape[-1]} "
                             f"samples along axis {axis}")
        dx_ = jnp.diff(x)
    else:
        dx_ = jnp.diff(jnp.moveaxis(x, axis, -1), axis=-1)
    return 0.5 * jnp.sum(dx_ * (y[..., 1:] + y[..., :-1]), axis=-1)
