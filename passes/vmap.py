"""The vmap pass: a jaxpr over one example becomes a jaxpr over a batch of them.

The pass retraces. A new builder's inputs are the batched inputs; the
equations of the source jaxpr are replayed in order, each value carrying its
batch dimension (an int, or ``not_mapped`` when the value is the same for
every example). An equation whose inputs are all unbatched is re-emitted as
it is, so unbatched values stay unbatched; otherwise the primitive's rule in
``batch_rules`` emits the batched computation:

    rule(batched_args, batch_dims, **params) -> (out, out_dim)

(lists for primitives with multiple results), JAX's batching-rule signature.
Rules move batch dimensions (``transpose``) and materialise unbatched values
(``broadcast_in_dim``) only where the primitive needs it. Primitives holding
sub-jaxprs batch them recursively (``batch_jaxpr``, ``batch_eval``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, Primitive, ShapedArray
from jaxprc.ir.shape_poly import DimExpr
from jaxprc.ir.sharding_type import dims, with_dims
from jaxprc.ir.tracing import Tracer, get_aval, replayed_sources, trace_to_jaxpr
from jaxprc.passes.registry import register_pass

from . import emit
from .memo import memoize_on_jaxpr

__all__ = ["vmap_jaxpr", "batch_rules", "not_mapped", "batch_jaxpr", "batch_eval",
           "BatchSpecError", "moveaxis", "matchaxis", "bdim_at_front"]

not_mapped = None
batch_rules: dict[Primitive, Callable] = {}


class BatchSpecError(ValueError):
    """An output is batched but its out_axes entry is None (the API names the output)."""

    def __init__(self, leaf_idx: int, src: int, dst):
        self.leaf_idx, self.src, self.dst = leaf_idx, src, dst
        super().__init__(f"vmap out_axes[{leaf_idx}] is {dst} but output {leaf_idx} was batched "
                         f"on axis {src}")


# --------------------------------------------------------- emitting helpers

def aval_of(x) -> ShapedArray:
    """The type of a tracer, literal or constant."""
    return x.aval if isinstance(x, (Tracer, Literal)) else get_aval(x)


def batched_aval(aval: ShapedArray, d, size: int) -> ShapedArray:
    """``aval`` with a batch axis of ``size`` inserted at ``d`` (unchanged when ``d`` is None)."""
    if d is None:
        return aval
    split = dims(aval)              # the batch axis is not split; the others keep their mesh axes
    return aval.update(shape=aval.shape[:d] + (size,) + aval.shape[d:],
                       sharding=with_dims(aval, split[:d] + ((),) + split[d:]))


def unbatched_aval(aval: ShapedArray, d) -> ShapedArray:
    """``aval`` without its batch axis ``d`` (one example's type)."""
    if d is None:
        return aval
    split = dims(aval)
    return aval.update(shape=aval.shape[:d] + aval.shape[d + 1:], sharding=with_dims(aval, split[:d] + split[d + 1:]))


def shift(axes, d) -> tuple:
    """Per-example axes as axes of the batched value whose batch dimension is ``d``."""
    return tuple(a + (a >= d) for a in axes)


def moveaxis(x, src: int, dst: int):
    """``x`` with axis ``src`` moved to position ``dst`` (one ``transpose``, none if equal)."""
    if src == dst:
        return x
    perm = [i for i in range(aval_of(x).ndim) if i != src]
    perm.insert(dst, src)
    return emit.transpose(x, tuple(perm))


def broadcast_batch(x, size: int, axis: int):
    """An unbatched ``x`` repeated ``size`` times along a new ``axis``."""
    shape = list(aval_of(x).shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return emit.broadcast_in_dim(x, tuple(shape), dims)


def matchaxis(x, src, dst, size: int):
    """``x`` batched at ``src`` (or unbatched) as a value batched at ``dst`` (or unbatched)."""
    if src == dst:
        return x
    if dst is None:
        raise ValueError("a batched value cannot be made unbatched")
    if src is None:
        return broadcast_batch(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, d, size: int):
    return matchaxis(x, d, 0, size)


def axis_size_of(args, dims) -> int:
    """The batch size, read off the first batched operand."""
    return next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)


def scalar(value, dtype) -> Literal:
    """A scalar literal of ``dtype``."""
    return Literal(value, ShapedArray((), dtype))


def full(value, dtype, shape):
    """An array of ``shape`` filled with ``value`` (a broadcast literal)."""
    return emit.broadcast_in_dim(scalar(value, dtype), tuple(shape), ())


# ------------------------------------------------------------ interpreter

# Primitives whose rule runs even when no operand is batched (a collective over the vmapped axis
# differs from the unbatched one); registered by their families.
rules_for_unbatched: set = set()

# Hooks (eqn -> batch size or None) of the families: an equation none of whose operands is batched
# must still be batched when one of its sub-programs uses such a collective (axis_index in a loop
# body). Its first operand is then broadcast, so that its rule runs.
sizes_for_unbatched: list = []


def _size_for_unbatched(eqn) -> int | None:
    return next((n for n in (hook(eqn) for hook in sizes_for_unbatched) if n is not None), None)


def batch_eval(jaxpr: Jaxpr, consts: Sequence, args: Sequence, dims: Sequence) -> tuple[list, list]:
    """Replay ``jaxpr`` in the current trace on batched ``args``; returns outputs and their batch dims.

    Emitted equations keep the source equation's location.
    """
    env: dict = {}

    def read(a):
        return (a, not_mapped) if type(a) is Literal else env[a]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, not_mapped)
    for v, x, d in zip(jaxpr.invars, args, dims):
        env[v] = (x, d)
    with replayed_sources() as location:
        for eqn in jaxpr.eqns:
            vals, in_dims = zip(*map(read, eqn.invars)) if eqn.invars else ((), ())
            location.source = eqn.source_info
            unbatched = in_dims.count(not_mapped) == len(in_dims) and eqn.primitive not in rules_for_unbatched
            size = _size_for_unbatched(eqn) if unbatched and vals else None
            if size is not None:
                vals, in_dims = (broadcast_batch(vals[0], size, 0), *vals[1:]), (0, *in_dims[1:])
                unbatched = False
            if unbatched:
                outs = eqn.primitive.bind(*vals, **eqn.params)
                out_dims = [not_mapped] * len(eqn.outvars) if eqn.primitive.multiple_results else not_mapped
            else:
                rule = batch_rules.get(eqn.primitive)
                if rule is None:
                    raise NotImplementedError(f"Batching rule for '{eqn.primitive.name}' not implemented "
                                              "(the vmap pass has no rule for this primitive)")
                outs, out_dims = rule(list(vals), list(in_dims), **eqn.params)
            if not eqn.primitive.multiple_results:
                outs, out_dims = [outs], [out_dims]
            for v, x, d in zip(eqn.outvars, outs, out_dims):
                env[v] = (x, d)
    outs, out_dims = zip(*map(read, jaxpr.outvars)) if jaxpr.outvars else ((), ())
    return list(outs), list(out_dims)


@memoize_on_jaxpr
def batch_jaxpr(cj: ClosedJaxpr, size: int, in_dims: Sequence,
                force_out: Sequence[bool] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """Batch a sub-jaxpr (no consts) along ``size``: inputs batched at ``in_dims``.

    Batched outputs come out at axis 0; ``force_out[i]`` materialises output i
    even when it is unbatched, so loop carries and branches agree. Returns the
    batched jaxpr and which outputs are batched.
    """
    force_out = force_out or [False] * len(cj.out_avals)
    out_batched: list[bool] = []

    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_dims)
        out_batched[:] = [d is not None or f for d, f in zip(dims, force_out)]
        return [matchaxis(x, d, 0 if b else None, size) for x, d, b in zip(outs, dims, out_batched)]

    avals = [batched_aval(a, d, size) for a, d in zip(cj.in_avals, in_dims)]
    batched = trace_to_jaxpr(fun, avals, name="vmap")
    assert not batched.consts, "batching a sub-jaxpr created constants"
    return batched, out_batched


def _normalize_axes(axes, count: int, ranks: Sequence[int], what: str) -> tuple:
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,) * count
    if len(axes) != count:
        raise ValueError(f"vmap {what} has {len(axes)} entries for {count} values")
    out = []
    for a, r in zip(axes, ranks):
        if a is not None:
            if not -(r + 1) <= a <= r:
                raise ValueError(f"vmap {what} entry {a} is out of range for a value of rank {r} "
                                 f"(its batched rank is {r + 1})")
            a = a % (r + 1)
        out.append(a)
    return tuple(out)


def vmap_jaxpr(cj: ClosedJaxpr, in_axes=0, axis_size: int | None = None, out_axes=0) -> ClosedJaxpr:
    """The batched version of ``cj`` (the ``vmap`` pass)."""
    return vmap_typed_jaxpr(cj, in_axes, axis_size, out_axes)


def vmap_typed_jaxpr(cj: ClosedJaxpr, in_axes=0, axis_size: int | None = None, out_axes=0,
                     batched_avals=None) -> ClosedJaxpr:
    """The batched version of ``cj``.

    ``in_axes``/``out_axes``: an int or None for every input/output, or one
    per input/output; negative axes count from the end of the batched value.
    ``axis_size`` is the batch size. An output batched where its out axis is
    None raises ``BatchSpecError``; an unbatched output with an int out axis
    is broadcast. ``batched_avals``: the batched inputs' types when they are known (the
    arguments' own, whose batch axis may be split over mesh axes); else ``cj``'s with an unsplit
    batch axis.
    """
    if axis_size is None:
        raise ValueError("the vmap pass needs axis_size (the batch size)")
    if type(axis_size) is not DimExpr and (isinstance(axis_size, bool) or not isinstance(
            axis_size, (int, np.integer)) or axis_size < 0):
        raise ValueError(f"the vmap pass's axis_size (the batch size) must be a non-negative "
                         f"integer, got {axis_size!r}")
    in_axes = _normalize_axes(in_axes, len(cj.in_avals), [a.ndim for a in cj.in_avals], "in_axes")
    out_axes = _normalize_axes(out_axes, len(cj.out_avals), [a.ndim for a in cj.out_avals], "out_axes")

    def fun(*args):
        outs, dims = batch_eval(cj.jaxpr, cj.consts, args, in_axes)
        for i, (d, dst) in enumerate(zip(dims, out_axes)):
            if dst is None and d is not None:
                raise BatchSpecError(i, d, dst)
        return [matchaxis(x, d, dst, axis_size) for x, d, dst in zip(outs, dims, out_axes)]

    avals = batched_avals or [batched_aval(a, d, axis_size) for a, d in zip(cj.in_avals, in_axes)]
    return trace_to_jaxpr(fun, avals, name="vmap")


# ------------------------------------------------------------ elementwise

def align(args, dims, scalar_ok=frozenset()):
    """Operands of an elementwise-style primitive, all batched at one axis; returns (args, axis).

    Operands have the per-example shape of the result, or are per-example
    scalars; batched scalars are broadcast to the full shape. Unbatched
    operands at the positions in ``scalar_ok`` that are scalars stay as they
    are (the primitive accepts a scalar there); other unbatched operands are
    materialised.
    """
    d0 = dims[0]
    if d0 is not None and dims.count(d0) == len(dims):      # the common case: already aligned
        ndim = len(aval_of(args[0]).shape)
        for x in args:
            if len(aval_of(x).shape) != ndim:
                break
        else:
            return list(args), d0
    size = axis_size_of(args, dims)
    ranks = [aval_of(x).ndim - (d is not None) for x, d in zip(args, dims)]
    rank = max(ranks)
    full = next(i for i, r in enumerate(ranks) if r == rank)
    out_dim = next((d for d, r in zip(dims, ranks) if d is not None and r == rank), 0)
    shape = list(unbatched_aval(aval_of(args[full]), dims[full]).shape)
    shape.insert(out_dim, size)
    aligned = []
    for i, (x, d, r) in enumerate(zip(args, dims, ranks)):
        if d is None and r == 0 and i in scalar_ok:
            aligned.append(x)
        elif r == rank:
            aligned.append(matchaxis(x, d, out_dim, size))
        else:   # a per-example scalar against arrays
            bdims = () if d is None else (out_dim,)
            aligned.append(emit.broadcast_in_dim(x, tuple(shape), bdims))
    return aligned, out_dim


def elementwise_rule(prim: Primitive, scalar_ok=frozenset()):
    """The batching rule of an elementwise-style ``prim`` (operands aligned by ``align``)."""
    def rule(args, dims, **params):
        args, d = align(args, dims, scalar_ok)
        return prim.bind(*args, **params), d
    return rule


register_pass("vmap", vmap_jaxpr)
