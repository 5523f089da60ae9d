"""Initial-style tracing: running Python on tracers records equations into a jaxpr.

There is one kind of trace, the ``JaxprBuilder``. Builders form a stack; a
primitive applied inside a trace is recorded by the innermost builder, and
outside any trace it runs at once (``Primitive.impl``). Values of an outer
trace used by an inner one become constvars of the inner jaxpr, so the
callers of ``trace_to_jaxpr`` (control flow, jit, transformations) can hoist
them into explicit operands.

A builder may know concrete values for its inputs (a transformation applied
outside ``jit`` to concrete arrays). Then ``bool(tracer)`` and friends
evaluate the part of the trace the tracer depends on, op by op, instead of
failing: Python control flow on values works there, as in JAX's eager
transformations.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from . import core
from . import dtypes as dt
from .deep import deep_entry
from .leak_check import check_leaks
from .core import (ClosedJaxpr, Eqn, Jaxpr, JaxprcError, Literal, Primitive, ShapedArray, with_shardings, with_vma,
                   SourceInfo, Var)


class JAXTypeError(JaxprcError, TypeError):
    """JAX's ``jax.errors.JAXTypeError``: base of the type errors specific to tracing."""


class JAXIndexError(JaxprcError, IndexError):
    """JAX's ``jax.errors.JAXIndexError``: base of the index errors specific to tracing."""


class ConcretizationTypeError(JAXTypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnexpectedTracerError(JAXTypeError):
    """A tracer escaped the trace that created it."""


class TracerIntegerConversionError(ConcretizationTypeError):
    pass


class TracerBoolConversionError(ConcretizationTypeError):
    pass


class TracerArrayConversionError(ConcretizationTypeError):
    """``numpy.asarray`` (``__array__``) of a traced value. JAX derives it from JAXTypeError
    alone; here it is also a ConcretizationTypeError, which jaxprc raised for it before."""


# ----------------------------------------------------------- abstract values

# type -> function giving the ShapedArray of a value of that type. Higher
# layers register their array types here (jaxprc.Array).
pytype_aval_mappings: dict[type, Callable[[Any], ShapedArray]] = {}


_VALUE_DTYPES = frozenset(dt.ALL_DTYPES)   # float0 included: tangents of integers


def _value_dtype(x) -> np.dtype:
    """The dtype a numpy value gets; a TypeError for dtypes no jaxprc array holds (strings,
    objects, records) and for non-native byte order (whose bytes XLA would misread)."""
    dtype = dt.canonicalize_dtype(x.dtype)
    if dtype in _VALUE_DTYPES:
        return dtype
    if dtype.newbyteorder("=") in _VALUE_DTYPES:
        raise TypeError(f"numpy value of dtype {dtype.str} (non-native byte order) is not a valid "
                        "jaxprc value: convert it first, e.g. x.astype(x.dtype.newbyteorder('=')).")
    raise TypeError(f"numpy value of dtype {dtype} is not a valid jaxprc value: jaxprc arrays hold "
                    "booleans, integers, floats and complex numbers.")


# type -> function giving a value of that type as the equations that compute it inside a
# trace (a symbolic dimension becomes ``dim_as_value``); higher layers register them.
trace_value_converters: dict[type, Callable[[Any], Any]] = {}


def _ndarray_aval(x: np.ndarray) -> ShapedArray:
    return ShapedArray(x.shape, _value_dtype(x))


# (dtype, weak) -> the type of a scalar: scalars are typed at every use (types are immutable).
_SCALAR_AVALS: dict = {}


def _scalar_of(dtype: np.dtype, weak: bool) -> ShapedArray:
    aval = _SCALAR_AVALS.get((dtype, weak))
    if aval is None:
        aval = _SCALAR_AVALS[(dtype, weak)] = ShapedArray((), dtype, weak)
    return aval


def _scalar_aval(x) -> ShapedArray:
    return _scalar_of(dt.python_scalar_dtype(x), not isinstance(x, bool))


def _generic_aval(x: np.generic) -> ShapedArray:
    return _scalar_of(_value_dtype(x), False)


pytype_aval_mappings.update({np.ndarray: _ndarray_aval, bool: _scalar_aval, int: _scalar_aval,
                             float: _scalar_aval, complex: _scalar_aval})


def get_aval(x) -> ShapedArray:
    """The abstract value of a tracer, array or scalar; TypeError for anything else."""
    t = type(x)
    if t is Tracer:
        return x._var.aval
    fn = pytype_aval_mappings.get(t)
    if fn is not None:
        return fn(x)
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, np.generic):
        return _generic_aval(x)
    if hasattr(t, "__jax_array__"):
        raise ValueError("Triggering __jax_array__() during abstractification is no longer supported. To avoid "
                         "this error, either explicitly convert your object using jax.numpy.array(), or register "
                         "your object as a pytree.")
    if isinstance(x, np.ma.MaskedArray):      # its mask would be silently dropped
        raise ValueError("numpy masked arrays are not supported as direct inputs to JAX functions. "
                         "Use arr.filled() to convert the value to a standard numpy array.")
    for base, fn in pytype_aval_mappings.items():
        if isinstance(x, base):
            return fn(x)
    raise TypeError(f"Argument {x!r} of type {t} is not a valid JAX type: "
                    "expected an array, a numpy scalar, or a Python bool/int/float/complex.")


def is_scalar_constant(x) -> bool:
    """Values recorded inline as Literals: Python and numpy scalars, 0-d numpy arrays."""
    return isinstance(x, (bool, int, float, complex, np.generic)) or (
        type(x) is np.ndarray and x.ndim == 0)


# ------------------------------------------------------------------ tracers

class Tracer:
    """A value being traced: a variable of a live JaxprBuilder."""

    __slots__ = ("_builder", "_var", "__weakref__")
    __array_priority__ = 100

    def __init__(self, builder: "JaxprBuilder", var: Var):
        self._builder = builder
        self._var = var

    aval = property(lambda self: self._var.aval)
    shape = property(lambda self: self._var.aval.shape)
    dtype = property(lambda self: self._var.aval.dtype)
    ndim = property(lambda self: len(self._var.aval.shape))
    size = property(lambda self: self._var.aval.size)
    weak_type = property(lambda self: self._var.aval.weak_type)

    def __repr__(self):
        return self._builder.style.repr(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __hash__(self):
        raise TypeError(f"unhashable type: '{self._builder.style.type_name}'")

    # -- concretization: Python needs a value ---------------------------------
    def _concrete(self, what: str, error: type = ConcretizationTypeError):
        value = self._builder.concretize(self, what, error)
        return np.asarray(value)

    def __bool__(self):
        return bool(self._concrete("bool()", TracerBoolConversionError))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        return int(self._concrete("__index__()", TracerIntegerConversionError))

    def __array__(self, dtype=None, copy=None):
        value = self._concrete("the numpy.ndarray conversion method __array__()", TracerArrayConversionError)
        return np.asarray(value, dtype=dtype)

    def item(self):
        return self._concrete("item()").item()

    def tolist(self):
        return self._concrete("tolist()").tolist()


# ----------------------------------------------------------- source location

_PACKAGE_DIRS: tuple[str, ...] = ()
_STDLIB_FUNCTOOLS = os.path.dirname(os.__file__) + os.sep + "functools.py"
# file name -> whether its frames are the library's own. Every recorded
# equation walks the stack up to the user's frame, so each file is judged once.
_INTERNAL_FILES: dict[str, bool] = {}


def register_internal_dir(path: str) -> None:
    """Frames in files under ``path`` are the library's own, never the user's line."""
    global _PACKAGE_DIRS
    _PACKAGE_DIRS = _PACKAGE_DIRS + (os.path.dirname(os.path.abspath(path)) + os.sep,)
    _INTERNAL_FILES.clear()


register_internal_dir(__file__)


def is_library_file(fname: str) -> bool:
    """Whether ``fname`` is one of the library's own source files (``register_internal_dir``)."""
    return fname.startswith(_PACKAGE_DIRS)


def _is_internal(fname: str) -> bool:
    internal = fname.startswith(_PACKAGE_DIRS) or fname == _STDLIB_FUNCTOOLS or fname.startswith("<frozen")
    _INTERNAL_FILES[fname] = internal
    return internal


# ------------------------------------------------------------- trace state

# Called with True when this thread's trace stack becomes non-empty and with False when it
# empties: jaxlib's C++ jit dispatch keys its cache on it (compiler/cpp_dispatch.py).
tracing_listeners: list = []


def _tracing_changed(tracing: bool) -> None:
    for listener in tracing_listeners:
        listener(tracing)


class TraceState(threading.local):
    """The trace state of one thread (like JAX's thread-local trace state): each thread traces
    on its own, and a thread started inside a trace does not see it.

    ``stack``: the live builders, innermost last. ``builder``: the one ``bind`` records into,
    ``stack[-1]``, or None when there is none or ``compile_time_eval`` is on (then ``bind`` looks
    at the stack itself for traced operands); kept in step with the stack so that ``bind`` reads
    one attribute. ``location.source``: the location recorded for new equations when a pass
    re-emits an existing equation (the original's, not the line that called the pass). It lives
    in a plain per-thread object, so a builder (used only by its own thread) reads it without a
    thread-local look-up on every equation.
    """

    def __init__(self):
        self.stack: list[JaxprBuilder] = []
        self.builder: JaxprBuilder | None = None
        self.compile_time_eval = False
        self.location = _Location()
        self.stand_ins: dict = {}   # id(finished tracer) -> (it, the value standing in for it)

    def _sync(self) -> None:
        self.builder = self.stack[-1] if self.stack and not self.compile_time_eval else None


class _Location:
    __slots__ = ("source", "scope")

    def __init__(self):
        self.source: SourceInfo | None = None
        self.scope = ""          # the open named_scope names, "outer/inner"


trace_state = TraceState()


class standing_in:
    """Within this block, tracers of finished traces in ``pairs`` ``(tracer, value)`` are read as
    their values: a rule called by a pass (a custom_vmap rule) may use values its function closed
    over, which the pass has replayed as new values."""

    def __init__(self, pairs):
        self.pairs = [(t, v) for t, v in pairs if isinstance(t, Tracer)]

    def __enter__(self):
        table = trace_state.stand_ins
        self.saved = [(id(t), table.get(id(t))) for t, _ in self.pairs]
        table.update((id(t), (t, v)) for t, v in self.pairs)

    def __exit__(self, *exc):
        table = trace_state.stand_ins
        for key, old in reversed(self.saved):
            if old is None:
                table.pop(key, None)
            else:
                table[key] = old


class source_info_of:
    """Within this block, recorded equations take ``info`` as their location."""

    __slots__ = ("info", "saved", "location")

    def __init__(self, info: SourceInfo | None):
        self.info = info

    def __enter__(self):
        location = self.location = trace_state.location
        self.saved = location.source
        location.source = self.info

    def __exit__(self, *exc):
        self.location.source = self.saved


class replayed_sources:
    """For a pass replaying equations one by one: ``with replayed_sources() as location:``, then
    ``location.source = eqn.source_info`` before each, so what it emits records that equation's
    location (``source_info_of`` for each equation, without a context object per equation).
    The location in force before the block is restored after it."""

    __slots__ = ("location", "saved")

    def __enter__(self) -> _Location:
        location = self.location = trace_state.location
        self.saved = location.source
        return location

    def __exit__(self, *exc):
        self.location.source = self.saved


def user_source_info() -> SourceInfo | None:
    """Where new equations come from: a pass's override, else the innermost user frame."""
    return trace_state.location.source or _user_frame_info()


def _user_frame_info() -> SourceInfo | None:
    frame = sys._getframe(1)
    internal_files = _INTERNAL_FILES
    while frame is not None:
        code = frame.f_code
        fname = code.co_filename
        internal = internal_files.get(fname)
        if not (_is_internal(fname) if internal is None else internal):
            return SourceInfo(fname, frame.f_lineno, code.co_name, trace_state.location.scope,
                              code=code, lasti=frame.f_lasti)
        frame = frame.f_back
    return None


# ------------------------------------------------------------------ builder

def current_builder() -> "JaxprBuilder | None":
    """The innermost live trace of this thread, or None."""
    stack = trace_state.stack
    return stack[-1] if stack else None


class TracerStyle:
    """How the tracers of one trace present themselves: as JAX's tracer of the transformation
    being traced for (``JitTracer(float32[3])`` here; the transformations' front ends give theirs)."""

    type_name = "DynamicJaxprTracer"    # JAX's class, named by the escaped-tracer error

    def repr(self, tracer: "Tracer") -> str:
        return self.value_repr(tracer.aval, None)

    def value_repr(self, aval: ShapedArray, primal: str | None) -> str:
        """The repr of a value of this trace that is no argument: of type ``aval``, whose
        primal prints as ``primal`` where known."""
        return f"JitTracer({aval})"


JIT_STYLE = TracerStyle()


class JaxprBuilder:
    """Records the equations of one trace and closes them into a ClosedJaxpr."""

    def __init__(self, name: str = "trace", style: TracerStyle = JIT_STYLE):
        self.name = name
        self.style = style
        self.invars: list[Var] = []
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self._const_ids: dict[int, Var] = {}
        self._producer: dict[Var, Eqn] = {}
        self.known: dict[Var, Any] = {}   # concrete values of vars, when the inputs are concrete
        self.live = False
        self._location = trace_state.location   # this thread's: a builder is used by its thread only

    # -- context ------------------------------------------------------------
    def __enter__(self):
        state = trace_state
        self.live = True
        if not state.stack and tracing_listeners:
            _tracing_changed(True)
        state.stack.append(self)
        if not state.compile_time_eval:
            state.builder = self
        return self

    def __exit__(self, *exc):
        state = trace_state
        popped = state.stack.pop()
        state._sync()
        if not state.stack and tracing_listeners:
            _tracing_changed(False)
        assert popped is self, "trace stack corrupted"
        self.live = False

    # -- building -----------------------------------------------------------
    def new_arg(self, aval: ShapedArray, value: Any = None) -> Tracer:
        v = Var(aval)
        self.invars.append(v)
        if value is not None:
            self.known[v] = value
        return Tracer(self, v)

    def to_atom(self, x) -> Var | Literal:
        if isinstance(x, Tracer):
            if x._builder is self:
                return x._var
            if not x._builder.live:
                stand_in = trace_state.stand_ins.get(id(x))
                if stand_in is not None and stand_in[0] is x:
                    return self.to_atom(stand_in[1])
                raise escaped_tracer_error(x, f"It was used in another trace ('{self.name}').")
            return self._const_var(x, x.aval)
        if isinstance(x, Literal):
            return x
        if is_scalar_constant(x):
            return Literal(x, get_aval(x))
        convert = trace_value_converters.get(type(x))
        if convert is not None:
            return self.to_atom(convert(x))
        return self._const_var(x, get_aval(x))

    def _const_var(self, value, aval: ShapedArray) -> Var:
        v = self._const_ids.get(id(value))
        if v is None:
            if type(value) is np.ndarray and value.dtype != aval.dtype:
                value = value.astype(aval.dtype)
            v = Var(aval)
            self._const_ids[id(value)] = v
            self.constvars.append(v)
            self.consts.append(value)
            if not isinstance(value, Tracer):
                self.known[v] = value
        return v

    def add_eqn(self, prim: Primitive, args: Sequence[Any], params: dict):
        # Run for every equation traced: the common cases are written out (tracers of this
        # trace as operands, one result) rather than through the general helpers.
        invars = [a._var if type(a) is Tracer and a._builder is self else self.to_atom(a) for a in args]
        rule = prim.abstract_eval_rule
        if rule is None:
            prim.abstract_eval()            # raises, naming the primitive
        avals = [a.aval for a in invars]
        out = rule(*avals, **params)
        for a in avals:     # a loop, not any(): no Python call per equation
            if type(a) is ShapedArray and a.vma:
                out = with_vma(prim, out, avals, params)
                break
        for a in avals:
            if type(a) is ShapedArray and a.sharding_in_type is not None:
                out = with_shardings(prim, out, avals, params)
                break
        return self._record(prim, invars, params, self._location.source or _user_frame_info(), out)

    def _record(self, prim: Primitive, invars: list, params: dict, info, out):
        """Append the equation with outputs of types ``out`` (one type, or a list when
        ``prim.multiple_results``); returns its tracers (one tracer, or a list)."""
        if not prim.multiple_results:
            v = Var(out)
            eqn = Eqn(prim, invars, (v,), params, info)
            self.eqns.append(eqn)
            self._producer[v] = eqn
            return Tracer(self, v)
        outvars = [Var(a) for a in out]
        eqn = Eqn(prim, invars, outvars, params, info)
        self.eqns.append(eqn)
        for v in outvars:
            self._producer[v] = eqn
        return [Tracer(self, v) for v in outvars]

    def copy_eqn(self, eqn: Eqn, args: Sequence[Any]):
        """Record ``eqn`` again on operands of exactly its operands' types (tracers of this trace
        or literals): its output types still hold, so its typing rule is not run again."""
        invars = [a if type(a) is Literal else a._var for a in args]
        info = eqn.source_info if eqn.source_info is not None else user_source_info()
        prim = eqn.primitive
        out = [v.aval for v in eqn.outvars] if prim.multiple_results else eqn.outvars[0].aval
        return self._record(prim, invars, eqn.params, info, out)

    def build(self, outs: Sequence[Any]) -> ClosedJaxpr:
        outvars = []
        for i, x in enumerate(outs):
            try:
                outvars.append(self.to_atom(x))
            except TypeError:
                src = user_source_info()     # the user's line that started this trace
                called = f" (called at {src})" if src else ""
                raise TypeError(
                    f"function {self.name}{called} returned a value of type {type(x)}, which is not a "
                    f"valid JAX type: output {i} is {x!r}. Traced functions must return arrays, scalars, "
                    "or pytrees of them (return other values from outside the transformation, or "
                    "register the class as a pytree).") from None
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        return ClosedJaxpr(jaxpr, self.consts)

    # -- concretization -----------------------------------------------------
    def concretize(self, tracer: Tracer, what: str, error: type):
        """The concrete value of ``tracer``, evaluating what it depends on; else ``error``."""
        if not tracer._builder.live:
            raise escaped_tracer_error(tracer, f"{what} was called on it.")
        target = tracer._var
        if target in self.known:
            return self.known[target]
        # Walk the producers back from the target; collect the equations to run.
        needed, stack, seen = [], [target], set()
        while stack:
            v = stack.pop()
            if v in seen or v in self.known:
                continue
            seen.add(v)
            eqn = self._producer.get(v)
            if eqn is None:
                idx = self.constvars.index(v) if v in self.constvars else None
                outer = self.consts[idx] if idx is not None else None
                if isinstance(outer, Tracer):
                    self.known[v] = outer._builder.concretize(outer, what, error)
                    continue
                raise error(_concretization_message(tracer, what))
            needed.append(eqn)
            stack.extend(a for a in eqn.invars if isinstance(a, Var))
        for eqn in sorted(set(needed), key=self.eqns.index):
            if all(v in self.known for v in eqn.outvars):
                continue
            args = [a.val if isinstance(a, Literal) else self.known[a] for a in eqn.invars]
            with no_trace():
                outs = eqn.primitive.bind(*args, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                self.known[v] = o
        return self.known[target]


def type_str(aval) -> str:
    """``float32[3,4]``: a type as JAX's messages write it."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def escaped_tracer_error(tracer: Tracer, use: str) -> UnexpectedTracerError:
    """JAX's error for a tracer used after its trace ended: its type, the function being traced,
    where the value was created, and ``use``: how it was used."""
    aval = tracer.aval
    eqn = tracer._builder._producer.get(tracer._var)
    created = (f"The leaked intermediate value was created on line {eqn.source_info}."
               if eqn is not None and eqn.source_info is not None
               else "The leaked value was an argument (or a constant) of the traced function.")
    return UnexpectedTracerError(
        "Encountered an unexpected tracer. A function transformed by JAX had a side effect, allowing for a "
        f"reference to an intermediate value with type {type_str(aval)} "
        f"wrapped in a {tracer._builder.style.type_name} to escape the scope of the transformation.\n"
        "JAX transformations require that functions explicitly return their outputs, and disallow saving "
        "intermediate values to global state.\n"
        f"The function being traced when the value leaked was {tracer._builder.name}.\n"
        f"------------------------------\n{created}\n------------------------------\n{use} "
        "Return the value from the transformed function instead of keeping it in a global or a closure.")


def _headline(what: str, type_str: str) -> str:
    """JAX's first line for the conversion ``what`` of a traced array of type ``type_str``."""
    if what == "bool()":
        return f"Attempted boolean conversion of traced array with shape {type_str}."
    if what == "__index__()":
        return f"The __index__() method was called on traced array with shape {type_str}"
    if what.startswith("the numpy.ndarray conversion method"):
        return f"The numpy.ndarray conversion method __array__() was called on traced array with shape {type_str}"
    headline = f"Abstract tracer value encountered where concrete value is expected: traced array with shape {type_str}"
    if what in ("int()", "float()", "complex()"):
        kind = what[:-2]
        headline += (f"\nThe problem arose with the `{kind}` function. If trying to convert the data type of a "
                     f"value, try using `x.astype({kind})` or `jnp.array(x, {kind})` instead.")
    return headline


def _concretization_message(tracer: Tracer, what: str) -> str:
    src = None
    eqn = tracer._builder._producer.get(tracer._var)
    if eqn is not None and eqn.source_info is not None:
        src = eqn.source_info
    where = f", created at {src}" if src else ", an argument of the traced function"
    here = user_source_info()
    at = f" at {here}" if here else ""
    subject = "T" + what[1:] if what.startswith("the ") else what    # a sentence starts upper-case
    return (f"{_headline(what, type_str(tracer.aval))}\n{subject} was "
            f"called{at} on the traced value {tracer!r}{where}. Under jit (and vmap), values are "
            "abstract: only their shape and dtype are known. Fixes: mark the argument static "
            "(static_argnums / static_argnames) if it is a Python value; use lax.cond, lax.switch, "
            "jnp.where, lax.while_loop or lax.fori_loop instead of Python control flow on traced "
            "values; or compute the value outside the transformed function.")


class no_trace:
    """Evaluate eagerly inside this block, whatever traces are live around it (in this thread)."""

    def __enter__(self):
        state = trace_state
        self._saved = state.stack
        state.stack = []
        state.builder = None
        if self._saved and tracing_listeners:
            _tracing_changed(False)

    def __exit__(self, *exc):
        state = trace_state
        state.stack = self._saved
        state._sync()
        if self._saved and tracing_listeners:
            _tracing_changed(True)


# ---------------------------------------------------------------------- bind

class ensure_compile_time_eval:
    """Within this block, operations on concrete values run at once even inside a trace
    (JAX's ``jax.ensure_compile_time_eval``); operations on traced values are still traced."""

    def __enter__(self):
        state = trace_state
        self.saved = state.compile_time_eval
        state.compile_time_eval = True
        state.builder = None

    def __exit__(self, *exc):
        state = trace_state
        state.compile_time_eval = self.saved
        state._sync()


def bind(prim: Primitive, args: Sequence[Any], params: dict):
    """Apply a primitive: record it in the innermost trace, or evaluate it now."""
    builder = trace_state.builder
    if builder is None:
        for a in args:
            if isinstance(a, Tracer):
                state = trace_state        # under ensure_compile_time_eval, traced operands are traced
                if state.compile_time_eval and state.stack:
                    return state.stack[-1].add_eqn(prim, args, params)
                raise escaped_tracer_error(a, f"It was used outside of any trace, by '{prim.name}'.")
        args = [_literal_value(a) if type(a) is Literal else a for a in args]
        rule = prim.impl_rule
        return rule(*args, **params) if rule is not None else prim.impl(*args, **params)
    return builder.add_eqn(prim, args, params)


def _literal_value(lit: Literal):
    """A literal as an eager value: weak literals of a default dtype become Python scalars again."""
    aval = lit.aval
    if aval.weak_type and type(lit.val.item()) in dt.PYTHON_SCALAR_TYPES:
        py = lit.val.item()
        if dt.python_scalar_dtype(py) == aval.dtype:
            return py
    return lit.val


# ------------------------------------------------------------ trace entry

def _outside_any_trace() -> bool:
    """A trace failing by recursion may be retried on another thread only when this thread is
    tracing nothing else (trace state is per thread)."""
    return not trace_state.stack and not trace_state.compile_time_eval


@deep_entry(retry_if=_outside_any_trace)
def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray], *, name: str = "trace",
                   concrete_args: Sequence[Any] | None = None, style: TracerStyle = JIT_STYLE):
    """Trace ``fun`` (flat list of args -> flat list of outputs) into a ClosedJaxpr.

    The ClosedJaxpr's consts may hold tracers of enclosing traces (values the
    function closed over); callers that nest turn them into operands.
    ``concrete_args``, when given, are the inputs' concrete values, which lets
    Python inspect traced values (see ``JaxprBuilder.concretize``). ``style``: how its tracers
    print (``TracerStyle``).
    """
    builder = JaxprBuilder(name, style)
    with builder:
        values = concrete_args if concrete_args is not None else [None] * len(in_avals)
        args = [builder.new_arg(a, v) for a, v in zip(in_avals, values)]
        with source_info_of(None):   # a freshly traced function records its own lines
            outs = fun(*args)
        closed = builder.build(outs)
    del args, outs                   # this frame's own references
    check_leaks(builder)
    return closed


def close_over_consts(cj: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Move a ClosedJaxpr's consts into leading invars: returns (jaxpr with no consts, consts).

    Control flow and call primitives carry sub-jaxprs without consts; the
    consts become explicit operands, so outer tracers flow as data.
    """
    j = cj.jaxpr
    if not j.constvars:
        return cj, []
    return ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns), []), list(cj.consts)


def _retypes_unchanged(builder: JaxprBuilder, eqn: Eqn, operands) -> bool:
    """Whether binding ``eqn`` on ``operands`` records it with the output types it has: they are
    tracers of ``builder`` or literals of the operand types, and ``bind`` is the generic one."""
    if type(eqn.primitive).bind is not Primitive.bind:
        return False
    for x, v in zip(operands, eqn.invars):
        if type(x) is Literal:
            if x.aval != v.aval:
                return False
        elif type(x) is not Tracer or x._builder is not builder or x._var.aval != v.aval:
            return False
    return True


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args):
    """Evaluate a jaxpr by binding each equation in the current context.

    Inside a trace this inlines the jaxpr into the trace; outside it runs op by op.
    """
    env: dict[Var, Any] = {}
    read = lambda a: a if type(a) is Literal else env[a]   # literals keep their weak type
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    builder = trace_state.builder
    for eqn in jaxpr.eqns:
        operands = list(map(read, eqn.invars))
        if builder is not None and _retypes_unchanged(builder, eqn, operands):
            outs = builder.copy_eqn(eqn, operands)      # inlining: the types are known
        else:
            with source_info_of(eqn.source_info):
                outs = eqn.primitive.bind(*operands, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [a.val if type(a) is Literal else env[a] for a in jaxpr.outvars]


def _primitive_bind(prim: Primitive, *args, **params):
    """``Primitive.bind``: ``bind`` with the common case, recording into a trace, one call shorter."""
    builder = trace_state.builder
    if builder is not None:
        return builder.add_eqn(prim, args, params)
    return bind(prim, args, params)


core.Primitive.bind = _primitive_bind
