"""``jaxprc.Array``: the type of every array a program handles, as JAX's ``jax.Array``.

Inside ``jit``/``grad``/``vmap`` a function sees traced values, outside it concrete arrays on the
device, and typed PRNG keys wrap either: all are ``Array``s to ``isinstance``, as in JAX, so a
library that separates arrays from static values with ``isinstance(x, jax.Array)`` treats traced
values as arrays. The concrete class is ``jaxprc.runtime.Array`` (what jaxprc's own code tests for).
"""
from .ir.tracing import Tracer
from .random import PRNGKeyArray
from .runtime import Array as _ConcreteArray

_ARRAY_CLASSES = (_ConcreteArray, Tracer, PRNGKeyArray)


class _ArrayType(type):
    def __instancecheck__(cls, x):
        return isinstance(x, _ARRAY_CLASSES)

    def __subclasscheck__(cls, sub):
        return sub is cls or issubclass(sub, _ARRAY_CLASSES)


class Array(metaclass=_ArrayType):
    """A concrete, traced or key array (abstract: arrays are made by jaxprc.numpy and friends)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("jaxprc.Array cannot be instantiated; make arrays with jaxprc.numpy.asarray")
