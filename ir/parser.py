"""The parser of the text form: ``parse(text) -> ClosedJaxpr`` (ir/grammar.lark, LALR).

Each jaxpr is resolved as its closing ``}`` is reduced: jaxprs are closed
scopes, so its binders, equations and the types its primitives' typing rules
compute are all known then. Definitions follow the program, so ``@name``
references are placeholders until the end of the text, when each becomes what
its definition is: a rule's (``@name = { ... }``) a ``Thunk`` shared per name
and resolved lazily, so rules may refer to themselves; a shared jaxpr's
(``@name = jaxpr { ... }``) that ClosedJaxpr itself, one object for every
reference, which therefore must not contain itself. Equations holding
references are type-checked then too. Every fault is a ``ParseError`` with
line, column, what was expected and the offending line with a caret.

Jaxprs may nest without limit (a cond in a cond ...: the LALR automaton keeps
its own stack), but a param's tuples (and records) may nest at most
``MAX_PARAM_NESTING`` deep: no primitive needs more, and deeper values would
only exhaust the recursion of the code that reads them.
"""
from __future__ import annotations

import base64
import binascii
import bisect
import json
import math
import os
import re
import threading

import lark
import numpy as np

from . import dtypes as dt
from . import shape_poly, sharding_type
from .core import (PARAM_TYPES, PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, JaxprcError, JaxprTypeError,
                   Literal, RuleNotPrinted, ShapedArray, SourceInfo, Thunk, Var)
from .effects import Effect, eqn_effects, format_effects
from .host_callback import bind_callbacks
from .params import ParamError
from .verify import infer_out_avals


MAX_PARAM_NESTING = 64


class ParseError(JaxprcError):
    """Malformed or ill-typed program text, located at ``line`` and ``column`` (1-based)."""

    def __init__(self, message: str, line: int, column: int, text: str):
        lines = text.splitlines() or [""]
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        src, caret = _excerpt(src, column - 1)
        super().__init__(f"line {line}, column {column}: {_clip(message, _EXCERPT)}\n{src}\n{' ' * caret}^")
        self.line, self.column = line, column


_EXCERPT = 160   # characters of the offending line a message quotes


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _excerpt(src: str, col: int) -> tuple[str, int]:
    """At most ``_EXCERPT`` characters of ``src`` around column ``col`` (0-based), and the
    caret's position in that excerpt; long lines are cut with '...' on either side."""
    if len(src) <= _EXCERPT:
        return src, col
    start = max(0, min(col - _EXCERPT // 2, len(src) - _EXCERPT))
    head = "..." if start > 0 else ""
    body = src[start:start + _EXCERPT]
    tail = "..." if start + _EXCERPT < len(src) else ""
    return head + body + tail, len(head) + col - start


class _Located(Exception):
    """Raised inside the parser's callbacks; ``parse`` turns it into a ParseError."""

    def __init__(self, token, what: str, expected: str):
        super().__init__(what)
        self.token, self.what, self.expected = token, what, expected


def _fail(token, what: str, expected: str):
    raise _Located(token, what, expected)


# --------------------------------------------------------------- syntax bits

class _VarRef:
    __slots__ = ("token",)

    def __init__(self, token):
        self.token = token


def _source_info(token) -> SourceInfo:
    """``loc("file.py":12:4)`` -> its SourceInfo."""
    quoted, line, column = str(token)[4:-1].rsplit(":", 2)
    return SourceInfo(json.loads(quoted), int(line), column=int(column))


class _LiteralRef:
    __slots__ = ("literal", "token")

    def __init__(self, literal, token):
        self.literal, self.token = literal, token


class _EqnSyntax:
    __slots__ = ("binders", "prim", "params", "args", "effects", "location")

    def __init__(self, binders, prim, params, args, effects, location=None):
        self.binders, self.prim, self.params, self.args = binders, prim, params, args
        self.effects, self.location = effects, location


class _Effects(list):
    """The ``!{...}`` of an equation: its effect name tokens."""


class _Params(list):
    pass


class _Reference:
    """An ``@name`` param, until the definitions after the program say what it is."""
    __slots__ = ("name", "token")

    def __init__(self, name: str, token):
        self.name, self.token = name, token


def _holds_reference(value) -> bool:
    return isinstance(value, _Reference) or (isinstance(value, tuple)
                                              and any(_holds_reference(x) for x in value))


class _DimsHeader:
    """The ``dims b, h where b >= 2, ...`` line of a program with symbolic dimensions."""

    def __init__(self, names: frozenset, scope: shape_poly.SymbolicScope):
        self.names, self.scope = names, scope

    def dims(self, token, text: str) -> tuple:
        """The dimensions written in ``text`` (a type's sizes or a `...` param)."""
        try:
            dims = shape_poly.parse_dims(text, self.scope)
        except ValueError as e:
            _fail(token, str(e), "sizes that are ints or expressions of the declared dimension variables")
        undeclared = shape_poly.free_vars(dims) - self.names
        if undeclared:
            _fail(token, f"undeclared dimension variable '{min(undeclared)}'",
                  f"one declared in the program's dims line ({', '.join(sorted(self.names))})")
        return dims


_DIMS_LINE = re.compile(r"(\s*(?:#[^\n]*\n\s*)*)dims\b([^\n]*)")


def _dims_header(text: str):
    """The program's dims header and the text with that line blanked (positions unchanged)."""
    m = _DIMS_LINE.match(text)
    if m is None:
        return None, text
    line = text[:m.start(2)].count("\n") + 1
    parts = re.split(r"\bwhere\b", m.group(2), maxsplit=1)
    names_text, where = parts[0], (parts[1] if len(parts) == 2 else "")
    names = [n.strip() for n in names_text.split(",")]
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z_]\w*", n) or n in shape_poly.FUNCTIONS]
    if bad:
        raise ParseError(f"malformed dims line: '{bad[0]}' is not a dimension variable name; expected "
                         "dims b, h where b >= 2, ...", line, 1, text)
    try:
        scope = shape_poly.SymbolicScope(shape_poly.split_top_level(where) if where.strip() else ())
    except ValueError as e:
        raise ParseError(f"malformed dims line: {e}", line, 1, text) from None
    unknown = shape_poly.constraint_vars(scope) - set(names)
    if unknown:
        raise ParseError(f"malformed dims line: constraint on undeclared dimension variable "
                         f"'{min(unknown)}'", line, 1, text)
    blank = " " * (m.end() - m.end(1))
    return _DimsHeader(frozenset(names), scope), text[:m.end(1)] + blank + text[m.end():]


_MESH_LINE = re.compile(r"(\s*(?:#[^\n]*\n\s*)*)mesh\b([^\n]*)")
_MESH_AXIS = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*(\d+)\s*(?::\s*(\w+)\s*)?")


def _mesh_header(text: str):
    """The program's ``mesh x=2, y=4`` line (the mesh its types' shardings name; an axis is
    Explicit unless written ``z=2:Auto``), and the text with that line blanked."""
    m = _MESH_LINE.match(text)
    if m is None:
        return None, text
    line = text[:m.start(2)].count("\n") + 1
    names, sizes, types = [], [], []
    for part in m.group(2).split(","):
        axis = _MESH_AXIS.fullmatch(part)
        kind = axis and (axis.group(3) or "Explicit")
        if axis is None or kind not in sharding_type.AxisType.__members__:
            raise ParseError(f"malformed mesh line: '{part.strip()}'; expected mesh x=2, y=4 (an axis that is "
                             "not Explicit written z=2:Auto or z=2:Manual)", line, 1, text)
        names.append(axis.group(1)); sizes.append(int(axis.group(2)))
        types.append(sharding_type.AxisType[kind])
    try:
        mesh = sharding_type.AbstractMesh(sizes, names, types)
    except ValueError as e:
        raise ParseError(f"malformed mesh line: {e}", line, 1, text) from None
    blank = " " * (m.end() - m.end(1))
    return mesh, text[:m.end(1)] + blank + text[m.end():]


def _split_shardings(token, dims: str, mesh):
    """A type's sizes text without its ``@axes`` suffixes, and the axes of each dimension."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(dims + ","):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            pieces.append(dims[start:i]); start = i + 1
    if "@" not in dims:
        return dims, None
    if mesh is None:
        _fail(token, f"a sharded type '{token}' in a program without a mesh line",
              "a first line declaring the mesh its types name: mesh x=2, y=4")
    sizes, axes = [], []
    for piece in pieces:
        size, _, names = piece.partition("@")
        names = names.strip()
        if names.startswith("(") and names.endswith(")"):
            names = names[1:-1]
        named = tuple(n.strip() for n in names.split(",")) if names else ()
        unknown = [n for n in named if n not in mesh.axis_names]
        if unknown or (names and not all(named)):
            _fail(token, f"mesh axis '{unknown[0] if unknown else names}' in type '{token}'",
                  f"axes of the program's mesh ({', '.join(mesh.axis_names)})")
        sizes.append(size)
        axes.append(named)
    return ",".join(sizes), axes


_PLAIN_SIZES = re.compile(r"[0-9,\s]*")


def parse_type(token, header: _DimsHeader | None = None, mesh=None) -> ShapedArray:
    """The ShapedArray a TYPE token (``f32[3,4]``, ``~i32[]`` when weakly typed, ``f32[b,4]`` with
    dimension variables declared in ``header``, ``f32[8@x,4]`` split over axes of ``mesh``,
    ``f32[4]{V:x}`` varying over manual axis x) denotes."""
    text = str(token)
    weak = text.startswith("~")
    base, _, varying = text.partition("{V:")
    name, dims = base.lstrip("~")[:-1].split("[", 1)
    dims, axes = _split_shardings(token, dims, mesh)
    aval = _parse_unsharded(token, text, name, dims, weak, header)
    if varying:            # the manual axes it varies over: {V:x} or {V:(x,y)}
        aval = aval.update(vma=varying[:-1].strip("()").split(","))
    if axes is None:
        return aval
    try:
        return aval.update(sharding=sharding_type.NamedSharding(mesh, sharding_type.spec_of(axes)))
    except (ValueError, sharding_type.DuplicateSpecError) as e:
        _fail(token, f"the sharding of type '{text}': {e}", "mesh axes that split the dimensions evenly, each once")


def _parse_unsharded(token, text: str, name: str, dims: str, weak: bool, header) -> ShapedArray:
    dtype = dt.FROM_SHORT_NAME.get(name)
    if dtype is None:
        _fail(token, f"unknown dtype '{name}'", "one of " + ", ".join(dt.FROM_SHORT_NAME))
    if not _PLAIN_SIZES.fullmatch(dims):
        if header is None:
            _fail(token, f"symbolic shape in type '{text}' of a program without a dims line",
                  "a first line declaring its dimension variables: dims b, h where b >= 2")
        return ShapedArray(header.dims(token, dims), dtype, weak)
    dims = [d.strip() for d in dims.split(",")] if dims.strip() else []
    if any(not d for d in dims):
        _fail(token, f"malformed shape in type '{text}'", "comma-separated sizes like f32[3,4]")
    shape = tuple(_int(token, d) for d in dims)
    if any(d >= 2**63 for d in shape) or math.prod(shape) >= 2**63:   # sizes are int64 in XLA
        _fail(token, f"type '{text}' is too large", "fewer than 2**63 elements")
    if dtype == dt.token and (shape or weak):
        _fail(token, f"a token of type '{text}'", "token[] (tokens are 0-d and strongly typed)")
    return ShapedArray(shape, dtype, weak)


_MAX_INT_DIGITS = 400   # far beyond any dtype or size; Python refuses to read ints past 4300


def _int(token, text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        _fail(token, f"an integer of {len(text.lstrip('-'))} digits", f"at most {_MAX_INT_DIGITS} digits")
    return int(text)


def parse_scalar(token, dtype: np.dtype):
    """The value of a scalar token as ``dtype``; an error when the dtype cannot hold it."""
    kind, text = token.type, str(token)
    if dt.is_bool(dtype):
        if kind not in ("TRUE", "FALSE"):
            _fail(token, f"'{text}' is not a bool", "True or False")
        return np.bool_(kind == "TRUE")
    if dt.is_int(dtype):
        if kind != "INT":
            _fail(token, f"'{text}' is not an integer", f"an integer for dtype {dt.short_name(dtype)}")
        info = dt.iinfo(dtype)
        if not info.min <= _int(token, text) <= info.max:
            _fail(token, f"{text} is out of range for {dt.short_name(dtype)}",
                  f"an integer in [{info.min}, {info.max}]")
        return np.asarray(int(text), dtype)[()]
    if dt.is_inexact(dtype) and kind in ("INT", "FLOAT", "COMPLEX"):
        if kind == "COMPLEX" and not dt.is_complex(dtype):
            _fail(token, f"complex value {text} for a real dtype", f"a float for {dt.short_name(dtype)}")
        py = complex(text) if kind == "COMPLEX" else float(_int(token, text) if kind == "INT" else text)
        with np.errstate(over="ignore"):
            value = np.asarray(py, dtype)[()]
        written_infinite = "inf" in text or "nan" in text
        if not written_infinite and not np.isfinite(value):
            _fail(token, f"{text} overflows {dt.short_name(dtype)}", "a finite value in range")
        return value
    _fail(token, f"'{text}' is not a value of dtype {dt.short_name(dtype)}",
          f"a {dt.short_name(dtype)} value")


def _python_value(v):
    """Param values: scalar tokens become Python scalars."""
    if not isinstance(v, lark.Token):
        return v
    if v.type == "INT":
        return _int(v, str(v))
    return {"FLOAT": float, "COMPLEX": complex, "TRUE": lambda _: True,
            "FALSE": lambda _: False}[v.type](str(v))


# ---------------------------------------------------------------- callbacks

class _Builder(lark.Transformer):
    """Builds IR bottom-up while the LALR parser reduces (no parse tree)."""

    def __init__(self):
        super().__init__()
        self.reset()

    def reset(self, header: _DimsHeader | None = None, mesh=None):
        self.header = header                             # dimension variables (symbolic shapes)
        self.mesh = mesh                                 # the mesh sharded types name
        self.references: list[_Reference] = []           # in text order
        self.pending: list[tuple[Eqn, _EqnSyntax]] = []  # equations holding references
        self.written: list[tuple[Eqn, _EqnSyntax]] = []  # every equation, its effects checked last
        self.definitions: dict[str, ClosedJaxpr | None] = {}   # rules (None: unprinted)
        self.shared: dict[str, ClosedJaxpr] = {}         # shared jaxprs
        self.thunks: dict[str, Thunk] = {}
        self.inside: dict[str, list[_Reference]] = {}    # definition name -> references in its body
        self.resolving: list[str] = []                   # shared jaxprs being resolved, outermost first
        self.resolved: set[str] = set()
        self.nesting: dict[int, tuple[object, int]] = {}   # id -> (tuple or record, its depth)

    def _nested(self, value, items):
        """``value`` (a tuple or record of ``items``), its nesting depth recorded, without recursion."""
        depth = 1 + max((self.nesting[id(x)][1] for x in items if id(x) in self.nesting), default=0)
        self.nesting[id(value)] = (value, depth)
        return value

    def _check_nesting(self, name_token, value):
        entry = self.nesting.get(id(value))
        if entry is not None and entry[1] > MAX_PARAM_NESTING:
            _fail(name_token, f"param '{name_token}' nests tuples {entry[1]} deep",
                  f"a value nested at most {MAX_PARAM_NESTING} deep")

    # -- atoms and types ----------------------------------------------------
    def binder(self, c):
        return c[0], c[1], parse_type(c[1], self.header, self.mesh)

    binders = list

    def var(self, c):
        return _VarRef(c[0])

    def literal(self, c):
        token, type_token = c
        aval = parse_type(type_token, self.header, self.mesh)
        if aval.shape != ():
            _fail(type_token, f"literal of non-scalar type {aval.str_short()}", "a scalar type like f32[]")
        return _LiteralRef(Literal(parse_scalar(token, aval.dtype), aval), token)

    def scalar(self, c):
        return c[0]

    # -- params ---------------------------------------------------------------
    def param(self, c):
        self._check_nesting(c[0], c[1])
        return c[0], _python_value(c[1])

    def params(self, c):
        return _Params(c)

    def string(self, c):
        try:
            return json.loads(str(c[0]), strict=False)   # raw control characters are allowed
        except json.JSONDecodeError as e:
            _fail(c[0], f"malformed string ({e.msg})", 'a JSON-style quoted string like "a\\n"')

    def none(self, c):
        return None

    def aval(self, c):
        return parse_type(c[0], self.header, self.mesh)

    def symbolic_dim(self, c):
        if self.header is None:
            _fail(c[0], f"symbolic dimension {c[0]} in a program without a dims line",
                  "a first line declaring its dimension variables: dims b, h where b >= 2")
        dims = self.header.dims(c[0], str(c[0])[1:-1])
        if len(dims) != 1:
            _fail(c[0], f"{c[0]} is not one dimension", "one expression like `2*b+1`")
        return dims[0]

    def tuple(self, c):
        return self._nested(tuple(_python_value(x) for x in c), c)

    def dtype(self, c):
        d = dt.FROM_SHORT_NAME.get(str(c[0]))
        if d is None:
            _fail(c[0], f"unknown param value '{c[0]}'",
                  "a dtype (f32, i32, ...), a number, a quoted string, a tuple, an enum or a jaxpr")
        return d

    def _param_type(self, token):
        cls = PARAM_TYPES.get(str(token))
        if cls is None:
            _fail(token, f"unknown param type '{token}'",
                  "a registered param type: " + (", ".join(sorted(PARAM_TYPES)) or "none registered"))
        return cls

    def enum(self, c):
        cls = self._param_type(c[0])
        try:
            return cls[str(c[1])]
        except (KeyError, TypeError):
            _fail(c[1], f"'{c[1]}' is not a member of {c[0]}",
                  "one of " + ", ".join(getattr(cls, "__members__", ())))

    def field(self, c):
        self._check_nesting(c[0], c[1])
        return c[0], _python_value(c[1])

    def record(self, c):
        cls = self._param_type(c[0])
        fields = [f for f in c[1:] if f is not None]
        names = [str(t) for t, _ in fields]
        expected = list(getattr(cls, "_fields", ()))
        if names != expected:
            _fail(fields[0][0] if fields else c[0], f"{c[0]} given fields ({', '.join(names)})",
                  f"fields ({', '.join(expected)}) in that order")
        return self._nested(cls(**{str(t): v for t, v in fields}), [v for _, v in fields])

    def reference(self, c):
        ref = _Reference(str(c[0])[1:], c[0])
        self.references.append(ref)
        return ref

    def opaque(self, c):
        _fail(c[0], f"opaque value {c[0]} cannot be read back (a Python callable without a jaxpr)",
              "a value with a text form")

    # -- constants ------------------------------------------------------------
    def list_value(self, c):
        return [x for x in c if x is not None]

    def bytes_value(self, c):
        return c[0]

    def const(self, c):
        return c[0], c[1]

    def consts(self, c):
        return c

    # -- equations and jaxprs -------------------------------------------------
    def lhs(self, c):
        return c

    def no_outputs(self, c):
        return []

    def effects(self, c):
        return _Effects(t for t in c if t is not None)

    def eqn(self, c):
        binders, prim, rest = c[0], c[1], c[2:]
        location = None
        if rest and isinstance(rest[-1], lark.Token) and rest[-1].type == "LOCATION":
            location = _source_info(rest.pop())
        effects = rest.pop() if rest and isinstance(rest[-1], _Effects) else None
        params = rest[0] if rest and isinstance(rest[0], _Params) else _Params()
        args = rest[1:] if rest and isinstance(rest[0], _Params) else rest
        return _EqnSyntax(binders, prim, params, args, effects, location)

    def eqns(self, c):
        return c

    def outs(self, c):
        return c

    def closed_jaxpr(self, c):
        _, constbinders, inbinders, eqns, outs = c[:5]
        trailer = c[5] if len(c) > 5 else None
        env: dict[str, tuple[Var, lark.Token]] = {}

        def bind(binder) -> Var:
            tok, _, aval = binder
            if str(tok) in env:
                first = env[str(tok)][1]
                _fail(tok, f"variable '{tok}' is bound twice (first at line {first.line}, column "
                      f"{first.column})", "a fresh name")
            v = Var(aval)
            env[str(tok)] = (v, tok)
            return v

        def resolve(atom):
            if isinstance(atom, _LiteralRef):
                return atom.literal
            entry = env.get(str(atom.token))
            if entry is None:
                _fail(atom.token, f"undefined variable '{atom.token}'",
                      "a variable bound earlier in this jaxpr (sub-jaxprs see only their own binders)")
            return entry[0]

        constvars = [bind(b) for b in constbinders]
        invars = [bind(b) for b in inbinders]
        built = [self._equation(e, resolve, bind) for e in eqns]
        jaxpr = Jaxpr(constvars, invars, [resolve(a) for a in outs], built)
        return ClosedJaxpr(jaxpr, self._const_values(constbinders, trailer))

    def _equation(self, e: _EqnSyntax, resolve, bind) -> Eqn:
        prim = PRIMITIVES.get(str(e.prim))
        if prim is None:
            _fail(e.prim, f"unknown primitive '{e.prim}'", "the name of a registered primitive")
        params = {}
        for tok, value in e.params:
            if str(tok) in params:
                _fail(tok, f"param '{tok}' given twice", "each param once")
            params[str(tok)] = value
        invars = [resolve(a) for a in e.args]
        deferred = any(_holds_reference(v) for v in params.values())
        if not deferred:
            self._check_types(prim, invars, params, e)
        eqn = Eqn(prim, invars, [bind(b) for b in e.binders], params, e.location)
        self.written.append((eqn, e))
        if deferred:        # its typing rule may need a definition that comes later
            self.pending.append((eqn, e))
        return eqn

    @staticmethod
    def _check_types(prim, invars, params, e: _EqnSyntax) -> None:
        """The binders' declared types are those the primitive's typing rule gives."""
        try:
            out_avals = infer_out_avals(prim, [a.aval for a in invars], params)
        except ParamError as err:       # located at the offending param's name
            at = next((tok for tok, _ in e.params if str(tok) == err.param), e.prim)
            _fail(at, err.what, err.expected)
        except (JaxprTypeError, NotImplementedError) as err:
            _fail(e.prim, f"{prim.name} rejects its operands or params: {err}",
                  "operands and params its typing rule accepts")
        if len(out_avals) != len(e.binders):
            _fail(e.binders[0][0] if e.binders else e.prim,
                  f"{prim.name} has {len(out_avals)} result(s) but {len(e.binders)} binder(s)",
                  f"{len(out_avals)} binder(s) typed ({', '.join(a.str_short() for a in out_avals)})")
        for (tok, type_tok, declared), computed in zip(e.binders, out_avals):
            if declared != computed:
                _fail(type_tok, f"declared type {declared.str_short()} of '{tok}' differs from the type "
                      f"{prim.name} gives", computed.str_short())

    def _const_values(self, binders, trailer):
        """The constvars' values, from the ``with name = value; ...`` trailer."""
        names = [str(b[0]) for b in binders]
        given = {}
        for tok, value in trailer or ():
            if str(tok) not in names:
                _fail(tok, f"'{tok}' is not a constvar of this jaxpr",
                      "one of its constvars (" + ", ".join(names) + ")")
            if str(tok) in given:
                _fail(tok, f"constvar '{tok}' given twice", "one value per constvar")
            given[str(tok)] = (tok, value)
        values = []
        for tok, _, aval in binders:
            if str(tok) not in given:
                _fail(tok, f"constvar '{tok}' has no value",
                      f"'with {tok} = ...' after the jaxpr's closing brace")
            name_tok, value = given[str(tok)]
            values.append(_array_value(name_tok, value, aval))
        return values

    def definition(self, c):
        return c[0], c[1], self.definitions

    def unprinted_definition(self, c):
        return c[0], None, self.definitions

    def shared_definition(self, c):
        return c[0], c[1], self.shared

    def start(self, c):
        main, defs = c[0], c[1:]
        for tok, cj, kind in defs:
            name = str(tok)[1:]
            if name in self.definitions or name in self.shared:
                _fail(tok, f"@{name} is defined twice", "one definition per name")
            kind[name] = cj
        self._assign_references([tok for tok, _, _ in defs])
        for ref in self.references:          # in text order: the first fault is reported
            self._target(ref)
        for eqn, syntax in self.pending:
            eqn.params = {k: self._resolved(v) for k, v in eqn.params.items()}
            self._check_types(eqn.primitive, eqn.invars, eqn.params, syntax)
        # Effects once every reference is resolved: an equation's effects include those of the
        # sub-jaxprs it holds, which may hold references themselves.
        for eqn, syntax in self.written:
            _check_effects(eqn.primitive, eqn.params, syntax)
        return main

    # -- references -----------------------------------------------------------
    def _assign_references(self, def_tokens) -> None:
        """Each definition's references: those between its name and the next definition's."""
        starts = [tok.start_pos for tok in def_tokens]
        for ref in self.references:
            k = bisect.bisect(starts, ref.token.start_pos) - 1
            if k >= 0:
                self.inside.setdefault(str(def_tokens[k])[1:], []).append(ref)

    def _target(self, ref: _Reference):
        """What ``ref`` stands for: a shared jaxpr, or a rule's thunk."""
        if ref.name in self.shared:
            return self._shared_jaxpr(ref)
        if ref.name in self.definitions:
            return self._thunk(ref.name)
        _fail(ref.token, f"undefined reference @{ref.name}",
              f"a definition '@{ref.name} = {{ lambda ... }}' or '@{ref.name} = jaxpr {{ lambda ... }}'")

    def _thunk(self, name: str) -> Thunk:
        thunk = self.thunks.get(name)
        if thunk is None:
            definitions = self.definitions
            thunk = self.thunks[name] = Thunk(lambda: _defined(definitions, name), name=name)
        return thunk

    def _shared_jaxpr(self, ref: _Reference) -> ClosedJaxpr:
        """The shared jaxpr, once the references in its body are known not to lead back to it
        (a rule's thunk ends the search: it is formed lazily)."""
        name = ref.name
        if name in self.resolving:
            cycle = " -> ".join(f"@{n}" for n in self.resolving[self.resolving.index(name):] + [name])
            _fail(ref.token, f"the shared jaxpr @{name} contains itself ({cycle})",
                  "a jaxpr that does not use itself (a recursive rule is written "
                  f"'@{name} = {{ lambda ... }}')")
        if name not in self.resolved:
            self.resolving.append(name)
            for inner in self.inside.get(name, ()):
                self._target(inner)
            self.resolving.pop()
            self.resolved.add(name)
        return self.shared[name]

    def _resolved(self, value):
        """A param with its references replaced by what they stand for."""
        if isinstance(value, _Reference):
            return self._target(value)
        if isinstance(value, tuple) and _holds_reference(value):
            items = [self._resolved(x) for x in value]
            return type(value)._make(items) if hasattr(value, "_fields") else tuple(items)
        return value


def _check_effects(prim, params, e: _EqnSyntax) -> None:
    """The ``!{...}`` written after an equation are the effects its primitive and params have."""
    written = set()
    for tok in e.effects or ():
        if str(tok) not in Effect.__members__:
            _fail(tok, f"unknown effect '{tok}'", "one of " + ", ".join(Effect.__members__))
        written.add(Effect[str(tok)])
    actual = eqn_effects(Eqn(prim, [], [], params))
    if written != actual:
        at = e.effects[0] if e.effects else e.prim
        if actual:
            expected = f"'!{format_effects(actual)}' after the operands of {prim.name}"
        else:
            expected = f"no effects ({prim.name} with these params is pure)"
        _fail(at, f"{prim.name} is written with effects {format_effects(written)}", expected)


def _defined(definitions, name: str) -> ClosedJaxpr:
    cj = definitions[name]
    if cj is None:
        raise RuleNotPrinted(f"the rule @{name} was not printed in the program text (it is nested "
                             "deeper than the printer's definition depth), so this program cannot "
                             "apply it; transform the original program, or print it with a larger "
                             "max_definition_depth")
    return cj


def _array_value(name_tok, value, aval: ShapedArray) -> np.ndarray:
    """A constant's value from its text: scalar token, nested lists of tokens, or b64 bytes."""
    if isinstance(value, lark.Token) and value.type == "BYTES":
        try:
            raw = base64.b64decode(str(value)[4:-1], validate=True)
        except binascii.Error:
            _fail(value, "malformed base64 data", "base64 text")
        if aval.dtype.itemsize == 0:
            return np.zeros(aval.shape, aval.dtype)
        if len(raw) != aval.size * aval.dtype.itemsize:
            _fail(value, f"{len(raw)} bytes of data for a constant of type {aval.str_short()}",
                  f"{aval.size * aval.dtype.itemsize} bytes")
        return np.frombuffer(raw, aval.dtype.newbyteorder("<")).astype(aval.dtype).reshape(aval.shape)
    flat = []

    def walk(v, dims):
        if not dims:
            if isinstance(v, list):
                _fail(name_tok, f"constant '{name_tok}' nests deeper than its type {aval.str_short()}",
                      "a value of that shape")
            flat.append(parse_scalar(v, aval.dtype))
            return
        if not isinstance(v, list) or len(v) != dims[0]:
            _fail(name_tok, f"constant '{name_tok}' does not have the shape of its type "
                  f"{aval.str_short()}", f"nested lists of shape {aval.shape}")
        for x in v:
            walk(x, dims[1:])

    walk(value, aval.shape)
    return np.array(flat, dtype=aval.dtype).reshape(aval.shape)


# ------------------------------------------------------------------- entry

_GRAMMAR = os.path.join(os.path.dirname(__file__), "grammar.lark")
_lock = threading.Lock()
_parser = None
_builder = None

_FRIENDLY = {
    "NAME": "a name", "BINDER": "a binder (name:type)", "PRIM": "a primitive name",
    "TYPE": "a type (like f32[3])", "INT": "an integer", "FLOAT": "a float",
    "COMPLEX": "a complex number", "STRING": "a quoted string", "DEFNAME": "an @name",
    "BYTES": 'b64"..." data', "OPAQUE": "an opaque <...> value", "$END": "end of input",
    "LAMBDA": "'lambda'", "_LET": "'let'", "_IN": "'in'", "_WITH": "'with'", "TRUE": "'True'",
    "FALSE": "'False'", "NONE": "'None'",
}


def _get_parser():
    global _parser, _builder
    if _parser is None:
        _builder = _Builder()
        with open(_GRAMMAR) as f:
            _parser = lark.Lark(f.read(), parser="lalr", lexer="contextual", transformer=_builder,
                                maybe_placeholders=True)
    return _parser, _builder


def _describe_terminals(parser, names) -> str:
    out = set()
    for n in names:
        if n in _FRIENDLY:
            out.add(_FRIENDLY[n])
            continue
        try:
            term = parser.get_terminal(n)
        except KeyError:
            out.add(n)
            continue
        out.add(repr(term.pattern.value) if term.pattern.type == "str" else n.lower())
    return ", ".join(sorted(out))


def _end_position(text: str) -> tuple[int, int]:
    stripped = text.rstrip()
    lines = stripped.split("\n")
    return len(lines), len(lines[-1]) + 1


def parse(text: str, callbacks=None) -> ClosedJaxpr:
    """Read a program printed by ``str(closed_jaxpr)`` (or written by hand) back into IR.

    Host callbacks print by name only: ``callbacks`` maps names to the Python functions they
    stand for (``ir.host_callback.bind_callbacks``); unbound ones fail when the program runs.
    """
    program = _parse(text)
    if callbacks:
        bind_callbacks(program, callbacks)
    return program


def _parse(text: str) -> ClosedJaxpr:
    with _lock:                 # one parser whose transformer holds the state of one parse
        parser, builder = _get_parser()
        mesh, text = _mesh_header(text)
        header, text = _dims_header(text)
        builder.reset(header, mesh)
        try:
            return parser.parse(text)
        except _Located as e:
            raise ParseError(f"{e.what}; expected {e.expected}", e.token.line, e.token.column,
                             text) from None
        except lark.exceptions.UnexpectedToken as e:
            if e.token.type == "$END":
                line, col = _end_position(text)
                what = "unexpected end of input"
            else:
                line, col = e.line, e.column
                what = f"unexpected '{e.token}'"
            expected = _describe_terminals(parser, e.accepts or e.expected)
            raise ParseError(f"{what}; expected {expected}", line, col, text) from None
        except lark.exceptions.UnexpectedCharacters as e:
            raise ParseError(f"unexpected character {e.char!r}; expected "
                             f"{_describe_terminals(parser, e.allowed or ())}", e.line, e.column,
                             text) from None
        except lark.exceptions.UnexpectedEOF as e:
            line, col = _end_position(text)
            raise ParseError(f"unexpected end of input; expected "
                             f"{_describe_terminals(parser, e.expected)}", line, col, text) from None
