"""``jaxprc.experimental.hijax``: the names of JAX's experimental "high-level" types and primitives.

JAX's hijax lets a library define types with their own lowering to plain arrays (``HiType``) and
primitives on them (``HiPrimitive``). jaxprc does not implement it: the classes are here so that
a library that defines its hijax types at import (flax nnx does, and uses them only when its
``flax_hijax_variable`` option is on) imports and runs its other paths; binding a hi primitive
raises NotImplementedError saying so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.core import AbstractValue, ShapedArray  # noqa: F401
from ..ir.effects import control_flow_allowed_effects  # noqa: F401
from ..interpreters.ad import Zero, instantiate_zeros, is_undefined_primal  # noqa: F401
from ..ref import AbstractRef  # noqa: F401

__all__ = ["AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrimitive", "HiType", "MutableHiType",
           "ShapedArray", "VJPHiPrimitive", "Zero", "AbstractRef", "aval_method", "aval_property",
           "control_flow_allowed_effects", "cur_qdd", "instantiate_zeros", "is_undefined_primal",
           "register_hitype"]

_NOT_IMPLEMENTED = "jaxprc does not implement jax.experimental.hijax ({what})"


class HiType(AbstractValue):
    """The base of a high-level type (its lowering to arrays is not supported by jaxprc)."""


class MutableHiType(HiType):
    """A high-level type whose values carry mutable state."""


@dataclass(frozen=True)
class AvalQDD:
    """A type with its quasi-dynamic data (the part of a mutable type that may change)."""
    aval: Any
    qdd: Any


@dataclass(frozen=True)
class AvalMutableQDD:
    aval: Any
    mutable_qdd: Any


class HiPrimitive:
    """A primitive on high-level types; subclasses define ``abstract_eval``, ``to_lojax``, ... ."""

    multiple_results = False

    def __init__(self, name: str):
        self.name = name

    def bind(self, *args, **params):
        raise NotImplementedError(_NOT_IMPLEMENTED.format(what=f"primitive {self.name!r}"))

    def __repr__(self):
        return self.name


class VJPHiPrimitive(HiPrimitive):
    """A hi primitive defined by its forward and VJP rules."""


class aval_method:
    """A method of a high-level value that its type also offers (on tracers)."""

    def __init__(self, fun):
        self.fun = fun

    def __get__(self, instance, owner=None):
        return self.fun if instance is None else self.fun.__get__(instance, owner)


class aval_property:
    """A property of a high-level value that its type also offers (on tracers)."""

    def __init__(self, fget):
        self.fget = fget

    def __get__(self, instance, owner=None):
        return self if instance is None else self.fget(instance)


def register_hitype(value_type: type, to_aval) -> None:
    """Accepted and ignored: jaxprc does not trace hi-type values, so it never asks their type
    (a library registers its types at import, whether it will use them or not)."""


def cur_qdd(x):
    raise NotImplementedError(_NOT_IMPLEMENTED.format(what="cur_qdd"))
