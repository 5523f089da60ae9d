"""``dot_product_attention``: JAX's reference (``implementation=None`` / ``"xla"``) path.

``softmax(q k^T * scale + bias, masked) v`` over inputs laid out ``[batch, seq,
heads, head_dim]`` (rank 3 drops the batch). Query heads may be a multiple of
the key/value heads (grouped-query attention): each group of ``N // K`` query
heads shares one key/value head. Masked logits take JAX's large negative value
(``-0.7 * finfo.max``, capped at float32's range) rather than ``-inf``, so a
fully masked row gives the mean of the values, as in JAX; the softmax runs in
float32 and the logits accumulate in at least float32.
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax, numpy as jnp
from jaxprc.ir import dtypes as dt
from jaxprc.numpy._util import aval_of

from .functions import logsumexp, softmax

__all__ = ["dot_product_attention"]


def _as_4d(t):
    t = jnp.asarray(t)
    extra = 4 - aval_of(t).ndim
    return jnp.expand_dims(t, tuple(range(extra))) if extra > 0 else t


def _check(t, shape, dtype, name):
    if t is None:
        return
    aval = aval_of(t)
    if aval.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {aval.ndim}")
    if dtype is not None and aval.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {aval.dtype}")
    if any(want != -1 and got != want for got, want in zip(aval.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {aval.shape}")


def _grouped(t, k, g):
    """A [B, N|1, T, S] bias or mask as [B, K, G|1, T, S], matching the grouped logits."""
    if t is None:
        return None
    b, n, tq, s = aval_of(t).shape
    return jnp.reshape(t, (b, 1, 1, tq, s)) if n == 1 else jnp.reshape(t, (b, k, g, tq, s))


def _combined_mask(mask, is_causal, t, s, q_seqlen, kv_seqlen, local_window_size):
    """The positions that may attend, as a bool array broadcastable to [B, K, G, T, S] (or None)."""
    keep = mask
    q_pos = jnp.arange(t)[:, None]
    k_pos = jnp.arange(s)[None, :]

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)
    if is_causal:
        keep = both(keep, q_pos >= k_pos)
    if local_window_size is not None:
        left, right = local_window_size
        keep = both(keep, jnp.logical_and(q_pos <= k_pos + left, q_pos >= k_pos - right))
    if q_seqlen is not None:
        keep = both(keep, (jnp.arange(t)[None, :, None] < q_seqlen[:, None, None])[:, None, None])
    if kv_seqlen is not None:
        keep = both(keep, (jnp.arange(s)[None, None, :] < kv_seqlen[:, None, None])[:, None, None])
    return keep


def _large_negative(dtype):
    return np.asarray(-0.7 * min(float(dt.finfo(dtype).max), float(dt.finfo(dt.float32).max)), dtype)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal: bool = False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """Scaled dot-product attention over ``[B, T, N, H]`` queries and ``[B, S, K, H]`` keys and
    values (``B`` may be absent); returns ``[B, T, N, H]``, and with ``return_residual`` also the
    logsumexp of the logits, ``[B, T, N]``."""
    if implementation not in (None, "xla"):
        if implementation == "cudnn":
            raise ValueError("dot_product_attention: implementation='cudnn' needs cuDNN, which jaxprc "
                             "does not use; use implementation=None or 'xla'")
        raise ValueError(f"Unsupported implementation option: {implementation}")
    out_shape = aval_of(jnp.asarray(query)).shape
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias = None if bias is None else _as_4d(bias)
    mask = None if mask is None else _as_4d(mask)
    q_seqlen = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_seqlen = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)

    b, s, nk, h = aval_of(k).shape
    kdtype = aval_of(k).dtype
    _check(v, [b, s, nk, h], kdtype, "value")
    _check(q, [b, -1, -1, h], kdtype, "query")
    _check(mask, [-1] * 4, dt.bool_, "mask")
    _check(bias, [-1] * 4, None, "bias")
    _check(q_seqlen, [b], dt.int32, "query_seq_lengths")
    _check(kv_seqlen, [b], dt.int32, "key_value_seq_lengths")
    _, t, n, _ = aval_of(q).shape
    if n % nk:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, but got {n} vs {nk}")
    g = n // nk
    scale = 1.0 / np.sqrt(h) if scale is None else scale

    logits_dtype = jnp.promote_types(aval_of(q).dtype, np.float32)
    qg = jnp.reshape(q, (b, t, nk, g, h))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", qg, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits_dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, nk, g)).astype(logits_dtype)
    keep = _combined_mask(_grouped(mask, nk, g), is_causal, t, s, q_seqlen, kv_seqlen, local_window_size)
    if keep is not None:
        logits = jnp.where(keep, logits, _large_negative(logits_dtype))
    logits = logits.astype(np.float32)                      # the softmax runs in float32
    probs = softmax(logits, axis=-1).astype(kdtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_seqlen is not None:
        valid = jnp.arange(t)[None, :] < q_seqlen[:, None]
        encoded = encoded * valid[:, :, None, None, None].astype(aval_of(encoded).dtype)
    out = jnp.reshape(encoded, out_shape)
    if not return_residual:
        return out
    lse = lax.stop_gradient(logsumexp(logits, axis=-1).astype(kdtype))       # [B, K, G, T]
    lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), (b, t, n))
    return out, jnp.reshape(lse, out_shape[:-1])
