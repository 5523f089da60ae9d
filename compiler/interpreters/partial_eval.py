"""Partial-evaluation and dead-code rules, as in ``jax.interpreters.partial_eval``.

Only primitives that hold sub-jaxprs (control flow, calls, custom rules,
checkpoint) need these; every other primitive is handled generically.

- ``partial_eval_jaxpr_custom_rules[p] = rule(eqn, unknowns_in) -> (known_eqns,
  unknown_eqns, unknowns_out)``: split one equation whose inputs are partly unknown into
  equations of the known (primal) program and of the unknown (tangent) one.
- ``dce_rules[p] = rule(used_outputs, eqn) -> (used_inputs, new_eqn | None)``: prune an
  equation's unused outputs and inputs.

These ARE the tables the ``partial_eval``/``linearize`` and ``dce`` passes read.
"""
from jaxprc.passes.dce import dce_rules
from jaxprc.passes.partial_eval import pe_rules

__all__ = ["partial_eval_jaxpr_custom_rules", "dce_rules", "PartialVal"]

partial_eval_jaxpr_custom_rules = pe_rules


class PartialVal(tuple):
    """A value of a partially known input, as JAX's: ``known(value)`` or ``unknown(aval)``
    (a pair ``(aval or None, value or None)``)."""

    def __new__(cls, xs):
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, const) -> "PartialVal":
        return cls((None, const))

    @classmethod
    def unknown(cls, aval) -> "PartialVal":
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self):
        return self[1] if self[0] is None else None

    def get_aval(self):
        from jaxprc.ir.tracing import get_aval
        return get_aval(self[1]) if self[0] is None else self[0]
