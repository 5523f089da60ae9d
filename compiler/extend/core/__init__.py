"""``jaxprc.extend.core``: the IR's objects under the names of JAX's ``jax.extend.core``.

A jaxpr, its equations, variables and literals are the IR's own classes (``JaxprEqn`` is
``ir.core.Eqn``); a ``Primitive`` made here is registered like a built-in one.
"""
from __future__ import annotations

import numpy as np

from jaxprc.ir import dtypes as _dtypes
from jaxprc.ir.core import (ClosedJaxpr, Eqn as JaxprEqn, Jaxpr, JaxprTypeError, JaxprcError,  # noqa: F401
                            Literal, Primitive, ShapedArray, SourceInfo, Var)
from jaxprc.ir.effects import LibraryEffect as Effect, no_effects  # noqa: F401
from jaxprc.ir.tracing import (ConcretizationTypeError, Tracer, current_builder, eval_jaxpr,  # noqa: F401
                               get_aval, trace_state)
from jaxprc.ir.verify import verify
from jaxprc.runtime import Token  # noqa: F401

from ...api import jaxpr_as_fun  # noqa: F401
from ...api_util import DebugInfo  # noqa: F401
from ...engine.dispatch import Array
from . import primitives  # noqa: F401

__all__ = ["ClosedJaxpr", "DebugInfo", "Jaxpr", "JaxprEqn", "Var", "DropVar", "Literal", "Primitive", "Token",
           "JaxprTypeError", "InconclusiveDimensionOperation", "Effect", "no_effects",
           "array_types", "check_jaxpr", "concrete_or_error", "eval_jaxpr", "gensym",
           "get_opaque_trace_state", "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval",
           "new_jaxpr_eqn", "primal_dtype_to_tangent_dtype", "subjaxprs", "unmapped_aval",
           "valid_jaxtype", "primitives"]


class DropVar(Var):
    """An equation output that nothing reads. It is a ``Var`` to every pass and the printer."""

    __slots__ = ()


class InconclusiveDimensionOperation(JaxprcError):
    """A shape computation that symbolic dimensions cannot decide (jaxprc's shapes are concrete,
    so this is never raised by jaxprc itself; libraries catch it)."""


# the types of values that are arrays to jaxprc
array_types = frozenset({np.ndarray, Array, *_dtypes.PYTHON_SCALAR_TYPES,
                         *(np.dtype(d).type for d in _dtypes.ALL_DTYPES)})


def valid_jaxtype(x) -> bool:
    """Whether ``x`` can be an argument of a traced function (an array or a scalar)."""
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """The type of one slice of ``aval`` along its mapped ``axis`` (of length ``size``)."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped_aval: axis {axis} of {aval.str_short()} has length "
                         f"{aval.shape[axis]}, not {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray, explicit_mesh_axis=None) -> ShapedArray:
    """The type of ``size`` stacked values of type ``aval``, stacked along ``axis``."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def primal_dtype_to_tangent_dtype(dtype) -> np.dtype:
    """float0 for integers and booleans (they have no tangent space), else the dtype itself."""
    return ShapedArray((), dtype).to_tangent_aval().dtype


class OpaqueTraceState:
    """The trace context at one point of a program: equal to another iff both were taken inside
    the same live trace (or both outside any). Libraries use it to notice a value crossing
    traces."""

    __slots__ = ("_builder",)

    def __init__(self, builder):
        self._builder = builder

    def __eq__(self, other):
        return isinstance(other, OpaqueTraceState) and self._builder is other._builder

    def __hash__(self):
        return id(self._builder)


def get_opaque_trace_state(convention=None) -> OpaqueTraceState:
    return OpaqueTraceState(None if trace_state.compile_time_eval else current_builder())


def concrete_or_error(force, val, context=""):
    """``val`` as a concrete value (``force`` applied to it, if given); a traced value whose value
    is not known raises ConcretizationTypeError naming ``context``."""
    force = force or (lambda x: x)
    if isinstance(val, Tracer):
        return force(val._concrete(context or "a concrete value"))
    return force(val)


def gensym(suffix: str = ""):
    """A maker of fresh variables: ``gensym()(aval)``."""
    return Var


def new_jaxpr_eqn(invars, outvars, primitive, params, effects=None, source_info=None) -> JaxprEqn:
    """An equation; its effects follow from its primitive and params."""
    return JaxprEqn(primitive, invars, outvars, params, source_info)


def jaxprs_in_params(params) -> list[Jaxpr]:
    """The jaxprs held in an equation's params (in ClosedJaxprs and tuples of them too)."""
    found = []
    for value in params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, ClosedJaxpr):
                found.append(v.jaxpr)
            elif isinstance(v, Jaxpr):
                found.append(v)
    return found


def subjaxprs(jaxpr: Jaxpr):
    """The jaxprs held directly by ``jaxpr``'s equations."""
    for eqn in jaxpr.eqns:
        yield from jaxprs_in_params(eqn.params)


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Type-check a jaxpr (raises JaxprTypeError)."""
    verify(jaxpr)
