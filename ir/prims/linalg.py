"""dot_general: batched tensor contraction, the one linear-algebra primitive.

Result dimensions are, in order: the batch dimensions, the free (neither
batch nor contracting) dimensions of lhs, then those of rhs.
"""
from __future__ import annotations

import numpy as np

from ..core import Primitive, ShapedArray
from .elementwise import ANY
from .structural import type_error

dot_general_p = Primitive("dot_general")


@dot_general_p.def_abstract_eval
def _dot_general_rule(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    avals = [lhs, rhs]
    params = dict(dimension_numbers=dimension_numbers)
    if lhs.dtype != rhs.dtype or not ANY(lhs.dtype):
        raise type_error("dot_general", avals, "operands of equal dtypes (promotion is explicit)", **params)
    for side, aval, contract, batch in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        dims = tuple(contract) + tuple(batch)
        if len(set(dims)) != len(dims) or any(not 0 <= d < aval.ndim for d in dims):
            raise type_error("dot_general", avals, f"distinct {side} contracting and batch dimensions "
                             f"in [0, {aval.ndim})", **params)
    if len(lc) != len(rc) or any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lc, rc)):
        raise type_error("dot_general", avals, "contracting dimensions of equal number and sizes", **params)
    if len(lb) != len(rb) or any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lb, rb)):
        raise type_error("dot_general", avals, "batch dimensions of equal number and sizes", **params)
    free = lambda aval, used: [s for i, s in enumerate(aval.shape) if i not in used]
    shape = [lhs.shape[d] for d in lb] + free(lhs, set(lc) | set(lb)) + free(rhs, set(rc) | set(rb))
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)   # JAX's weak-type rule
