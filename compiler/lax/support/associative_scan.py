"""``associative_scan``: an inclusive scan with an associative ``fn`` in logarithmic depth.

The parallel-prefix recursion: combine adjacent pairs, scan the half-length
result (which gives the odd positions), combine those with the remaining even
elements (the even positions), and interleave. ``fn`` is applied to whole
slices, so it must work elementwise along the scanned axis; it is called on
the same pairs, in the same order, as JAX calls it, so the results (rounding
included) are JAX's. Everything is slices, pads and concatenations, so
derivatives and batching come from those primitives.
"""
from __future__ import annotations

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.shape_poly import is_symbolic_dim
from jaxprc.ir.tree_util import tree_flatten
from jaxprc.engine.traceback_filtering import api_boundary

from . import operands as ops

__all__ = ["associative_scan"]


def _interleave(a, b, axis: int):
    """``a0 b0 a1 b1 ...`` along ``axis`` (``a`` as long as ``b`` or one longer): zero-padded
    copies added (or'ed for booleans), as JAX does."""
    na, nb = ops.aval(a).shape[axis], ops.aval(b).shape[axis]
    ndim = ops.aval(a).ndim
    a_pad, b_pad = [(0, 0, 0)] * ndim, [(0, 0, 0)] * ndim
    a_pad[axis] = (0, 1 if na == nb else 0, 1)
    b_pad[axis] = (1, 0 if na == nb else 1, 1)
    combine = lax.bitwise_or if dt.is_bool(ops.aval(a).dtype) else lax.add
    return combine(lax.pad(a, lax.full((), 0, ops.aval(a).dtype), a_pad),
                   lax.pad(b, lax.full((), 0, ops.aval(b).dtype), b_pad))


@api_boundary
def associative_scan(fn, elems, reverse: bool = False, axis: int = 0):
    """Inclusive scan of the pytree ``elems`` along ``axis`` with the associative ``fn(a, b)``
    (``a`` before ``b``); from the end when ``reverse``."""
    if not callable(fn):
        raise TypeError(f"lax.associative_scan: fn argument should be callable, got {fn!r}")
    flat, tree = tree_flatten(elems)
    if not flat:
        return elems
    axis = ops.canonical_axis(axis, ops.aval(flat[0]).ndim)
    n = ops.aval(flat[0]).shape[axis]
    if any(ops.aval(e).shape[axis] != n for e in flat[1:]):
        raise ValueError(f"Array inputs to associative_scan must have the same first dimension. (saw: "
                         f"{[ops.aval(e).shape for e in flat]})")
    if reverse:
        flat = [lax.rev(e, (axis,)) for e in flat]

    def combine(a_flat, b_flat):
        out, out_tree = tree_flatten(fn(tree.unflatten(a_flat), tree.unflatten(b_flat)))
        if out_tree != tree:
            raise TypeError(f"lax.associative_scan: fn must return the structure of elems {tree}, got {out_tree}")
        return out

    def slices(xs, start, stop=None, stride=1):
        return [lax.slice_in_dim(x, start, ops.aval(x).shape[axis] if stop is None else stop, stride, axis)
                for x in xs]

    def scan(xs):
        m = ops.aval(xs[0]).shape[axis]
        if is_symbolic_dim(m):        # the recursion follows the size: JAX refuses it too
            raise NotImplementedError(f"associative scan over axis of non-constant size: {m}. You may be "
                                      "able to avoid this on TPU. See b/274176030.")
        if m < 2:
            return xs
        odd = scan(combine(slices(xs, 0, m - 1, 2), slices(xs, 1, None, 2)))
        if m % 2 == 0:
            even = combine(slices(odd, 0, ops.aval(odd[0]).shape[axis] - 1), slices(xs, 2, None, 2))
        else:
            even = combine(odd, slices(xs, 2, None, 2))
        even = [lax.concatenate([first, rest], axis) for first, rest in zip(slices(xs, 0, 1), even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(flat)
    if reverse:
        out = [lax.rev(e, (axis,)) for e in out]
    return tree.unflatten(out)
