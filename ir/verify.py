"""The verifier: type-checks a jaxpr against the SSA rules and its primitives' typing rules.

Checks: every variable is bound once (constvars, invars, equation outputs)
and before use; outvars are bound; each equation's declared output types
equal what its primitive's typing rule computes from the operand types and
params, which first fit the primitive's param schema (``jaxprc.ir.params``); literals are scalars whose value their dtype can represent; a
ClosedJaxpr's consts have their constvars' shapes and dtypes. Params
holding ClosedJaxprs are verified recursively, each in its own scope
(sub-jaxprs see only their own constvars and invars). Forced thunks are
verified once each; unforced thunks are left alone (forcing runs user code).

Names in error messages are the printer's, so a message can be read next to
``print(jaxpr)``.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .core import (ClosedJaxpr, Eqn, Jaxpr, JaxprTypeError, Literal, Primitive, ShapedArray,
                   Thunk, Var, out_avals_of)
from .deep import deep_entry
from .params import ParamError, check_params
from .printer import Namer, definition_jaxpr, pp_eqn


def infer_out_avals(prim: Primitive, in_avals, params) -> list[ShapedArray]:
    """The typing rule's result; any failure of the rule becomes a JaxprTypeError naming the primitive.
    The params are checked against the primitive's schema first (ParamError)."""
    check_params(prim, params)
    try:
        out = out_avals_of(prim, list(in_avals), dict(params))
    except (JaxprTypeError, NotImplementedError):
        raise
    except Exception as e:  # noqa: BLE001 -- a typing rule rejecting its params, in any way
        raise JaxprTypeError(f"{prim.name}: the typing rule rejected params {sorted(params)} "
                             f"with operands ({', '.join(a.str_short() for a in in_avals)}): "
                             f"{type(e).__name__}: {e}") from e
    if not all(isinstance(a, ShapedArray) for a in out):
        raise JaxprTypeError(f"{prim.name}: the typing rule returned {out!r}, expected ShapedArrays")
    return out


def literal_problem(lit: Literal) -> str | None:
    """Why a literal is ill-formed (not a scalar, or a value its dtype cannot hold), or None."""
    aval = lit.aval
    if aval.shape != ():
        return f"literal of non-scalar type {aval.str_short()}"
    val = np.asarray(lit.val)
    if val.shape != () or val.dtype != aval.dtype:
        return f"literal value {lit.val!r} does not have its declared type {aval.str_short()}"
    if aval.dtype == dt.float0:
        return "literal of dtype float0"
    return None


def const_problem(value, aval: ShapedArray) -> str | None:
    """Why a const's value cannot stand for its constvar (another shape or dtype), or None.
    Tracers and device arrays give their shape and dtype without being read."""
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        value = np.asarray(value)
    if tuple(value.shape) != aval.shape or np.dtype(value.dtype) != aval.dtype:
        short = ShapedArray(value.shape, value.dtype).str_short()
        return f"its value has type {short}, expected {aval.str_short()}"
    return None


@deep_entry
def verify(program: ClosedJaxpr | Jaxpr) -> None:
    """Raise JaxprTypeError at the first fault of ``program`` (see the module docstring)."""
    _Verifier().program(program if isinstance(program, ClosedJaxpr) else
                        ClosedJaxpr(program, [None] * len(program.constvars)))


class _Verifier:
    def __init__(self):
        self.seen_thunks: dict[int, Thunk] = {}   # by id; the values keep the ids valid
        self.pending: list = []

    def program(self, cj: ClosedJaxpr) -> None:
        namer = Namer()
        self.jaxpr(cj.jaxpr, namer, "")
        for v, value in zip(cj.jaxpr.constvars, cj.consts):
            if value is not None and (problem := const_problem(value, v.aval)):
                raise JaxprTypeError(f"constvar {namer.ref(v)}:{v.aval.str_short()}: {problem}")
        while self.pending:                  # forced rule jaxprs, each once, with fresh names
            rule = self.pending.pop(0)
            self.jaxpr(definition_jaxpr(rule).jaxpr, Namer(), f" (in the rule jaxpr {rule!r})")

    def jaxpr(self, j: Jaxpr, namer: Namer, where: str) -> None:
        bound: set[Var] = set()

        def bind(v: Var, what: str):
            if not isinstance(v, Var):
                raise JaxprTypeError(f"{what} is {v!r}, expected a Var{where}")
            if v in bound:
                raise JaxprTypeError(f"variable {namer.ref(v)}:{v.aval.str_short()} is bound twice "
                                     f"(again as {what}){where}; each variable must be bound once")
            bound.add(v)
            namer.bind(v)

        for v in j.constvars:
            bind(v, "a constvar")
        for v in j.invars:
            bind(v, "an invar")
        for i, eqn in enumerate(j.eqns):
            self.eqn(i, eqn, bound, bind, namer, where)
        for k, a in enumerate(j.outvars):
            if isinstance(a, Var) and a not in bound:
                raise JaxprTypeError(f"outvar {k} ({namer.ref(a)}:{a.aval.str_short()}) is not bound "
                                     f"in the jaxpr{where}")
            if isinstance(a, Literal) and (problem := literal_problem(a)):
                raise JaxprTypeError(f"outvar {k}: {problem}{where}")

    def eqn(self, i: int, eqn: Eqn, bound, bind, namer: Namer, where: str) -> None:
        def fail(msg: str):
            raise JaxprTypeError(f"equation {i} ({pp_eqn(eqn, namer)}){where}, primitive "
                                 f"'{eqn.primitive.name}': {msg}")

        for k, a in enumerate(eqn.invars):
            if isinstance(a, Literal):
                if problem := literal_problem(a):
                    fail(f"operand {k}: {problem}")
            elif not isinstance(a, Var):
                fail(f"operand {k} is {a!r}, expected a Var or a Literal")
            elif a not in bound:
                fail(f"operand {k} ({namer.ref(a)}:{a.aval.str_short()}) is used before it is bound "
                     "(or is bound in another scope)")
        try:
            expected = infer_out_avals(eqn.primitive, [a.aval for a in eqn.invars], eqn.params)
        except ParamError as e:
            fail(str(e))
        except JaxprTypeError as e:
            fail(f"typing rule failed: {e}")
        declared = [v.aval for v in eqn.outvars]
        if declared != expected:
            fail(f"declared output types ({', '.join(a.str_short() for a in declared)}) differ from "
                 f"the typing rule's ({', '.join(a.str_short() for a in expected)})")
        for v in eqn.outvars:
            bind(v, f"an output of equation {i}")
        for name in sorted(eqn.params):
            self.param(eqn.params[name], namer,
                       f" in param '{name}' of equation {i} ('{eqn.primitive.name}'){where}")

    def param(self, value, namer: Namer, where: str) -> None:
        if isinstance(value, (ClosedJaxpr, Jaxpr)):
            inner = namer.scope()
            self.jaxpr(value.jaxpr if isinstance(value, ClosedJaxpr) else value, inner, where)
            namer.count = inner.count
        elif isinstance(value, tuple) and not hasattr(value, "_fields"):
            for x in value:
                self.param(x, namer, where)
        elif isinstance(value, Thunk) and value.forced and id(value) not in self.seen_thunks:
            self.seen_thunks[id(value)] = value
            self.pending.append(value)
