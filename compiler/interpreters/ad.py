"""Differentiation rules for user primitives, as in ``jax.interpreters.ad``.

``primitive_jvps`` and ``primitive_transposes`` ARE the jvp and transpose
passes' rule tables, with JAX's rule signatures:

- ``primitive_jvps[p] = rule(primals, tangents, **params) -> (primal_out, tangent_out)``;
  a tangent may be ``Zero(aval)``, a symbolic zero.
- ``primitive_transposes[p] = rule(ct, *args, **params) -> cotangent per arg``; the
  linear args are ``UndefinedPrimal(aval)``, the others values; ``None`` for the
  cotangent of a non-linear arg.
"""
from __future__ import annotations

import functools

from jaxprc.passes.jvp import Zero, add_tangents, instantiate_zeros, jvp_rules
from jaxprc.passes.transpose import UndefinedPrimal, is_undefined_primal, transpose_rules

__all__ = ["primitive_jvps", "primitive_transposes", "defjvp", "defjvp_zero", "defjvp_linear",
           "defjvp_multilinear", "defjvp_bilinear", "Zero", "UndefinedPrimal", "is_undefined_primal",
           "instantiate_zeros", "add_tangents"]

primitive_jvps = jvp_rules
primitive_transposes = transpose_rules


def defjvp(primitive, *jvprules):
    """One rule per operand: ``jvprule(tangent, *primals, **params)`` -> that operand's
    contribution to the output tangent (``None`` for an operand that has none)."""
    if primitive.multiple_results:
        raise TypeError(f"defjvp: '{primitive.name}' has multiple results; register a rule "
                        "taking all tangents at once in primitive_jvps instead")
    primitive_jvps[primitive] = functools.partial(_standard_jvp, jvprules, primitive)


def _standard_jvp(jvprules, primitive, primals, tangents, **params):
    out = primitive.bind(*primals, **params)
    terms = [rule(t, *primals, **params) for rule, t in zip(jvprules, tangents)
             if rule is not None and not isinstance(t, Zero)]
    return out, functools.reduce(add_tangents, terms, Zero.from_primal_value(out))


# Rule families shared by many primitives: each helper fills ``primitive_jvps``.

def defjvp_zero(prim):
    """The output tangent is zero (comparisons, rounding, integer ops, indices)."""
    def rule(primals, tangents, **params):
        outs = prim.bind(*primals, **params)
        if prim.multiple_results:
            return outs, [Zero.from_primal_value(o) for o in outs]
        return outs, Zero.from_primal_value(outs)
    primitive_jvps[prim] = rule


def defjvp_linear(prim):
    """Linear in its first operand, the others (indices, fill values) held fixed: the tangent is
    the primitive itself applied to the first operand's tangent."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, prim.bind(instantiate_zeros(tangents[0]), *primals[1:], **params)
    primitive_jvps[prim] = rule


def defjvp_multilinear(prim):
    """Linear in all operands jointly (pad, concatenate): the primitive applied to the tangents."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, prim.bind(*map(instantiate_zeros, tangents), **params)
    primitive_jvps[prim] = rule


def defjvp_bilinear(prim):
    """Products: d(x*y) = dx*y + x*dy, each term the primitive with one tangent operand."""
    def rule(primals, tangents, **params):
        (x, y), (tx, ty) = primals, tangents
        out = prim.bind(x, y, **params)
        zero = Zero.from_primal_value(out)
        left = zero if isinstance(tx, Zero) else prim.bind(tx, y, **params)
        right = zero if isinstance(ty, Zero) else prim.bind(x, ty, **params)
        return out, add_tangents(left, right)
    primitive_jvps[prim] = rule
