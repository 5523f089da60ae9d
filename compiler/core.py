"""``jaxprc.core``: the IR's core objects under JAX's names, for users defining primitives.

``Primitive`` is the IR's own class, so a primitive made here is a
first-class one: it registers itself by name (the text parser finds it),
binds into any trace, and every pass looks its rules up in the same tables
as for built-ins (``jaxprc.interpreters``).
"""
from .ir.core import ClosedJaxpr, Jaxpr, Literal, Primitive, ShapedArray, Var
from .ir.tracing import Tracer, eval_jaxpr, get_aval

__all__ = ["Primitive", "ShapedArray", "ClosedJaxpr", "Jaxpr", "Literal", "Var", "Tracer",
           "eval_jaxpr", "get_aval"]
