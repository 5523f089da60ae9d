"""``debug_nans`` / ``debug_infs``: raise ``FloatingPointError`` at the first NaN (or infinity).

Eager ops check their own outputs, so the error names the primitive:
``invalid value (nan) encountered in log``. A jit call whose outputs hold
one runs its Python function again op by op (with ``disable_jit``), so the
eager checks find the primitive that made it, as JAX's de-optimized rerun does.
"""
from __future__ import annotations

import numpy as np

from .ir import dtypes as dt

config = dt.config


def first_bad(values) -> str | None:
    """'nan' or 'inf' when a checked kind of bad value is among the float ``values``, else None."""
    for v in values:
        dtype = getattr(v, "dtype", None)
        if dtype is None or not (dt.is_float(dtype) or dt.is_complex(dtype)) or dtype == dt.float0:
            continue
        x = np.asarray(v)
        if config.jax_debug_nans and np.isnan(x).any():
            return "nan"
        if config.jax_debug_infs and np.isinf(x).any():
            return "inf"
    return None


# Call primitives whose eager run is one executable, with the param holding their callee: a bad
# value in their outputs is traced to the primitive inside that made it, as JAX evaluates them
# op by op (control flow keeps its own name: "encountered in scan").
callees: dict = {}


def check_primitive(prim, args, params, outs) -> None:
    """Raise naming primitive ``prim`` (or the one inside its callee that made the value) if its
    outputs hold a checked bad value."""
    bad = first_bad(outs if isinstance(outs, (list, tuple)) else [outs])
    if bad is None:
        return
    if prim in callees:
        from .ir.tracing import eval_jaxpr
        callee = params[callees[prim]]
        eval_jaxpr(callee.jaxpr, callee.consts, *args)      # its eager ops check their outputs
    raise FloatingPointError(f"invalid value ({bad}) encountered in {prim.name}")


def check_jit_outputs(fun, args, kwargs, outs):
    """After a jit call: if an output holds a checked bad value, rerun ``fun`` op by op to name
    the primitive (its eager checks raise); if the rerun is clean, say so."""
    from .ir.tree_util import tree_leaves
    bad = first_bad(tree_leaves(outs))
    if bad is None:
        return
    with config.override("jax_disable_jit", True):
        fun(*args, **kwargs)
    raise FloatingPointError(f"invalid value ({bad}) encountered in the output of a jit function, "
                             "but its op-by-op rerun produced none (an XLA fusion or reordering "
                             "created it)")
