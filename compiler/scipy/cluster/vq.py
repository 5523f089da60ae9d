"""jax.scipy.cluster.vq: assign observations to their nearest code."""
from __future__ import annotations

from jaxprc import numpy as jnp

from ...numpy._util import aval_of
from ...numpy.convolve import promote_no_broadcast

__all__ = ["vq"]


def vq(obs, code_book, check_finite: bool = True):
    """The index of the nearest (Euclidean) code of ``code_book`` (K, N) for each observation of
    ``obs`` (M, N), and the distance to it; 1-D arguments are length-1 vectors. ``check_finite``
    is accepted and unused, as in JAX (values cannot be checked on traced arrays)."""
    del check_finite
    for x in (obs, code_book):
        aval_of(x, "scipy.cluster.vq.vq")       # a clear error for lists and other non-arrays
    obs, code_book = promote_no_broadcast("scipy.cluster.vq.vq", obs, code_book)
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    dist = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
