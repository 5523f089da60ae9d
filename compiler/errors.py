"""JAX's ``jax.errors``: the exceptions user code catches by name (``except jaxprc.errors.X``).

``JaxRuntimeError`` is jaxlib's own type; jaxprc's XLA errors (``XlaCompileError``,
``XlaRuntimeError``) derive from it. ``KeyReuseError`` and ``InconclusiveDimensionOperation``
exist to be caught as in JAX, but jaxprc never raises them: it has no key-reuse checking
(``jax_debug_key_reuse``) and no symbolic (shape-polymorphic) dimensions.
"""
from .ir.core import JaxprTypeError
from .ir.tracing import (ConcretizationTypeError, JAXIndexError, JAXTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError, UnexpectedTracerError)
from .numpy.indexing import NonConcreteBooleanIndexError
from .runtime import JaxRuntimeError

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError", "JAXTypeError",
           "JaxRuntimeError", "JaxprTypeError", "KeyReuseError", "NonConcreteBooleanIndexError",
           "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
           "UnexpectedTracerError"]


class KeyReuseError(JAXTypeError):
    """JAX's error for a PRNG key used twice under ``jax_debug_key_reuse`` (not raised here)."""


class InconclusiveDimensionOperation(Exception):
    """JAX's error for a comparison of symbolic dimensions with no single answer (not raised here)."""
