"""JAX's ``jax.errors``: the exceptions user code catches by name (``except jaxprc.errors.X``)."""
from .ir.tracing import (ConcretizationTypeError, TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from .numpy.indexing import NonConcreteBooleanIndexError

__all__ = ["ConcretizationTypeError", "NonConcreteBooleanIndexError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]
