"""``lax.reduce``: reduce one or more arrays along dimensions with a Python reducer.

The reducer takes two pytrees of scalars (the accumulated values and the next
ones) and returns one. A reducer that is one of the monoids ``add mul max min
and or xor`` on a single operand, with that monoid's identity as a concrete
init value, becomes the matching ``reduce_*`` primitive (as in JAX); any other
becomes the ``reduce`` primitive, whose param ``jaxpr`` is the reducer traced
on scalars (2N scalars -> N scalars) and which lowers to XLA's reduce with that
body. Its derivative is JAX's: the reduced dimensions are flattened and folded
pairwise (a balanced tree of reducer applications), differentiated with jvp.
"""
from __future__ import annotations

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir import dtypes as dt
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import ClosedJaxpr, JaxprTypeError, Primitive, ShapedArray
from jaxprc.ir.params import ClosedJaxprParam, Int, Tuple
from jaxprc.ir.tracing import Tracer, eval_jaxpr, trace_to_jaxpr
from jaxprc.passes.jvp import aval_of, jvp_eval
from jaxprc.passes.vmap import shift, vmap_jaxpr

from .support import operands as ops
from .control_flow.common import check_subjaxpr, fmt_types, typematch

__all__ = ["reduce", "reduce_p"]

reduce_p = Primitive("reduce")
reduce_p.multiple_results = True
reduce_p.def_params(jaxpr=ClosedJaxprParam(), dimensions=Tuple(Int(min=0)))


@reduce_p.def_abstract_eval
def _reduce_abstract_eval(*args, jaxpr, dimensions):
    check_subjaxpr("reduce", "jaxpr", jaxpr)
    n, odd = divmod(len(args), 2)
    if odd or n == 0:
        raise JaxprTypeError(f"reduce takes N operands and N init values, got {len(args)} arguments")
    operands, inits = args[:n], args[n:]
    shape = operands[0].shape
    if any(x.shape != shape for x in operands):
        raise JaxprTypeError(f"reduce: operands must have equal shapes, got ({fmt_types(operands)})")
    if any(i.shape != () for i in inits) or any(i.dtype != x.dtype for i, x in zip(inits, operands)):
        raise JaxprTypeError(f"reduce: init values must be scalars of the operands' dtypes, got operands "
                             f"({fmt_types(operands)}) and init values ({fmt_types(inits)})")
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < len(shape) for d in dimensions):
        raise JaxprTypeError(f"reduce: dimensions {dimensions} must be distinct axes of rank {len(shape)}")
    scalars = [ShapedArray((), x.dtype) for x in operands]
    if len(jaxpr.in_avals) != 2 * n or not all(map(typematch, jaxpr.in_avals, scalars + scalars)) \
            or len(jaxpr.out_avals) != n or not all(map(typematch, jaxpr.out_avals, scalars)):
        raise JaxprTypeError(f"reduce: the reducer must map ({fmt_types(scalars + scalars)}) to "
                             f"({fmt_types(scalars)}), got ({fmt_types(jaxpr.in_avals)}) -> "
                             f"({fmt_types(jaxpr.out_avals)})")
    out_shape = tuple(s for d, s in enumerate(shape) if d not in dimensions)
    return [ShapedArray(out_shape, x.dtype, x.weak_type) for x in operands]


_MONOIDS = {"add": "reduce_sum", "mul": "reduce_prod", "max": "reduce_max", "min": "reduce_min",
            "and": "reduce_and", "or": "reduce_or", "xor": "reduce_xor"}


def _identity(kind, dtype):
    """The identity of a monoid at ``dtype`` (None where it has none: bitwise ops on inexact
    dtypes, max/min on complex ones)."""
    if kind in ("and", "or", "xor"):
        if not (dt.is_int(dtype) or dt.is_bool(dtype)):
            return None
        return np.array(True if dt.is_bool(dtype) else -1, dtype) if kind == "and" else np.zeros((), dtype)
    if kind in ("add", "mul"):
        return np.array(0 if kind == "add" else 1, dtype)
    if dt.is_complex(dtype):
        return None
    if dt.is_bool(dtype):
        return np.array(kind == "min", dtype)
    if dt.supports_inf(dtype):
        return np.array(-np.inf if kind == "max" else np.inf, dtype)
    info = dt.finfo(dtype) if dt.is_float(dtype) else dt.iinfo(dtype)
    return np.array(info.min if kind == "max" else info.max, dtype)


def _monoid(jaxpr: ClosedJaxpr, init):
    """The monoid reducer a one-operand computation is, given a concrete identity init; else None."""
    eqns = jaxpr.jaxpr.eqns
    if len(eqns) != 1 or eqns[0].params or list(eqns[0].outvars) != list(jaxpr.jaxpr.outvars):
        return None
    kind = eqns[0].primitive.name
    if kind not in _MONOIDS or list(eqns[0].invars) != list(jaxpr.jaxpr.invars):
        return None
    if isinstance(init, Tracer):
        return None
    ident = _identity(kind, jaxpr.in_avals[0].dtype)
    value = np.asarray(init)
    if ident is None or value.shape != () or value != ident:
        return None
    return getattr(lax, _MONOIDS[kind])


def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` (a pytree of equal-shaped arrays) along ``dimensions``, starting from
    ``init_values`` (the same pytree, of scalars), combining with ``computation(acc, x) -> acc``."""
    flat_ops, tree = tu.tree_flatten(operands)
    flat_inits, init_tree = tu.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"lax.reduce: operands {tree} and init_values {init_tree} must have the same "
                         "pytree structure")
    if not flat_ops:
        raise ValueError("lax.reduce: there must be at least one operand")
    avals = [ops.aval(x) for x in flat_ops]
    dims = ops.canonical_axes(dimensions, avals[0].ndim)
    inits = [lax.convert_element_type(i, a.dtype) if ops.aval(i).dtype != a.dtype else i
             for i, a in zip(flat_inits, avals)]
    scalars = [ShapedArray((), a.dtype, a.weak_type) for a in avals]

    def flat_computation(*xs):
        out = computation(tree.unflatten(xs[:len(avals)]), tree.unflatten(xs[len(avals):]))
        leaves, out_tree = tu.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"lax.reduce: the computation must return the operands' structure {tree}, "
                            f"got {out_tree}")
        return [lax.convert_element_type(v, a.dtype) if ops.aval(v).dtype != a.dtype else v
                for v, a in zip(leaves, avals)]
    jaxpr = trace_to_jaxpr(flat_computation, scalars + scalars, name="reduce_computation")
    if jaxpr.consts:
        raise TypeError("lax.reduce: the computation closes over array values; a reducer may use only "
                        "its arguments and Python or numpy scalars")
    if len(flat_ops) == 1:
        monoid = _monoid(jaxpr, flat_inits[0])
        if monoid is not None:
            return tree.unflatten([monoid(flat_ops[0], dims)])
    return tree.unflatten(reduce_p.bind(*flat_ops, *inits, jaxpr=jaxpr, dimensions=dims))


# -------------------------------------------------------------------- jvp

def _apply(jaxpr, *xs):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)


def _mapped(jaxpr, sizes):
    """``jaxpr`` (scalars -> scalars) mapped over leading axes of ``sizes``, as nested vmaps."""
    for size in reversed(sizes):
        jaxpr = vmap_jaxpr(jaxpr, 0, size)
    return jaxpr


def _reduce_tree(jaxpr, inits, dims, *xs):
    """The reduction as pairwise folds of the flattened reduced dimensions (JAX's jvp formulation)."""
    shape = aval_of(xs[0]).shape
    kept = tuple(d for d in range(len(shape)) if d not in dims)
    n = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    xs = [lax.reshape(lax.transpose(x, dims + kept), (n,) + tuple(shape[d] for d in kept)) for x in xs]
    while aval_of(xs[0]).shape[0] > 1:
        m = aval_of(xs[0]).shape[0]
        half = (m + 1) // 2
        first = [lax.slice_in_dim(x, 0, half) for x in xs]
        second = [lax.slice_in_dim(x, half, m) for x in xs]
        if m - half != half:     # pad the shorter half with the init values
            config = [(0, 1, 0)] + [(0, 0, 0)] * len(kept)
            second = [lax.pad(x, i, config) for x, i in zip(second, inits)]
        xs = _apply(_mapped(jaxpr, (half, *(shape[d] for d in kept))), *first, *second)
    if aval_of(xs[0]).shape[0] == 0:
        return [lax.full(tuple(shape[d] for d in kept), i) for i in inits]
    return [lax.squeeze(x, (0,)) for x in xs]


def _reduce_jvp(primals, tangents, *, jaxpr, dimensions):
    """The jvp pass over the reduction written as pairwise folds (the init values held fixed)."""
    n = len(primals) // 2
    tree = trace_to_jaxpr(lambda *args: _reduce_tree(jaxpr, args[n:], dimensions, *args[:n]),
                          [aval_of(x) for x in primals], name="reduce_jvp")
    tangents = [*tangents[:n], *(ad.Zero.from_primal_value(x) for x in primals[n:])]
    return jvp_eval(tree.jaxpr, tree.consts, list(primals), tangents)


ad.primitive_jvps[reduce_p] = _reduce_jvp


def _reduce_batch(args, dims, *, jaxpr, dimensions):
    n = len(args) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError("lax.reduce: batching over the init values is not supported (as in JAX)")
    size = next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)
    operands = [batching.matchaxis(x, d, 0, size) for x, d in zip(args[:n], dims[:n])]
    outs = reduce_p.bind(*operands, *args[n:], jaxpr=jaxpr, dimensions=shift(dimensions, 0))
    return outs, [0] * n


batching.primitive_batchers[reduce_p] = _reduce_batch


def _reduce_lowering(ctx, *args, jaxpr, dimensions):
    n = len(args) // 2
    out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    return mlir.reduce(args[:n], args[n:], dimensions, out_types, lambda *xs: ctx.lower_jaxpr(jaxpr, *xs))


mlir.register_lowering(reduce_p, _reduce_lowering)
