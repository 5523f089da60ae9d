"""``jaxprc.extend``: JAX's ``jax.extend``, the API for libraries that extend the compiler.

Every name here is the compiler's own object under JAX's name (``core.Primitive`` is the IR's
``Primitive``, ``core.Jaxpr`` the IR's ``Jaxpr``): there is no second mechanism behind it.
"""
from . import backend, core, linear_util, mlir, random, source_info_util  # noqa: F401

__all__ = ["backend", "core", "linear_util", "mlir", "random", "source_info_util"]
