"""Specialisation of a shape-polymorphic program to concrete sizes.

``specialize(cj, env)`` gives the program at dimension variables ``env``
(name -> int): every symbolic size in the types of its variables and in its
params (``shape=(b, 4)``, ``dim_as_value[dim=b]``, nested jaxprs, custom
rules) becomes its value. ``specialize_for_args`` first solves the dimension
variables from the arguments' shapes and checks the program's constraints, so
sizes that break a constraint or disagree with each other fail in one
paragraph before anything runs. The specialised program is static: every
static pass and the lowering apply to it as they are.
"""
from __future__ import annotations

from typing import Sequence

from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Thunk, Var
from jaxprc.ir.shape_poly import (DimExpr, check_constraints, evaluate, free_vars, is_constant_shape,
                                 shape_scope, solve_dim_vars)
from jaxprc.passes.registry import register_pass


def is_polymorphic(cj: ClosedJaxpr) -> bool:
    """Whether the program's inputs have symbolic dimensions (where its dimension variables enter)."""
    return not all(is_constant_shape(a.shape) for a in (*cj.in_avals, *cj.out_avals))


def specialize_for_args(cj: ClosedJaxpr, arg_shapes: Sequence[tuple], what: str = "the program") -> ClosedJaxpr:
    """``cj`` at the sizes the arguments' shapes give its dimension variables."""
    if len(arg_shapes) != len(cj.in_avals):
        raise TypeError(f"{what} takes {len(cj.in_avals)} arguments, got {len(arg_shapes)}")
    for i, (aval, shape) in enumerate(zip(cj.in_avals, arg_shapes)):
        if len(aval.shape) != len(shape):
            raise ValueError(f"Input shapes do not match the symbolic shapes of {what}: argument {i} "
                             f"has shape {tuple(shape)}, but its type is {aval.str_short()}.")
    scope = next((s for s in (shape_scope(a.shape) for a in cj.in_avals) if s is not None), None)
    env = solve_dim_vars([(a.shape, tuple(s)) for a, s in zip(cj.in_avals, arg_shapes)], scope)
    return specialize(cj, env)


def specialize(cj: ClosedJaxpr, env: dict) -> ClosedJaxpr:
    return ClosedJaxpr(_Specializer(env).jaxpr(cj.jaxpr), cj.consts)


class _Specializer:
    def __init__(self, env: dict):
        self.env = env
        self.done: dict[int, object] = {}    # id -> specialised jaxpr (shared sub-jaxprs stay shared)

    def aval(self, aval: ShapedArray) -> ShapedArray:
        if is_constant_shape(aval.shape):
            return aval
        return aval.update(shape=tuple(evaluate(d, self.env) for d in aval.shape))

    def jaxpr(self, j: Jaxpr) -> Jaxpr:
        new: dict[Var, Var] = {}

        def bind(v: Var) -> Var:
            w = new[v] = Var(self.aval(v.aval))
            return w

        def ref(a):
            return a if isinstance(a, Literal) else new.get(a, a)

        constvars = [bind(v) for v in j.constvars]
        invars = [bind(v) for v in j.invars]
        eqns = []
        for e in j.eqns:
            invars_e = [ref(a) for a in e.invars]
            params = {k: self.param(v) for k, v in e.params.items()}
            eqns.append(e.replace(invars=invars_e, outvars=[bind(v) for v in e.outvars], params=params))
        return Jaxpr(constvars, invars, [ref(a) for a in j.outvars], eqns)

    def param(self, value):
        if type(value) is DimExpr:
            return evaluate(value, self.env)
        if isinstance(value, ShapedArray):
            return self.aval(value)
        if isinstance(value, (ClosedJaxpr, Jaxpr, Thunk)):
            key = id(value)
            if key not in self.done:
                if isinstance(value, ClosedJaxpr):
                    self.done[key] = ClosedJaxpr(self.jaxpr(value.jaxpr), value.consts)
                elif isinstance(value, Jaxpr):
                    self.done[key] = self.jaxpr(value)
                else:
                    self.done[key] = Thunk(lambda t=value: self.param(t()), value.name)
            return self.done[key]
        if isinstance(value, tuple):
            items = [self.param(x) for x in value]
            return type(value)(*items) if hasattr(type(value), "_fields") else tuple(items)
        return value


def specialize_pass(cj: ClosedJaxpr, **sizes) -> ClosedJaxpr:
    """The program at the given dimension variables (``specialize:b=8``), which must satisfy
    the program's constraints."""
    names = set().union(*(free_vars(a.shape) for a in cj.in_avals))
    if names - sizes.keys() or sizes.keys() - names:
        raise ValueError(f"specialize: give a size for each dimension variable of the program "
                         f"({', '.join(sorted(names)) or 'none'}), got {', '.join(sorted(sizes)) or 'none'}")
    if any(type(v) is not int for v in sizes.values()):
        raise ValueError(f"specialize: sizes are integers, got {sizes}")
    scope = next((s for s in (shape_scope(a.shape) for a in cj.in_avals) if s is not None), None)
    check_constraints(scope, sizes)
    return specialize(cj, sizes)


register_pass("specialize", specialize_pass)
