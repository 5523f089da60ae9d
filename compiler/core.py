"""``jaxprc.core``: the IR's core objects under JAX's names, for users defining primitives.

``Primitive`` is the IR's own class, so a primitive made here is a
first-class one: it registers itself by name (the text parser finds it),
binds into any trace, and every pass looks its rules up in the same tables
as for built-ins (``jaxprc.interpreters``). The rest of JAX's extension API is
``jaxprc.extend.core``; the names JAX 0.10.2 still serves here too (deprecated there) are
served here as well.
"""
from .ir.core import AbstractValue, ClosedJaxpr, Jaxpr, Literal, Primitive, ShapedArray, Var
from .ir.tracing import Tracer, ensure_compile_time_eval, eval_jaxpr, get_aval, pytype_aval_mappings
from .extend.core import (DropVar, JaxprTypeError, check_jaxpr, concrete_or_error,  # noqa: F401
                          get_opaque_trace_state, jaxprs_in_params, new_jaxpr_eqn, no_effects,
                          primal_dtype_to_tangent_dtype, valid_jaxtype)

__all__ = ["Primitive", "AbstractValue", "ShapedArray", "ClosedJaxpr", "Jaxpr", "Literal", "Var",
           "Tracer", "eval_jaxpr", "get_aval", "ensure_compile_time_eval", "pytype_aval_mappings",
           "DropVar", "JaxprTypeError", "check_jaxpr", "concrete_or_error", "get_opaque_trace_state",
           "jaxprs_in_params", "new_jaxpr_eqn", "no_effects", "primal_dtype_to_tangent_dtype",
           "valid_jaxtype"]
