"""Effects: what an equation does besides computing its results.

Most primitives are pure: an equation whose results are unused may go (DCE),
two equal ones may be merged (CSE), and either may be moved. An effectful
equation (a host callback that prints, writes a file, ...) may be none of
these. Its effects are a set of ``Effect``s:

- ``debug`` / ``ordered_debug``: ``jaxprc.debug.print`` and ``debug.callback``;
- ``io`` / ``ordered_io``: ``jaxprc.experimental.io_callback``;
- ``check``: ``jaxprc.experimental.checkify.check`` (and ``check_error``, ``debug_check``).

Ordered effects also run in program order, across separate compiled calls
too (the lowering threads tokens through them). An equation's effects come
from its primitive and params: a primitive declares them with
``Primitive.def_effects(rule)``, ``rule(**params) -> set of Effects``; a
primitive without a rule has the effects of the sub-jaxprs it holds (calls,
loops, conditionals, remat, custom derivatives propagate them), none if it
holds none. A jaxpr's effects are the union of its equations'. The text form
writes them after an equation's operands: ``_ = debug_callback[...] x !{debug}``.
"""
from __future__ import annotations

import enum
import weakref

from .core import ClosedJaxpr, Eqn, Jaxpr, param_type, subjaxprs

__all__ = ["Effect", "LibraryEffect", "EffectTypeSet", "control_flow_allowed_effects", "no_effects", "eqn_effects", "jaxpr_effects", "has_ordered_effects",
           "format_effects"]


@param_type
class Effect(enum.Enum):
    """An effect kind; printable and parsable as a param (``Effect.debug``) and as ``!{debug}``."""

    debug = "debug"
    ordered_debug = "ordered_debug"
    io = "io"
    ordered_io = "ordered_io"
    check = "check"      # ``checkify.check``: raises where it runs unless ``checkify`` functionalizes it

    @property
    def ordered(self) -> bool:
        return self in (Effect.ordered_debug, Effect.ordered_io)

    def __str__(self):
        return self.value


class LibraryEffect:
    """The base of effect kinds a library defines (``jax.extend.core.Effect``): an instance of a
    subclass may be in the effect set a primitive's ``def_effects`` rule returns. It is unordered
    and prints as its class's name; the text parser knows only the built-in kinds."""

    ordered = False

    def __str__(self):
        return type(self).__name__


class EffectTypeSet:
    """A set of effect types (JAX's ``effects.EffectTypeSet``): libraries declare in one which of
    their effects may appear inside loops and conditionals."""

    def __init__(self):
        self._types: set[type] = set()

    def add_type(self, effect_type: type) -> None:
        self._types.add(effect_type)

    def contains(self, effect) -> bool:
        return isinstance(effect, tuple(self._types))

    def filter_not_in(self, effects):
        return [e for e in effects if not self.contains(e)]


# JAX refuses effects not declared here inside control flow; jaxprc's loops and conditionals
# carry every effect, so the declarations are recorded for libraries that read them back.
control_flow_allowed_effects = EffectTypeSet()

no_effects: frozenset = frozenset()

# Jaxpr -> its effects. Jaxprs are not changed once built, so the union is computed once per
# object (calls and loops ask for their bodies' effects again and again).
_JAXPR_EFFECTS: "weakref.WeakKeyDictionary[Jaxpr, frozenset]" = weakref.WeakKeyDictionary()


def eqn_effects(eqn: Eqn) -> frozenset:
    """The effects of one equation (see the module docstring)."""
    rule = eqn.primitive.effects_rule
    if rule is not None:
        return frozenset(rule(**eqn.params))
    found = no_effects
    for sub in subjaxprs(eqn):
        found |= jaxpr_effects(sub)
    return found


def jaxpr_effects(jaxpr: Jaxpr | ClosedJaxpr) -> frozenset:
    """The union of the effects of a jaxpr's equations (sub-jaxprs included)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    found = _JAXPR_EFFECTS.get(jaxpr)
    if found is None:
        found = no_effects
        for eqn in jaxpr.eqns:
            found |= eqn_effects(eqn)
        _JAXPR_EFFECTS[jaxpr] = found
    return found


def has_ordered_effects(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    return any(e.ordered for e in jaxpr_effects(jaxpr))


def format_effects(effects) -> str:
    """``{debug, ordered_io}``: the effects in a stable order."""
    return "{" + ", ".join(sorted(str(e) for e in effects)) + "}"
