"""XLA's own random number generators: ``rng_bit_generator`` (a counter-based generator with an
explicit key, returning the advanced key) and ``rng_uniform`` (XLA's stateful uniform sampler).

Both have no derivative (their outputs are integers, or random draws JAX does
not differentiate). A batch of keys draws from its first key alone, as JAX
0.10 batches ``rng_bit_generator``; a batch of ``rng_uniform`` bounds is
mapped over one example at a time (a ``scan``).
"""
from __future__ import annotations

import enum

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray, param_type
from jaxprc.ir.params import DType, Enum, Int, Tuple

from .support import operands as ops

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_uniform", "rng_bit_generator_p", "rng_uniform_p"]


@param_type
class RandomAlgorithm(enum.IntEnum):
    """The bit generator's algorithm."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"RandomAlgorithm.{self.name}"


_BITS_DTYPES = (dt.uint8, dt.uint16, dt.uint32, dt.uint64)

rng_bit_generator_p = Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
rng_bit_generator_p.def_params(shape=Tuple(Int(min=0)), dtype=DType(), algorithm=Enum(RandomAlgorithm))


@rng_bit_generator_p.def_abstract_eval
def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm):
    if not ((key.shape == (4,) and key.dtype == dt.uint32) or (key.shape == (2,) and key.dtype == dt.uint64)):
        raise JaxprTypeError(f"rng_bit_generator: the key must be u32[4] (or u64[2]), got {key.str_short()}")
    if dtype not in _BITS_DTYPES:
        raise JaxprTypeError(f"rng_bit_generator: unsupported dtype {dtype}; expected an unsigned integer dtype")
    return [ShapedArray(key.shape, key.dtype, key.weak_type), ShapedArray(shape, dtype)]


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *, out_sharding=None):
    """``(new_key, bits)``: ``shape`` random bits of the unsigned ``dtype`` from a u32[4] ``key``."""
    if out_sharding is not None:
        raise NotImplementedError("rng_bit_generator: jaxprc has no shardings (out_sharding must be None)")
    dtype = dt.canonicalize_dtype(dtype)
    if dtype not in _BITS_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    return tuple(rng_bit_generator_p.bind(key, shape=ops.ints(shape), dtype=dtype,
                                          algorithm=RandomAlgorithm(algorithm)))


ad.defjvp_zero(rng_bit_generator_p)


def _rng_bit_generator_batch(args, dims, *, shape, **params):
    """As JAX 0.10 batches it: one draw of ``(batch, *shape)`` bits from the batch's first key,
    which alone advances (the other keys come back unchanged)."""
    (keys,), (d,) = args, dims
    keys = batching.moveaxis(keys, d, 0)
    new_key, bits = rng_bit_generator_p.bind(lax.index_in_dim(keys, 0, keepdims=False),
                                             shape=(ops.aval(keys).shape[0], *shape), **params)
    return [lax.dynamic_update_index_in_dim(keys, new_key, 0, 0), bits], [0, 0]


batching.primitive_batchers[rng_bit_generator_p] = _rng_bit_generator_batch


def _rng_bit_generator_lowering(ctx, key, *, shape, dtype, algorithm):
    # XLA takes a u64[2] key: a u32[4] key is reinterpreted (and the new key converted back).
    u32, u64 = ir.IntegerType.get_unsigned(32), ir.IntegerType.get_unsigned(64)
    key_is_u32 = ctx.avals_in[0].dtype == dt.uint32
    if key_is_u32:
        key = hlo.bitcast_convert(ir.RankedTensorType.get([2], u64),
                                  hlo.reshape(ir.RankedTensorType.get([2, 2], u32), key))
    # XLA generates 32 or 64 bits; narrower dtypes take the low bits of u32 draws, as in JAX.
    gen_dtype = dtype if dtype in (dt.uint32, dt.uint64) else dt.uint32
    attr = hlo.RngAlgorithmAttr.get({RandomAlgorithm.RNG_DEFAULT: "DEFAULT", RandomAlgorithm.RNG_THREE_FRY:
                                     "THREE_FRY", RandomAlgorithm.RNG_PHILOX: "PHILOX"}[algorithm])
    new_key, bits = hlo.RngBitGeneratorOp(key.type, ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(gen_dtype)),
                                          attr, key).results
    if key_is_u32:
        new_key = hlo.reshape(ir.RankedTensorType.get([4], u32),
                              hlo.bitcast_convert(ir.RankedTensorType.get([2, 2], u32), new_key))
    if gen_dtype != dtype:
        bits = hlo.convert(mlir.aval_to_ir_type(ctx.avals_out[1]), bits)
    return [new_key, bits]


mlir.register_lowering(rng_bit_generator_p, _rng_bit_generator_lowering)


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.def_params(shape=Tuple(Int(min=0)))


@rng_uniform_p.def_abstract_eval
def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise JaxprTypeError(f"Arguments to rng_uniform must have identical dtypes, got {a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise JaxprTypeError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} and {b.shape}.")
    if not (dt.is_float(a.dtype) or dt.is_int(a.dtype)) or dt.is_bool(a.dtype):
        raise JaxprTypeError(f"rng_uniform: expected a floating or integer dtype, got {a.dtype}")
    return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


def rng_uniform(a, b, shape):
    """Uniform draws in ``[a, b)`` of ``shape`` from XLA's stateful generator (not reproducible)."""
    a, b = ops.match_python_scalars("rng_uniform", (a, b))
    return rng_uniform_p.bind(a, b, shape=ops.ints(shape))


ad.defjvp_zero(rng_uniform_p)


def _rng_uniform_batch(args, dims, *, shape):
    """Batched bounds: one draw of ``shape`` per example (a ``scan`` over the batch)."""
    size = next(ops.aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    a, b = (batching.matchaxis(x, d, 0, size) for x, d in zip(args, dims))
    return lax.map(lambda ab: rng_uniform_p.bind(*ab, shape=shape), (a, b)), 0


batching.primitive_batchers[rng_uniform_p] = _rng_uniform_batch


def _rng_uniform_lowering(ctx, a, b, *, shape):
    dims = mlir.ir_constant(np.array(shape, np.int64))
    return hlo.rng(a, b, dims, hlo.RngDistributionAttr.get("UNIFORM"))


mlir.register_lowering(rng_uniform_p, _rng_uniform_lowering)
