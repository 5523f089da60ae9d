"""The language: abstract values, variables, equations, jaxprs and primitives.

A jaxpr is a typed SSA program: ``constvars`` and ``invars`` are bound on
entry, each equation binds fresh ``outvars`` by applying a primitive to
variables or scalar literals, and ``outvars`` are returned. Variables have
identity, not names; the printer chooses names.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from . import dtypes as dt
from . import sharding_type


class JaxprcError(Exception):
    """Base class of the errors a user can cause."""


class RuleNotPrinted(JaxprcError):
    """A rule of a parsed program whose text was left out (``@name = unprinted``)."""


class JaxprTypeError(JaxprcError, TypeError):
    """An ill-typed program: a typing rule rejected its operands, or verify() found a fault."""


class JaxprValueError(JaxprTypeError, ValueError):
    """An ill-typed program whose operation JAX refuses with a ValueError (a pad config of the
    wrong length, squeezing a dimension that is not 1): to the passes and the parser a typing
    error like the others, to a user the ValueError JAX raises."""


# ------------------------------------------------------------------ types
# Dimensions are ints or symbolic expressions (shape_poly imports JaxprcError from here).
from .shape_poly import InconclusiveDimensionOperation, _keep_symbolic  # noqa: E402


class AbstractValue:
    """The type of a value a program computes: ShapedArray, or a token's type."""

    __slots__ = ()


class ShapedArray(AbstractValue):
    """The abstract value of an array: shape, dtype, JAX's weak-type bit, the sharding written
    in its type (``sharding_in_type``: an ``ir.sharding_type.NamedSharding`` over the Explicit axes
    of an abstract mesh, one spec entry per dimension; None when no dimension is split so), and
    inside a shard_map body with ``check_vma`` the manual mesh axes it may vary over (``vma``, a
    frozenset; empty elsewhere: the same value on every device of an axis it leaves out)."""

    __slots__ = ("shape", "dtype", "weak_type", "sharding_in_type", "vma", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape, dtype, weak_type: bool = False, sharding=None, vma=frozenset()):
        try:
            shape = tuple(map(int, shape))
        except InconclusiveDimensionOperation:     # symbolic dimensions stay as they are
            shape = _keep_symbolic(shape)
        self.shape = shape
        self.dtype = dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.weak_type = weak_type = bool(weak_type)
        if sharding is not None:
            sharding = sharding_type.type_sharding(sharding, shape)
        self.sharding_in_type = sharding
        self.vma = vma = vma if type(vma) is frozenset else frozenset(vma)
        self._hash = hash((shape, dtype, weak_type, sharding, vma))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def sharding(self):
        """JAX's ``typeof(x).sharding``: the sharding in the type, else no split over an empty mesh."""
        if self.sharding_in_type is not None:
            return self.sharding_in_type
        return sharding_type.unsharded(self.ndim)

    @property
    def mat(self) -> sharding_type.ManualAxisType:
        """JAX's ``typeof(x).mat``: the manual axes the value varies over (``varying``)."""
        return sharding_type.ManualAxisType(self.vma)

    def update(self, shape=None, dtype=None, weak_type=None, sharding=False, vma=None) -> "ShapedArray":
        """A copy with the given fields replaced; the sharding stays while the shape does
        (``sharding=None`` drops it), the varying axes stay unless given."""
        if sharding is False:
            sharding = self.sharding_in_type if shape is None or tuple(shape) == self.shape else None
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, sharding,
                           self.vma if vma is None else vma)

    def strip_weak_type(self) -> "ShapedArray":
        return self.update(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self) -> "ShapedArray":
        """The type of this type's tangents: float0 for integers and booleans, else itself."""
        if dt.is_inexact(self.dtype):
            return self
        return ShapedArray(self.shape, dt.float0, self.weak_type, self.sharding_in_type, self.vma)

    def __eq__(self, other):
        return self is other or (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.sharding_in_type == other.sharding_in_type and self.vma == other.vma)

    def __hash__(self):
        return self._hash

    def str_short(self, short_dtypes=None) -> str:
        """Type text: ``f32[3,4]``; weak types carry a leading ``~`` (``~f32[]``); a dimension
        split over mesh axes names them (``f32[8@x,4@(x,y)]``); varying manual axes follow as
        JAX prints them (``f32[4]{V:x}``, ``f32[4]{V:(x,y)}``). With ``short_dtypes`` given, JAX's
        form instead: no weak-type mark, ``float32[3,4]`` unless ``short_dtypes=True``."""
        if short_dtypes is not None:
            if not short_dtypes:
                return self._long_text()
            text = f"{dt.short_name(self.dtype)}[{_dims_text(self.shape, self.sharding_in_type)}]"
            return text + sharding_type.vma_suffix(self.vma) if self.vma else text
        text = f"{dt.short_name(self.dtype)}[{_dims_text(self.shape, self.sharding_in_type)}]"
        text = "~" + text if self.weak_type else text
        return text + sharding_type.vma_suffix(self.vma) if self.vma else text

    def __str__(self):
        """JAX's: ``~float32[3]`` (the IR's text is ``str_short``)."""
        return ("~" if self.weak_type else "") + self._long_text()

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self._long_text()}{weak})"

    def _long_text(self) -> str:
        name = "float0" if self.dtype == dt.float0 else self.dtype.name
        text = f"{name}[{_dims_text(self.shape, self.sharding_in_type)}]"
        return text + sharding_type.vma_suffix(self.vma) if self.vma else text


def _dims_text(shape, sharding=None) -> str:
    """``3,4``; a symbolic dimension without spaces (``b,2*b+1``), as types are written; with
    the mesh axes a dimension is split over (``8@x``, ``8@(x,y)``)."""
    if sharding is None:
        return ",".join(map(str, shape)).replace(" ", "")
    return ",".join(str(d).replace(" ", "") + sharding_type.axes_suffix(axes)
                    for d, axes in zip(shape, sharding.spec.axes(len(shape))))


# ---------------------------------------------------------- program pieces

class Var:
    """A variable: identity plus a type. Names are chosen by the printer."""

    __slots__ = ("aval", "__weakref__")

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Var<{self.aval.str_short()}>"


class Literal:
    """A scalar constant written inline in an equation (``mul a 2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        if aval.shape != ():
            raise JaxprTypeError(f"literals are scalars, got type {aval.str_short()}")
        self.val = np.asarray(val, dtype=aval.dtype)[()]
        self.aval = aval

    def __eq__(self, other):
        return (type(other) is Literal and self.aval == other.aval
                and _scalar_key(self.val) == _scalar_key(other.val))

    def __hash__(self):
        return hash((self.aval, _scalar_key(self.val)))

    def __repr__(self):
        return f"Literal({self.val!r}:{self.aval.str_short()})"


def _scalar_key(val):
    """A hashable key that tells -0.0 from 0.0 and equates NaNs (bitwise identity)."""
    a = np.asarray(val)
    return (a.dtype.str, a.tobytes())


Atom = Var | Literal


@functools.lru_cache(maxsize=256)
def _code_positions(code) -> tuple:
    """(line, end line, column, end column) of each instruction of a code object."""
    return tuple(code.co_positions())


class SourceInfo:
    """Where the user wrote the operation: ``file:line`` (the innermost user frame), and the
    ``named_scope`` names open around it (``scope``, "outer/inner"; "" outside any).

    ``column`` (0-based, as MLIR's) is the given one, else found when first asked from the
    frame's code object and instruction (``code``, ``lasti``): tracing stores those, which costs
    nothing until a location is printed."""

    __slots__ = ("file", "line", "name", "scope", "_column", "_code", "_lasti")

    def __init__(self, file: str, line: int, name: str = "", scope: str = "", column: int | None = None,
                 code=None, lasti: int = -1):
        self.file, self.line, self.name, self.scope = file, line, name, scope
        self._column, self._code, self._lasti = column, code, lasti

    @property
    def column(self) -> int:
        if self._column is None:
            self._column = 0
            if self._code is not None and self._lasti >= 0:
                positions = _code_positions(self._code)
                if self._lasti // 2 < len(positions):
                    self._column = positions[self._lasti // 2][2] or 0
            self._code = None
        return self._column

    def __str__(self):
        return f"{self.file}:{self.line}"

    def __repr__(self):
        return f"SourceInfo({self})"


class Eqn:
    """``outvars = primitive[params] invars``, with the user's source location."""

    __slots__ = ("primitive", "invars", "outvars", "params", "source_info")

    def __init__(self, primitive: "Primitive", invars: Sequence[Atom], outvars: Sequence[Var],
                 params: dict, source_info: SourceInfo | None = None):
        self.primitive = primitive
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.params = params
        self.source_info = source_info

    def replace(self, **kw) -> "Eqn":
        fields = dict(primitive=self.primitive, invars=self.invars, outvars=self.outvars,
                      params=self.params, source_info=self.source_info)
        fields.update(kw)
        return Eqn(**fields)

    @property
    def effects(self) -> frozenset:
        from .effects import eqn_effects
        return eqn_effects(self)

    def __repr__(self):
        from .printer import pp_eqn
        return pp_eqn(self)


class Jaxpr:
    """An open program: its constants are bound to ``constvars`` by a ClosedJaxpr or a caller."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "__weakref__")

    def __init__(self, constvars: Sequence[Var], invars: Sequence[Var],
                 outvars: Sequence[Atom], eqns: Sequence[Eqn]):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    @property
    def effects(self) -> frozenset:
        from .effects import jaxpr_effects
        return jaxpr_effects(self)

    def __str__(self):
        from .printer import pp_jaxpr
        return pp_jaxpr(ClosedJaxpr(self, [None] * len(self.constvars)), show_consts=False)

    __repr__ = __str__

    def pretty_print(self, **options) -> str:
        """The text form (JAX's method; its display options, such as ``use_color``, change
        nothing here: jaxprc's text is one format, which parses back)."""
        return str(self)


class ClosedJaxpr:
    """A jaxpr with values for its constvars: the unit that runs, prints and is transformed."""

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any] = ()):
        if len(consts) != len(jaxpr.constvars):
            raise JaxprTypeError(f"ClosedJaxpr: {len(jaxpr.constvars)} constvars but {len(consts)} consts")
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: self.jaxpr.effects)

    def __str__(self):
        from .printer import pp_jaxpr
        return pp_jaxpr(self)

    __repr__ = __str__
    pretty_print = Jaxpr.pretty_print

    def __eq__(self, other):
        from .equality import alpha_equivalent
        return isinstance(other, ClosedJaxpr) and alpha_equivalent(self, other)

    def __hash__(self):
        from .equality import structural_hash
        return structural_hash(self)


class Thunk:
    """A lazily formed, memoized ClosedJaxpr (a custom rule's jaxpr).

    Rules may call their own custom function, so their jaxprs cannot be formed
    eagerly; a thunk forms its jaxpr on first call and remembers it. ``name``
    is a hint for the printer's ``@name`` definitions.
    """

    __slots__ = ("_fn", "_value", "name", "__weakref__")
    _UNSET = object()

    def __init__(self, fn: Callable[[], Any], name: str = "rule"):
        self._fn = fn
        self._value = Thunk._UNSET
        self.name = name

    def __call__(self):
        if self._value is Thunk._UNSET:
            # Threads may force a shared thunk at once: each may form the value, the first one
            # formed is kept. ``_value`` is set before ``_fn`` is cleared, so a thread that finds
            # no ``_fn`` finds the value.
            fn = self._fn
            if fn is not None:
                value = fn()
                if self._value is Thunk._UNSET:
                    self._value = value
                    self._fn = None
        return self._value

    @property
    def forced(self) -> bool:
        return self._value is not Thunk._UNSET

    def __repr__(self):
        return f"Thunk(@{self.name})"


# ------------------------------------------------------------- primitives

class Primitive:
    """An operation of the IR. Built-in and user-defined primitives share this class.

    ``abstract_eval`` is its typing rule: input avals (and params) to output
    avals; the shape rule, then (when an operand's type is sharded) the sharding rule, which
    writes the results' shardings into their types.
    ``impl`` evaluates it on concrete values outside any trace.
    ``param_schema`` (set by ``def_params``) names its params and what each may
    hold (``jaxprc.ir.params``); the verifier checks it before the typing rule.
    None (a user primitive that declares none): params are left to the typing rule.
    """

    multiple_results = False

    def __init__(self, name: str):
        self.name = name
        self.impl_rule: Callable | None = None
        self.abstract_eval_rule: Callable | None = None
        self.param_schema: dict | None = None
        self.effects_rule: Callable | None = None
        self.sharding_rule: Callable | None = None
        self.vma_rule: Callable | None = None
        PRIMITIVES[name] = self

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        return _bind(self, args, params)

    def def_impl(self, impl):
        self.impl_rule = impl
        return impl

    def def_abstract_eval(self, rule):
        self.abstract_eval_rule = rule
        return rule

    def def_params(self, **schema) -> "Primitive":
        """Declare the params: name -> checker (``jaxprc.ir.params.Int(min=0)``, ...); no
        arguments: the primitive takes no params."""
        self.param_schema = dict(schema)
        return self

    def def_effects(self, rule):
        """Declare the effects of its equations: ``rule(**params) -> set of ir.effects.Effect``.
        Without one a primitive has the effects of the sub-jaxprs it holds (none if it holds none)."""
        self.effects_rule = rule
        return rule

    def def_sharding_rule(self, rule):
        """Declare how shardings in types propagate: ``rule(out_avals, *in_avals, **params)`` gives
        each result's sharding (a NamedSharding over the operands' mesh, or None), a list when
        ``multiple_results``; ``out_avals`` are the shape rule's. Without one, the shape rule's
        results are the types (a call's are its body's)."""
        self.sharding_rule = rule
        return rule

    def def_vma_rule(self, rule):
        """Declare which manual axes the results vary over: ``rule(*in_avals, **params)`` gives a
        frozenset (every result's). Without one, a primitive's results vary over what its
        operands do, and one holding bodies gives its bodies' typed results."""
        self.vma_rule = rule
        return rule

    def impl(self, *args, **params):
        if self.impl_rule is None:
            raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")
        return self.impl_rule(*args, **params)

    def abstract_eval(self, *avals, **params):
        """Output aval(s) of the primitive; a list when ``multiple_results``."""
        if self.abstract_eval_rule is None:
            raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")
        out = self.abstract_eval_rule(*avals, **params)
        for a in avals:     # a loop, not any(): the passes type every equation through here
            if getattr(a, "vma", None):
                out = with_vma(self, out, avals, params)
                break
        for a in avals:
            if getattr(a, "sharding_in_type", None) is not None:
                return with_shardings(self, out, avals, params)
        return out


def with_shardings(prim: Primitive, out, avals, params):
    """The shape rule's results ``out`` with the shardings the sharding rule gives. Without one,
    they are the shape rule's own (a call or a loop gives its body's typed results)."""
    if prim.sharding_rule is None:
        return out
    outs = list(out) if prim.multiple_results else [out]
    plain = [o.update(sharding=None) if isinstance(o, ShapedArray) else o for o in outs]
    given = prim.sharding_rule(plain, *avals, **params)
    shardings = list(given) if prim.multiple_results else [given]
    outs = [o.update(sharding=s) if s is not None else o for o, s in zip(plain, shardings)]
    return outs if prim.multiple_results else outs[0]


def with_vma(prim: Primitive, out, avals, params):
    """The shape rule's results ``out`` typed with the manual axes they vary over: the vma rule's,
    else the union of the operands' (a primitive holding bodies keeps its bodies' types)."""
    if prim.vma_rule is not None:
        vma = prim.vma_rule(*avals, **params)
    elif any(isinstance(v, (ClosedJaxpr, Jaxpr)) or (type(v) is tuple and v and isinstance(v[0], ClosedJaxpr))
             for v in params.values()):
        return out
    else:
        vma = frozenset().union(*(getattr(a, "vma", ()) for a in avals))
    if not prim.multiple_results:
        return out.update(vma=vma) if isinstance(out, ShapedArray) else out
    return [o.update(vma=vma) if isinstance(o, ShapedArray) else o for o in out]


def _bind(prim, args, params):
    """``Primitive.bind`` is replaced by ``tracing``'s when that module loads (it imports this one)."""
    raise RuntimeError("jaxprc.ir.tracing is not loaded")


# name -> Primitive; open: user primitives register here on construction, so
# the parser finds them by name.
PRIMITIVES: dict[str, Primitive] = {}


def out_avals_of(prim: Primitive, avals, params) -> list[ShapedArray]:
    out = prim.abstract_eval(*avals, **params)
    return list(out) if prim.multiple_results else [out]


# ------------------------------------------------------------ param types
# Record types (NamedTuples) and Enums used as primitive params, by class
# name, so the text form can print and parse them (``GatherDimensionNumbers(
# offset_dims=(1,), ...)``, ``GatherScatterMode.CLIP``).
PARAM_TYPES: dict[str, type] = {}


def param_type(cls: type) -> type:
    """Class decorator: register a NamedTuple or Enum as a printable, parsable param type."""
    PARAM_TYPES[cls.__name__] = cls
    return cls


# -------------------------------------------------------------- utilities

def subjaxprs(eqn: Eqn):
    """The ClosedJaxprs held directly in an equation's params (tuples searched, thunks not forced)."""
    for v in eqn.params.values():
        if isinstance(v, ClosedJaxpr):
            yield v
        elif isinstance(v, Jaxpr):
            yield ClosedJaxpr(v, [None] * len(v.constvars))
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, ClosedJaxpr):
                    yield x
