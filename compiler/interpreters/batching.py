"""Batching (vmap) rules for user primitives, as in ``jax.interpreters.batching``.

``primitive_batchers`` IS the vmap pass's rule table:
``primitive_batchers[p] = rule(batched_args, batch_dims, **params) -> (out, out_dim)``
(lists for multiple results), where a dim is an axis or ``not_mapped``.
"""
from jaxprc.passes.vmap import batch_rules, bdim_at_front, elementwise_rule, matchaxis, moveaxis, not_mapped

__all__ = ["primitive_batchers", "axis_primitive_batchers", "not_mapped", "defbroadcasting", "moveaxis", "matchaxis",
           "bdim_at_front"]

primitive_batchers = batch_rules


def defbroadcasting(prim, scalar_ok=frozenset()):
    """Batch an elementwise primitive: operands moved to one batch axis, the primitive applied.

    Unbatched scalar operands at the positions in ``scalar_ok`` stay scalars (the primitive
    accepts a scalar there, as ``clamp``'s bounds)."""
    primitive_batchers[prim] = elementwise_rule(prim, frozenset(scalar_ok))


def _axis_size(args, dims) -> int:
    return next(x.shape[d] for x, d in zip(args, dims) if d is not not_mapped)


class _AxisRuleTable(dict):
    """``axis_primitive_batchers[p] = rule(axis_size, axis_name, trace_type, batched_args,
    batch_dims, **params)``: JAX's form of a rule that needs the mapped axis. Setting one
    registers it in ``primitive_batchers``, which the vmap pass reads; the axis name is None
    (vmap's pass batches by position) and so is the trace type."""

    def __setitem__(self, prim, rule):
        super().__setitem__(prim, rule)
        primitive_batchers[prim] = lambda args, dims, **params: rule(
            _axis_size(args, dims), None, None, args, dims, **params)


axis_primitive_batchers = _AxisRuleTable()
