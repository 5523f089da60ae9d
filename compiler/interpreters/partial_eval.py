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

__all__ = ["partial_eval_jaxpr_custom_rules", "dce_rules"]

partial_eval_jaxpr_custom_rules = pe_rules
