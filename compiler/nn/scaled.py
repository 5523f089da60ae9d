"""Block-scaled matrix products: ``scaled_matmul`` (its documented reference semantics, computed
in float32), ``scaled_dot_general`` and ``get_scaled_dot_general_config``.

``scaled_matmul(a, b, a_scales, b_scales)`` is ``einsum('BMK,BNK->BMN', a * repeat(a_scales),
b * repeat(b_scales))`` with each scale repeated over its block of the contracting dimension.
JAX computes it only through cuDNN; here it is that formula, for the dtypes jaxprc holds (the
float8/float4 storage types of the cuDNN path are not IR dtypes). ``scaled_dot_general``
without ``configs`` is ``dot_general``; with quantization configs it needs those float8 types,
and so does not run here, as it does not run in JAX on CPU.
"""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from jaxprc import lax
from jaxprc import numpy as jnp
from jaxprc.numpy._util import aval_of

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]


@dataclasses.dataclass
class BlockScaleConfig:
    """How ``scaled_dot_general`` quantizes an operand: block size, storage and scale dtypes."""
    mode: str
    block_size: int
    data_type: object
    scale_type: object
    global_scale: object
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale=None) -> BlockScaleConfig:
    """The quantization config of ``mode``: 'nvfp4' (blocks of 16, float4 data, float8 scales, a
    global scale) or 'mxfp8' (blocks of 32, float8 data, power-of-two scales)."""
    if mode == "nvfp4":
        return BlockScaleConfig("nvfp4", 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn,
                                jnp.ones((1,), np.float32) if global_scale is None else global_scale, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, None, False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """``lhs[B, M, K] @ rhs[B, N, K]^T`` with per-block scales ``[B, M, K/bs]`` and ``[B, N, K/bs]``."""
    a, b, sa, sb = (jnp.asarray(x) for x in (lhs, rhs, lhs_scales, rhs_scales))
    shapes = [aval_of(x).shape for x in (a, b, sa, sb)]
    if any(len(s) != 3 for s in shapes):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    (ba, m, ka), (bb, n, kb), (bsa, msa, ksa), (bsb, nsb, ksb) = shapes
    if ka != kb or ba != bb:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) and contract (K) "
                         f"dimensions, but got shapes {shapes[0]} and {shapes[1]}")
    if bsa != bsb or ksa != ksb:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and contract (K) dimensions, "
                         f"but got shapes {shapes[2]} and {shapes[3]}")
    if bsa != ba or msa != m or nsb != n or ksa == 0 or ka % ksa:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of inputs, but got "
                         f"shapes a: {shapes[0]}, b: {shapes[1]}, a_scales: {shapes[2]}, b_scales: {shapes[3]}")

    def scaled(x, s):
        block = ka // ksa
        s = jnp.repeat(s.astype(np.float32), block, axis=-1)
        return x.astype(np.float32) * s
    out = lax.dot_general(scaled(a, sa), scaled(b, sb), (((2,), (2,)), ((0,), (0,))),
                          preferred_element_type=np.float32)
    return out.astype(preferred_element_type)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32, configs=None,
                       implementation=None):
    """``dot_general`` of ``lhs`` and ``rhs``, block-quantized per ``configs`` when given."""
    if configs is not None:
        raise NotImplementedError("scaled_dot_general with quantization configs stores operands as "
                                  "float8/float4, which jaxprc's IR does not hold (nor does JAX run it on CPU); "
                                  "pass configs=None for the unquantized product")
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
