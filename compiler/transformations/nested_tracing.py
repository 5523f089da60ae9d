"""The tracing the transformations' front ends share: a function traced on the values it is
called with, which may be tracers of an enclosing trace (``grad(grad(f))``, a custom rule inside
``jit``). Python that asks for such a value (``if x > 0``) gets it from the enclosing trace when
that one knows it."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir.core import ClosedJaxpr, ShapedArray
from ..ir.leak_check import check_leaks
from ..ir.tracing import JIT_STYLE, ConcretizationTypeError, JaxprBuilder, Tracer, TracerStyle, close_over_consts, get_aval
from ..ir.tree_util import tree_flatten, tree_unflatten

__all__ = ["NestedBuilder", "flatten_fun", "trace_on_values", "trace_hoisting_consts"]


class NestedBuilder(JaxprBuilder):
    """A builder whose inputs may be tracers of an enclosing trace: when Python asks for a
    value, the enclosing trace is asked for theirs (``grad(grad(f))`` with concrete inputs)."""

    def __init__(self, name, style=JIT_STYLE):
        super().__init__(name, style)
        self.outer_args: dict = {}
        self.enclosing = None      # the builder of the first input that is an enclosing trace's tracer

    def concretize(self, tracer, what, error):
        for v, outer in list(self.outer_args.items()):
            try:
                self.known[v] = outer._builder.concretize(outer, what, error)
            except ConcretizationTypeError:
                continue
            del self.outer_args[v]
        return super().concretize(tracer, what, error)


def trace_on_values(fun: Callable, values: Sequence[Any], name: str,
                    extra_avals: Sequence[ShapedArray] = (), style: TracerStyle = JIT_STYLE) -> ClosedJaxpr:
    """Trace ``fun`` (flat inputs -> flat outputs) on ``values`` (concrete, known to Python; or
    tracers of an enclosing trace, asked for their values when Python needs them), followed by
    abstract inputs of ``extra_avals``. Checks that no tracer of this trace leaks out. ``style``:
    how its tracers print."""
    builder = NestedBuilder(name, style)
    with builder:
        inputs = []
        for x in values:
            outer = isinstance(x, Tracer)
            t = builder.new_arg(get_aval(x), None if outer else x)
            if outer:
                builder.outer_args[t._var] = x
                builder.enclosing = builder.enclosing or x._builder
            inputs.append(t)
        inputs += [builder.new_arg(a) for a in extra_avals]
        cj = builder.build(fun(*inputs))
    inputs = t = None                # this frame's own references
    check_leaks(builder)
    return cj


def trace_hoisting_consts(fun: Callable, values: Sequence[Any], name: str, style: TracerStyle = JIT_STYLE):
    """``trace_on_values``, with the values the function closes over hoisted into leading inputs of
    the jaxpr: (that jaxpr, those values)."""
    return close_over_consts(trace_on_values(fun, values, name, style=style))


def flatten_fun(fun, in_tree, has_aux=False):
    """A flat-in, flat-out version of ``fun``; ``store`` receives the output trees."""
    store = {}

    def flat(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair (output, aux), "
                                f"got {type(out).__name__}")
            out, aux = out
            aux_leaves, store["aux_tree"] = tree_flatten(aux)
        else:
            aux_leaves = []
        out_leaves, store["out_tree"] = tree_flatten(out)
        store["n_out"] = len(out_leaves)
        return list(out_leaves) + list(aux_leaves)
    return flat, store
