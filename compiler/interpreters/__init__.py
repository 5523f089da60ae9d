"""``jaxprc.interpreters``: JAX's extension points for user primitives.

``mlir`` (lowering rules), ``ad`` (jvp and transpose rules), ``partial_eval``
(partial-evaluation and DCE rules) and ``batching``
(vmap rules) and ``xla`` (host-value canonicalizers) are views of the rule tables the compiler and the passes read,
so a rule registered here is the one they use.
"""
from . import ad, batching, mlir, partial_eval, xla  # noqa: F401
