"""The text form: prints jaxprs as jaxpr-style text that ``parser.parse`` reads back.

Layout follows JAX's printer::

    { lambda a:f32[3]; b:f32[]. let
        c:f32[3] = mul a b
      in (c,) } with a = [1.0, 2.0, 3.0]

Constvars come before ``;``, their values after ``with`` (small arrays as
nested lists, large ones as ``b64"..."`` raw little-endian bytes). Variables
are named a, b, ..., z, ba, bb, ... in order of binding; every jaxpr is a
closed scope, and each occurrence of a sub-jaxpr is named afresh, so equal
programs print equal text. Params print sorted by name. Thunks (custom-rule
jaxprs) and params offering ``to_jaxpr()`` print as ``@name`` references to
definitions printed once, after the program, so recursive rules terminate.
A jaxpr param object met at two or more places of the printed text (a nested
``jit`` called twice, a ``cond`` whose branches repeat one jaxpr) prints once,
as a shared definition marked ``jaxpr``, and as ``@name`` at each place::

    { lambda ; a:f32[]. let
        b:f32[] = jit[jaxpr=@g name="g"] a
        c:f32[] = jit[jaxpr=@g name="g"] b
      in (c,) }

    @g = jaxpr { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }

The parser gives every ``@g`` the same jaxpr object, where a rule's ``@name``
becomes a lazy thunk. A shared definition is named after the ``name`` param of
the equation that first holds it (when that is an identifier), else ``jaxpr``.
An effectful equation ends with its effects, ``_ = debug_callback[...] a !{debug}``
(ir/effects.py). A Python callable without ``to_jaxpr()`` prints as an opaque ``<...>``
marker, which the parser rejects: such a program does not round-trip.

Printing is two steps: build a tree of small layout nodes (names are chosen
here, in print order), then lay it out on one line when it fits.
"""
from __future__ import annotations

import base64
import enum
import json
import re
from typing import Any

import numpy as np

from . import dtypes as dt
from .deep import deep_entry
from .core import ClosedJaxpr, Eqn, Jaxpr, Literal, RuleNotPrinted, ShapedArray, Thunk, Var, subjaxprs
from .effects import eqn_effects, format_effects
from .sharding_type import AxisType
from .shape_poly import (DimExpr, constraint_vars, dim_str_compact, free_vars, is_constant_shape,
                         shape_scope)
from .tracing import Tracer

WIDTH = 80               # lines longer than this break, as in JAX
MAX_LISTED_ELEMENTS = 1000   # larger constants print as base64 bytes
# Words the grammar reads as something other than a variable.
RESERVED_NAMES = frozenset({"_", "in", "let", "lambda", "with", "True", "False", "None",
                            "inf", "nan"})


# ----------------------------------------------------------------- naming

class Namer:
    """Chooses variable names (a, b, ..., z, ba, ...) in order of binding.

    One counter is shared by a program and all its inline sub-jaxprs, while
    each jaxpr has its own scope (``scope()``).
    """

    def __init__(self):
        self.count = 0
        self.names: dict[Var, str] = {}

    def _next_name(self) -> str:
        while True:
            n, name = self.count, ""
            self.count += 1
            while True:
                name = chr(ord("a") + n % 26) + name
                n //= 26
                if n == 0:
                    break
            if name not in RESERVED_NAMES:
                return name

    def bind(self, v: Var) -> str:
        name = self.names[v] = self._next_name()
        return name

    def ref(self, v: Var) -> str:
        """The name of a variable in scope; a fresh one for a variable bound nowhere (a faulty program)."""
        name = self.names.get(v)
        return name if name is not None else self.bind(v)

    def scope(self) -> "Namer":
        """A namer for a nested jaxpr: its own scope, the same sequence of names."""
        inner = Namer()
        inner.count = self.count
        return inner


# ------------------------------------------------------------ layout nodes

class Group:
    """A bracketed sequence: one line ``(a, b)`` if it fits, else one item per line."""

    def __init__(self, open_: str, items: list, close: str, sep: str = ", ",
                 trailing_single: str = ""):
        self.open, self.items, self.close = open_, items, close
        self.sep, self.trailing_single = sep, trailing_single


class JaxprDoc:
    """A jaxpr: its ``{ lambda ... let`` header, equations, outputs and ``with`` trailer."""

    def __init__(self, header: str, eqns: list, outs: str, trailer: str):
        self.header, self.eqns, self.outs, self.trailer = header, eqns, outs, trailer


class EqnDoc:
    """An equation: ``lhs = prim[params] args``; params break one per line when too long."""

    def __init__(self, lhs: str, prim: str, params: list, args: str):
        self.lhs, self.prim, self.params, self.args = lhs, prim, params, args


def one_line(doc) -> str | None:
    """The doc on one line, or None when it must break (it holds a jaxpr with equations that don't fit)."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Group):
        parts = [one_line(x) for x in doc.items]
        if any(p is None for p in parts):
            return None
        trail = doc.trailing_single if len(parts) == 1 else ""
        return doc.open + doc.sep.join(parts) + trail + doc.close
    if isinstance(doc, JaxprDoc):
        eqns = [one_line(e) for e in doc.eqns]
        if any(e is None for e in eqns):
            return None
        return f"{doc.header} {'; '.join(eqns)} in {doc.outs} }}{doc.trailer}"
    if isinstance(doc, EqnDoc):
        if any(_holds_jaxpr(v) for _, v in doc.params):   # JAX breaks params holding jaxprs
            return None
        params = [one_line(v) for _, v in doc.params]
        if any(p is None for p in params):
            return None
        ptext = ("[" + " ".join(f"{k}={p}" for (k, _), p in zip(doc.params, params)) + "]"
                 if params else "")
        return f"{doc.lhs} = {doc.prim}{ptext}{doc.args}"
    raise TypeError(doc)


def _holds_jaxpr(doc) -> bool:
    if isinstance(doc, JaxprDoc):
        return True
    return isinstance(doc, Group) and any(_holds_jaxpr(x) for x in doc.items)


def layout(doc, indent: int, column: int) -> str:
    """Text of ``doc`` starting at ``column`` on a line indented by ``indent``."""
    out: list[str] = []
    _layout(doc, indent, column, out)
    return "".join(out)


def _layout(doc, indent: int, column: int, out: list) -> None:
    """Append the text of ``doc`` to ``out`` in pieces: nested programs are never copied into
    their parent's string, so printing stays linear in the text's size however deep they nest."""
    flat = one_line(doc)
    if flat is not None and "\n" not in flat and column + len(flat) <= WIDTH:
        out.append(flat)
        return
    pad = " " * indent
    if isinstance(doc, str):
        out.append(doc)
    elif isinstance(doc, Group):
        inner = " " * (indent + 2)
        seps = [doc.sep.rstrip()] * (len(doc.items) - 1) + [doc.trailing_single if len(doc.items) == 1
                                                             else ""]
        out.append(doc.open)
        for x, sep in zip(doc.items, seps):
            out.append("\n" + inner)
            _layout(x, indent + 2, indent + 2, out)
            out.append(sep)
        out.append("\n" + pad + doc.close)
    elif isinstance(doc, JaxprDoc):
        out.append(doc.header)
        for e in doc.eqns:
            out.append("\n" + " " * (indent + 4))
            _layout(e, indent + 4, indent + 4, out)
        out.append(f"\n{pad}  in {doc.outs} }}{doc.trailer}")
    elif isinstance(doc, EqnDoc):
        out.append(f"{doc.lhs} = {doc.prim}")
        if not doc.params:
            out.append(doc.args)
            return
        inner = " " * (indent + 2)
        out.append("[")
        for k, v in doc.params:
            out.append(f"\n{inner}{k}=")
            _layout(v, indent + 2, indent + 3 + len(k), out)
        out.append("\n" + pad + "]" + doc.args)
    else:
        raise TypeError(doc)


# ------------------------------------------------------------ scalars, arrays

def format_scalar(value, dtype) -> str:
    """Round-trippable text of one scalar of ``dtype``: ``parse_scalar`` gives back the same bits."""
    dtype = np.dtype(dtype)
    if dt.is_bool(dtype):
        return "True" if bool(value) else "False"
    if dt.is_int(dtype):
        return str(int(value))
    if dt.is_complex(dtype):
        part = dt.float32 if dtype == dt.complex64 else dt.float64
        re_, im = format_scalar(np.real(value), part), format_scalar(np.imag(value), part)
        return f"{re_}{im}j" if im.startswith("-") else f"{re_}+{im}j"
    if dtype == dt.float0:
        return "0"
    x = np.asarray(value, dtype)[()]
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = str(x)
    if not re.search(r"[.e]", text):
        text += ".0"
    if np.asarray(float(text), dtype).tobytes() != np.asarray(x, dtype).tobytes():
        text = repr(float(x))      # exact: narrower floats are exactly representable in float64
    return text


def format_array(value) -> str:
    """A constant's value: a scalar, nested lists, or ``b64"..."`` for large arrays."""
    a = np.asarray(value)
    if a.dtype.itemsize == 0 or a.size > MAX_LISTED_ELEMENTS:
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        return 'b64"' + base64.b64encode(raw).decode("ascii") + '"'
    if a.ndim == 0:
        return format_scalar(a[()], a.dtype)

    def nest(x):
        if x.ndim == 1:
            return "[" + ", ".join(format_scalar(v, a.dtype) for v in x) + "]"
        return "[" + ", ".join(nest(sub) for sub in x) + "]"
    return nest(a)


# ------------------------------------------------------------------ params

def is_definition(value) -> bool:
    """Params printed as ``@name`` definitions: thunks and objects that can give their jaxpr."""
    return isinstance(value, Thunk) or callable(getattr(value, "to_jaxpr", None))


def definition_jaxpr(value) -> ClosedJaxpr:
    """The jaxpr a definition param stands for (forcing a thunk)."""
    j = value() if isinstance(value, Thunk) else value.to_jaxpr()
    return j if isinstance(j, ClosedJaxpr) else ClosedJaxpr(j, [])


def _jaxpr_hint(eqn: Eqn) -> str:
    """The name of a shared jaxpr held by ``eqn``: its ``name`` param (a jit's function) if readable."""
    name = eqn.params.get("name")
    return name if isinstance(name, str) and re.fullmatch(r"[A-Za-z_]\w*", name, re.ASCII) else "jaxpr"


def _as_closed(value) -> ClosedJaxpr:
    return value if isinstance(value, ClosedJaxpr) else ClosedJaxpr(value, [None] * len(value.constvars))


def _definition_hint(value) -> str:
    name = getattr(value, "name", None) or getattr(value, "__name__", None) or "rule"
    name = re.sub(r"\W", "_", str(name))
    return name if re.match(r"[A-Za-z_]", name) else "_" + name


def _dtype_of_param(value):
    if isinstance(value, np.dtype):
        return value
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value)
    return None


# Rules nest without end in some programs (odeint's bwd integrates an augmented ODE whose bwd
# integrates a larger one, ...): definitions nested deeper than this print as ``unprinted``.
MAX_DEFINITION_DEPTH = 4


class _Census:
    """What one program's text will hold, found before printing it: how often each jaxpr param
    object occurs (two or more: printed once, as a shared definition) and each rule's jaxpr.

    It walks what the text prints, each part once: the program, each jaxpr param object at its
    first occurrence (repeats are references), and the rule definitions, at the depth of their
    first reference, as the printer would; so printing the parsed text finds the same.
    """

    def __init__(self, max_definition_depth: int):
        self.max_depth = max_definition_depth
        self.counts: dict[int, int] = {}          # jaxpr param object id -> occurrences
        self.hints: dict[int, str] = {}           # jaxpr param object id -> shared definition name
        self.objects: dict[int, Any] = {}         # the objects counted, keeping their ids valid
        self.rules: list[tuple[Any, int]] = []    # (rule param, depth), by first reference
        self.bodies: dict[int, ClosedJaxpr | None] = {}   # rule id -> its jaxpr (None: unprinted)

    def shared(self, value) -> bool:
        return self.counts.get(id(value), 0) > 1

    def program(self, cj: ClosedJaxpr) -> None:
        self.jaxpr(cj.jaxpr, 0)
        done = 0
        while done < len(self.rules):       # rules may reference further rules
            rule, depth = self.rules[done]
            done += 1
            body = self.bodies[id(rule)] = self._rule_jaxpr(rule, depth)
            if body is not None:
                self.jaxpr(body.jaxpr, depth)

    def jaxpr(self, j: Jaxpr, depth: int) -> None:
        for eqn in j.eqns:
            hint = _jaxpr_hint(eqn)
            for k in sorted(eqn.params):
                self.param(eqn.params[k], hint, depth)

    def param(self, value, hint: str, depth: int) -> None:
        if isinstance(value, tuple):
            for x in value:
                self.param(x, hint, depth)
        elif isinstance(value, (ClosedJaxpr, Jaxpr)):
            self.counts[id(value)] = self.counts.get(id(value), 0) + 1
            if id(value) not in self.objects:
                self.objects[id(value)] = value
                self.hints[id(value)] = hint
                self.jaxpr(_as_closed(value).jaxpr, depth)
        elif is_definition(value) and id(value) not in self.objects:
            self.objects[id(value)] = value
            self.rules.append((value, depth + 1))

    def _rule_jaxpr(self, rule, depth: int) -> ClosedJaxpr | None:
        """The rule's jaxpr, or None where it is too deep or was not printed in its source."""
        if depth > self.max_depth:
            return None
        try:
            return definition_jaxpr(rule)
        except RuleNotPrinted:
            return None


class _Printer:
    """Holds the ``@name`` definitions met while printing one program."""

    def __init__(self, max_definition_depth: int = MAX_DEFINITION_DEPTH):
        self.def_names: dict[int, str] = {}
        self.defs: list[tuple[str, Any]] = []   # (name, param object), by first reference
        self.census = _Census(max_definition_depth)   # empty (nothing shared) until program()
        self.debug_info = False                       # print equations' source locations

    def reference(self, value, hint: str) -> str:
        name = self.def_names.get(id(value))
        if name is None:
            base = name = hint
            taken = {n for n, _ in self.defs}
            k = 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            self.def_names[id(value)] = name
            self.defs.append((name, value))
        return "@" + name

    # -- docs ---------------------------------------------------------------
    def param_doc(self, value, namer: Namer):
        if value is None or isinstance(value, bool):
            return str(value)
        if isinstance(value, enum.Enum):
            return f"{type(value).__name__}.{value.name}"
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        if type(value) is DimExpr:
            return f"`{dim_str_compact(value)}`"
        if isinstance(value, (float, np.floating)):
            return repr(float(value))
        if isinstance(value, (complex, np.complexfloating)):
            return format_scalar(value, dt.complex128)
        if isinstance(value, str):
            return _quote(value)
        if (d := _dtype_of_param(value)) is not None:
            return dt.short_name(d)
        if isinstance(value, ShapedArray):
            return value.str_short()
        if hasattr(type(value), "_fields"):        # records: NamedTuples, HostCallback
            items = [f"{f}=" + self._flat(self.param_doc(getattr(value, f), namer))
                     for f in value._fields]
            return Group(type(value).__name__ + "(", items, ")")
        if isinstance(value, tuple):
            return Group("(", [self.param_doc(x, namer) for x in value], ")", trailing_single=",")
        if isinstance(value, (ClosedJaxpr, Jaxpr)):
            if self.census.shared(value):
                return self.reference(value, self.census.hints[id(value)])
            inner = namer.scope()
            doc = self.jaxpr_doc(_as_closed(value), inner, show_consts=True)
            namer.count = inner.count
            return doc
        if is_definition(value):
            return self.reference(value, _definition_hint(value))
        return "<" + re.sub(r"[<>\n]", "", _opaque_name(value)) + ">"

    @staticmethod
    def _flat(doc) -> str:
        text = one_line(doc)
        return text if text is not None else layout(doc, 0, 0)

    def eqn_doc(self, eqn: Eqn, namer: Namer) -> EqnDoc:
        args = "".join(" " + atom_text(a, namer) for a in eqn.invars)
        effects = eqn_effects(eqn)
        if effects:
            args += " !" + format_effects(effects)
        if self.debug_info and eqn.source_info is not None and eqn.source_info.file:
            args += " " + location_text(eqn.source_info)
        lhs = " ".join(f"{namer.bind(v)}:{v.aval.str_short()}" for v in eqn.outvars) or "_"
        params = [(k, self.param_doc(eqn.params[k], namer)) for k in sorted(eqn.params)]
        return EqnDoc(lhs, eqn.primitive.name, params, args)

    def jaxpr_doc(self, cj: ClosedJaxpr, namer: Namer, show_consts: bool) -> JaxprDoc:
        j = cj.jaxpr
        consts = " ".join(f"{namer.bind(v)}:{v.aval.str_short()}" for v in j.constvars)
        ins = " ".join(f"{namer.bind(v)}:{v.aval.str_short()}" for v in j.invars)
        header = f"{{ lambda {consts}; {ins}. let" if consts else f"{{ lambda ; {ins}. let"
        eqns = [self.eqn_doc(e, namer) for e in j.eqns]
        outs = [atom_text(a, namer) for a in j.outvars]
        outs_text = "(" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")"
        trailer = ""
        if show_consts and j.constvars and not all(c is None for c in cj.consts):
            trailer = " with " + "; ".join(f"{namer.ref(v)} = {_const_text(c)}"
                                           for v, c in zip(j.constvars, cj.consts))
        return JaxprDoc(header, eqns, outs_text, trailer)

    def program(self, cj: ClosedJaxpr, show_consts: bool) -> str:
        self.census.program(cj)
        text = mesh_header(cj) + dims_header(cj.jaxpr) + layout(self.jaxpr_doc(cj, Namer(), show_consts), 0, 0)
        done = 0
        while done < len(self.defs):        # definitions may reference further definitions
            name, value = self.defs[done]
            done += 1
            text += f"\n\n@{name} = {self.definition(name, value)}"
        return text

    def definition(self, name: str, value) -> str:
        """A definition's right-hand side: ``jaxpr {...}`` (shared), ``{...}`` (a rule) or ``unprinted``."""
        if isinstance(value, (ClosedJaxpr, Jaxpr)):
            return "jaxpr " + layout(self.jaxpr_doc(_as_closed(value), Namer(), True), 0, len(name) + 10)
        body = self.census.bodies[id(value)]
        return "unprinted" if body is None else layout(self.jaxpr_doc(body, Namer(), True), 0, len(name) + 4)


def mesh_header(cj: ClosedJaxpr) -> str:
    """``mesh x=2, y=4\n`` when the program's types name shardings (the mesh they split over;
    an axis that is not Explicit is written ``z=2:Auto``), else ""."""
    mesh = next(iter(_type_meshes(cj.jaxpr, set())), None)
    if mesh is None:
        return ""
    axes = ", ".join(f"{n}={k}" + ("" if t is AxisType.Explicit else f":{t.name}")
                     for n, k, t in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types))
    return f"mesh {axes}\n"


def _type_meshes(j: Jaxpr, found: set) -> set:
    for v in (*j.constvars, *j.invars, *(o for e in j.eqns for o in e.outvars)):
        s = getattr(v.aval, "sharding_in_type", None)
        if s is not None:
            found.add(s.mesh)
    for e in j.eqns:
        for sub in subjaxprs(e):
            _type_meshes(sub.jaxpr, found)
    return found


def dims_header(j: Jaxpr) -> str:
    """``dims b, h where b >= 2\n`` when the program has symbolic dimensions, else "".

    Dimension variables enter a program through its inputs' types, so the top
    level's variables show them all."""
    scope, names = None, set()
    for v in (*j.constvars, *j.invars, *(o for e in j.eqns for o in e.outvars)):
        if not is_constant_shape(v.aval.shape):
            scope = scope or shape_scope(v.aval.shape)
            names |= free_vars(v.aval.shape)
    if scope is None:
        return ""
    names |= constraint_vars(scope)
    where = f" where {scope}" if scope.constraints else ""
    return f"dims {', '.join(sorted(names))}{where}\n"


def _opaque_name(value) -> str:
    return getattr(value, "__qualname__", None) or type(value).__name__


def _quote(s: str) -> str:
    return json.dumps(s)


def _const_text(c) -> str:
    if isinstance(c, Tracer):
        return f"<traced {c.aval.str_short()}>"
    return format_array(c)


def location_text(info) -> str:
    """``loc("file.py":12:4)``: an equation's source location, as MLIR writes one."""
    return f"loc({_quote(info.file)}:{int(info.line)}:{int(info.column)})"


def atom_text(a, namer: Namer) -> str:
    """An operand: a variable's name, or a literal as ``value:type``."""
    if isinstance(a, Literal):
        return f"{format_scalar(a.val, a.aval.dtype)}:{a.aval.str_short()}"
    return namer.ref(a)


# -------------------------------------------------------------- public API

@deep_entry
def pp_eqn(eqn: Eqn, namer: Namer | None = None) -> str:
    """One equation's text; names come from ``namer`` (a fresh one names operands first)."""
    namer = namer if namer is not None else Namer()
    for a in eqn.invars:
        if isinstance(a, Var):
            namer.ref(a)
    return layout(_Printer().eqn_doc(eqn, namer), 0, 0)


@deep_entry
def pp_jaxpr(closed_jaxpr: ClosedJaxpr, show_consts: bool = True,
             max_definition_depth: int = MAX_DEFINITION_DEPTH, debug_info: bool = False) -> str:
    """The program's text, its ``@name`` definitions after it (those nested deeper than
    ``max_definition_depth`` as ``@name = unprinted``); ``debug_info``: each equation with a
    source location ends with it, ``loc("file.py":12:4)``."""
    printer = _Printer(max_definition_depth)
    printer.debug_info = debug_info
    return printer.program(closed_jaxpr, show_consts)
