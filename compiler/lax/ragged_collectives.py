"""``ragged_all_to_all``: an all_to_all of variable-size slices (JAX's ``lax.ragged_all_to_all``).

Each device cuts ``K`` slices (along the leading axis) out of its ``operand``:
slice ``k`` starts at ``input_offsets[k]``, holds ``send_sizes[k]`` rows and goes
to the device at index ``k // (K / n)`` along ``axis_name`` (``n`` devices in a
group), which writes it into its copy of ``output`` at ``output_offsets[k]``.
``recv_sizes`` are the sizes each device receives, in the same layout. The
result is ``output`` with the received rows written in.

It lowers as JAX does, to XLA's ``ragged_all_to_all`` custom call. XLA's CPU
backend in jaxlib 0.10.2 cannot compile that instruction (``UNIMPLEMENTED:
HLO opcode ragged-all-to-all is not supported by XLA:CPU``, as with JAX), so on
CPU the program only traces, transforms and lowers; XLA reports the failure.
"""
from __future__ import annotations

import numpy as np

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import JaxprTypeError, Primitive
from jaxprc.ir.params import Int, Optional, Str, Tuple
from jaxprc.passes.jvp import Zero, instantiate_zeros
from jaxprc.passes.transpose import is_undefined_primal
from jaxprc.passes.vmap import axis_size_of

from .parallel import _axes, _channel_id, _dense, _groups, _index_groups, _vmapped, all_to_all

__all__ = ["ragged_all_to_all_p", "ragged_all_to_all"]

_NAMES = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")

ragged_all_to_all_p = Primitive("ragged_all_to_all")
ragged_all_to_all_p.def_params(axes=Tuple(Str()), axis_index_groups=Optional(Tuple(Tuple(Int(min=0)))))


def _ragged_rule(operand, output, *offsets_and_sizes, axes, axis_index_groups=None):
    if not axes:
        raise JaxprTypeError("ragged_all_to_all: needs at least one axis name")
    if operand.dtype != output.dtype or operand.shape[1:] != output.shape[1:] or not operand.ndim:
        raise JaxprTypeError(f"ragged_all_to_all: operand {operand.str_short()} and output {output.str_short()} "
                             "must have one dtype and the same shape after their leading axis")
    for name, a in zip(_NAMES, offsets_and_sizes):
        if not np.issubdtype(a.dtype, np.integer):
            raise JaxprTypeError(f"ragged_all_to_all {name} must be integer type, got {a.str_short()}")
        if a.ndim != 1 or a.shape[0] < 1:
            raise JaxprTypeError(f"ragged_all_to_all {name} must be rank 1 with positive dimension size, "
                                 f"but got shape {a.shape}")
    if len({a.shape for a in offsets_and_sizes}) != 1:
        raise JaxprTypeError("ragged_all_to_all: input_offsets, send_sizes, output_offsets and recv_sizes must "
                             f"have one shape, got {[a.str_short() for a in offsets_and_sizes]}")
    return output.update(weak_type=False)


ragged_all_to_all_p.def_abstract_eval(_ragged_rule)


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *, axis_name,
                      axis_index_groups=None):
    """``output`` with the slices the devices along ``axis_name`` send this one written in (see the
    module's docstring)."""
    axes = _axes(axis_name, "ragged_all_to_all")
    groups = _index_groups(axis_index_groups, axis_name, "ragged_all_to_all")
    extra = {} if groups is None else {"axis_index_groups": groups}
    return ragged_all_to_all_p.bind(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                                    axes=axes, **extra)


def _ragged_jvp(primals, tangents, **params):
    """Linear in (operand, output) together; the offsets and sizes are indices."""
    out = ragged_all_to_all_p.bind(*primals, **params)
    d_operand, d_output = tangents[:2]
    if isinstance(d_operand, Zero) and isinstance(d_output, Zero):
        return out, Zero(out.aval)
    return out, ragged_all_to_all_p.bind(instantiate_zeros(d_operand), instantiate_zeros(d_output),
                                         *primals[2:], **params)


ad.primitive_jvps[ragged_all_to_all_p] = _ragged_jvp


def _received_rows(offsets, sizes, rows: int):
    """bool[rows]: whether each row of the result was written by a received slice."""
    from jaxprc import lax
    shape = (rows, offsets.shape[0])
    r = lax.broadcasted_iota(offsets.dtype, shape, 0)
    start = lax.broadcast_in_dim(offsets, shape, (1,))
    end = lax.broadcast_in_dim(lax.add(offsets, lax.convert_element_type(sizes, offsets.dtype)), shape, (1,))
    return lax.reduce_or(lax.bitwise_and(lax.ge(r, start), lax.lt(r, end)), (1,))


def _ragged_transpose(ct, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *, axes,
                      axis_index_groups=None):
    """The operand's cotangent: the received rows sent back to where they came from; the output's:
    the cotangent where nothing was received."""
    from jaxprc import lax
    from jaxprc.passes.emit import zeros
    want_operand, want_output = is_undefined_primal(operand), is_undefined_primal(output)
    rest = [None] * 4
    if isinstance(ct, Zero):
        return [Zero(operand.aval) if want_operand else None, Zero(output.aval) if want_output else None] + rest
    extra = {} if axis_index_groups is None else {"axis_index_groups": axis_index_groups}
    # where this device's received slices are (and where its own slices came from on the senders)
    a2a = lambda v: all_to_all(v, axes, 0, 0, tiled=True, axis_index_groups=axis_index_groups)   # noqa: E731
    received_at = a2a(output_offsets)
    ct_operand = ct_output = None
    if want_operand:
        ct_operand = ragged_all_to_all_p.bind(ct, zeros(operand.aval), received_at, recv_sizes, a2a(input_offsets),
                                              send_sizes, axes=axes, **extra)
    if want_output:
        mask = lax.broadcast_in_dim(_received_rows(received_at, recv_sizes, ct.aval.shape[0]), ct.aval.shape, (0,))
        ct_output = lax.select(mask, lax.full(ct.aval.shape, 0, ct.aval.dtype), ct)
    return [ct_operand, ct_output] + rest


ad.primitive_transposes[ragged_all_to_all_p] = _ragged_transpose


def _ragged_batch(args, dims, *, axes, axis_index_groups=None):
    """A batch of exchanges as one: the examples' rows stacked along the leading axis, each
    example's offsets moved to its block; the offsets' batch axis goes second (slice k of
    example b is entry (k, b): each destination still gets a contiguous run of slices)."""
    from jaxprc import lax
    if _vmapped("ragged_all_to_all", axes):
        raise NotImplementedError("ragged_all_to_all over a vmap axis is not supported (nor is it in JAX)")
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all: vmap with axis_index_groups is not supported (nor is it "
                                  "in JAX)")
    size = axis_size_of(args, dims)
    front = [batching.bdim_at_front(x, d, size) for x, d in zip(args[:2], dims[:2])]
    rows_in, rows_out = front[0].aval.shape[1], front[1].aval.shape[1]

    def second(x, d):
        x = batching.bdim_at_front(x, d, size)
        return lax.transpose(x, (1, 0))
    idx = [second(x, d) for x, d in zip(args[2:], dims[2:])]
    k = idx[0].aval.shape[0]
    shift = lambda v, rows: lax.add(v, lax.broadcast_in_dim(          # noqa: E731
        lax.mul(lax.iota(v.aval.dtype, size), lax.full((), rows, v.aval.dtype)), (k, size), (1,)))
    idx[0], idx[2] = shift(idx[0], rows_in), shift(idx[2], rows_out)
    merge = lambda x: lax.reshape(x, (x.aval.shape[0] * x.aval.shape[1],) + x.aval.shape[2:])   # noqa: E731
    out = ragged_all_to_all_p.bind(*map(merge, front + idx), axes=axes)
    return lax.reshape(out, (size, rows_out) + out.aval.shape[1:]), 0


batching.primitive_batchers[ragged_all_to_all_p] = _ragged_batch


def _ragged_lowering(ctx, operand, output, *offsets_and_sizes, axes, axis_index_groups=None):
    config = ir.DictAttr.get({     # JAX's spelling: the channel and groups in the backend config
        "channel_id": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _channel_id(ctx)),
        "replica_groups": _dense(_groups(ctx, axes, "ragged_all_to_all", axis_index_groups))})
    return hlo.CustomCallOp([output.type], [operand, output, *offsets_and_sizes],
                            call_target_name=ir.StringAttr.get("ragged_all_to_all"), backend_config=config,
                            api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4)).results


mlir.register_lowering(ragged_all_to_all_p, _ragged_lowering)
