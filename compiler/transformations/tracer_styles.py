"""How a tracer prints under grad, jvp and vmap: as JAX's tracer of that transformation.

jaxprc traces once and transforms the traced program, so its tracers are all of one class; the
front end that starts a trace gives it the style of the transformation it traces for. What JAX's
tracer holds (a primal value, a tangent, a batched value) is shown from what the trace knows: the
arguments' values and tangents, the values Python could ask for (``JaxprBuilder.concretize``), the
enclosing trace. Not computed while tracing, so shown by their types: an intermediate value's
tangent under ``jvp``; an intermediate value under ``vmap`` is shown batched along its first axis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from jaxprc.ir.core import ShapedArray
from jaxprc.ir.tracing import ConcretizationTypeError, Tracer, TracerStyle
from jaxprc.passes.vmap import batched_aval

__all__ = ["GradStyle", "JVPStyle", "VmapStyle"]


def _value_text(x) -> str:
    return repr(x) if isinstance(x, Tracer) else str(np.asarray(x))


def _primal_text(tracer: Tracer) -> str:
    """The value under ``tracer`` as JAX's primal prints: the argument's value or the enclosing
    trace's tracer; for an intermediate value, what Python could know of it, wrapped in the
    enclosing trace's tracer where there is one."""
    builder, var = tracer._builder, tracer._var
    if var in builder.known:
        return _value_text(builder.known[var])
    outer = getattr(builder, "outer_args", {}).get(var)
    if outer is not None:
        return repr(outer)
    value = None
    if builder.live:
        try:
            value = _value_text(builder.concretize(tracer, "repr()", ConcretizationTypeError))
        except Exception:          # noqa: BLE001 -- a repr never fails: abstract values print their type
            pass
    enclosing = getattr(builder, "enclosing", None)
    if enclosing is not None:
        return enclosing.style.value_repr(tracer.aval, value)
    return value if value is not None else f"JitTracer({tracer.aval})"


def _tangent_type_text(aval: ShapedArray) -> str:
    return aval.to_tangent_aval().str_short(short_dtypes=True)


class GradStyle(TracerStyle):
    """grad, vjp, linearize: ``GradTracer(primal=[1. 2.], typeof(tangent)=f32[2])``."""

    type_name = "LinearizeTracer"

    def repr(self, tracer):
        return self.value_repr(tracer.aval, _primal_text(tracer))

    def value_repr(self, aval, primal):
        return f"GradTracer(primal={primal or f'JitTracer({aval})'}, typeof(tangent)={_tangent_type_text(aval)})"


class JVPStyle(TracerStyle):
    """jvp: ``JVPTracer(primal=1.0, tangent=1.0)``; ``tangents``: the arguments' tangents, in
    argument order."""

    type_name = "JVPTracer"

    def __init__(self, tangents: Sequence):
        self.tangents = list(tangents)

    def repr(self, tracer):
        invars = tracer._builder.invars
        if tracer._var in invars:
            tangent = _value_text(self.tangents[invars.index(tracer._var)])
            return f"JVPTracer(primal={_primal_text(tracer)}, tangent={tangent})"
        return self.value_repr(tracer.aval, _primal_text(tracer))

    def value_repr(self, aval, primal):
        return f"JVPTracer(primal={primal or f'JitTracer({aval})'}, tangent={_tangent_type_text(aval)})"


class VmapStyle(TracerStyle):
    """vmap: ``VmapTracer(aval=float32[3], batched=float32[2,3])``; ``batched``: the arguments'
    batched types, in argument order."""

    type_name = "BatchTracer"

    def __init__(self, batched: Sequence[ShapedArray], size: int):
        self.batched, self.size = list(batched), size

    def repr(self, tracer):
        invars = tracer._builder.invars
        if tracer._var in invars:
            return f"VmapTracer(aval={tracer.aval}, batched={self.batched[invars.index(tracer._var)]})"
        return self.value_repr(tracer.aval, None)

    def value_repr(self, aval, primal):
        return f"VmapTracer(aval={aval}, batched={batched_aval(aval, 0, self.size)})"
