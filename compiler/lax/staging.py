"""Staging helpers: ``stage`` (lift a value into the trace), ``platform_dependent`` (the
branch for the platform the program runs on) and ``composite`` (a named operation defined
by its decomposition, kept as one ``stablehlo.composite`` op).

jaxprc lowers each program for the one platform of its backend, so
``platform_dependent`` picks its branch when tracing, as JAX does whenever the
lowering platform is known. ``composite`` has no derivative or batching rule,
as in JAX (wrap it in ``custom_jvp`` to differentiate it).
"""
from __future__ import annotations

import functools

from jaxprc.interpreters import mlir
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Bool, ClosedJaxprParam, Int, OneOf, Scalar, Str, Tuple
from jaxprc.ir.tracing import Tracer, close_over_consts, trace_to_jaxpr
from jaxprc.ir.tree_util import tree_flatten
from jaxprc.engine.lowering import dimension_arguments, function_symbol

from .support import operands as ops

__all__ = ["stage", "platform_dependent", "composite", "composite_p"]


def stage(x, /):
    """``x`` as a value of the current trace (an Array outside any): the identity."""
    from jaxprc import lax
    return lax.copy_p.bind(x if not ops.is_py_scalar(x) else ops.match_python_scalars("stage", (x,))[0])


_PLATFORMS = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "rocm": "rocm"}


def platform_dependent(*args, default=None, **per_platform):
    """``per_platform[p](*args)`` for the platform ``p`` this process computes on ('cpu', 'cuda',
    'rocm', 'tpu'), else ``default(*args)``."""
    for name, branch in per_platform.items():
        if not callable(branch):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
    if default is not None and not callable(default):
        raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
    from jaxprc.runtime import default_backend
    platform = _PLATFORMS.get(default_backend(), default_backend())
    branch = per_platform.get(platform, default)
    if branch is None:
        raise NotImplementedError(f"lax.platform_dependent: no branch for platform '{platform}' and no default "
                                  f"(branches: {sorted(per_platform)})")
    return branch(*args)


# ----------------------------------------------------------------- composite

composite_p = Primitive("composite")
composite_p.multiple_results = True
composite_p.def_params(jaxpr=ClosedJaxprParam(), name=Str(), version=Int(min=0),
                       attributes=Tuple(Tuple(OneOf(Str(), Bool(), Int(), Scalar()), length=2)))
composite_p.def_abstract_eval(lambda *avals, jaxpr, name, version, attributes: list(jaxpr.out_avals))

_ATTR_TYPES = (bool, int, float, str)


def composite(decomposition, name: str, version: int = 0):
    """A function computing ``decomposition(*args, **attributes)``, staged as one composite op
    named ``name`` (``attributes``: static Python scalars or strings)."""
    @functools.wraps(decomposition)
    def composite_fn(*args, **attributes):
        for key, value in attributes.items():
            if type(value) not in _ATTR_TYPES:
                raise TypeError(f"lax.composite '{name}': attribute {key}={value!r} must be a Python bool, "
                                "int, float or str (a static attribute)")
        leaves, tree = tree_flatten(args)
        box = {}

        def flat(*xs):
            out, box["tree"] = tree_flatten(decomposition(*tree.unflatten(xs), **attributes))
            return out
        cj = trace_to_jaxpr(flat, [ops.aval(x) for x in leaves], name=name)
        jaxpr, consts = close_over_consts(cj)
        if consts and any(isinstance(c, Tracer) for c in consts):
            raise ValueError(f"lax.composite '{name}': the decomposition closes over a traced value; pass "
                             "it as an argument")
        if consts:
            raise ValueError(f"lax.composite '{name}': the decomposition closes over arrays; pass them as "
                             "arguments")
        outs = composite_p.bind(*leaves, jaxpr=jaxpr, name=name, version=int(version),
                                attributes=tuple(sorted(attributes.items())))
        return box["tree"].unflatten(outs)
    return composite_fn


def _attr(value):
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get(ir.F64Type.get(), value)
    return ir.StringAttr.get(value)


def _composite_lowering(ctx, *args, jaxpr, name, version, attributes):
    # In a polymorphic module the decomposition takes the dimension variables first, as every
    # private function does, so the composite passes them too (JAX's composite omits them and
    # fails verification).
    dim_vars, dim_values = dimension_arguments()
    symbol = function_symbol(ctx.module_context, jaxpr, name, dim_vars)
    op = hlo.CompositeOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], [*dim_values, *args],
                         name=ir.StringAttr.get(name),
                         composite_attributes=ir.DictAttr.get({k: _attr(v) for k, v in attributes}),
                         decomposition=ir.FlatSymbolRefAttr.get(symbol),
                         version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), version))
    return list(op.results)


mlir.register_lowering(composite_p, _composite_lowering)
