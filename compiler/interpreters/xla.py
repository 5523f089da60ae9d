"""``jaxprc.interpreters.xla``: JAX's table of host-value canonicalizers.

``canonicalize_dtype_handlers[T] = handler``: a value of type ``T`` passed to jaxprc is typed as
``handler(value)`` is (its shape and canonical dtype); it is then converted with
``numpy.asarray`` to that dtype, as every host value is. jaxprc canonicalizes the types it knows
(numpy arrays and scalars, Python scalars) by their abstract values, so their entries only tell a
library what to copy when it registers its own array-like type (TFP registers its numpy
``Variable``, an ndarray subclass, with numpy's handler).
"""
import numpy as np

from jaxprc.ir.tracing import get_aval, pytype_aval_mappings

__all__ = ["canonicalize_dtype_handlers"]


def _as_host_array(x):
    """The value as jaxprc converts it (its dtype is canonicalized by its abstract value)."""
    return x


class _HandlerTable(dict):
    """Registering a handler makes its type a value type: typed as what the handler gives."""

    def __setitem__(self, cls, handler):
        super().__setitem__(cls, handler)
        if cls not in pytype_aval_mappings:
            pytype_aval_mappings[cls] = lambda x: get_aval(handler(x))


canonicalize_dtype_handlers = _HandlerTable({t: _as_host_array for t in (np.ndarray, bool, int, float, complex)})
