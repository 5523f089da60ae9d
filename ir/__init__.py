"""jaxprc.ir: the language. Types, programs, primitives, tracing, text form, verifier."""
from . import dtypes
from .core import (Atom, ClosedJaxpr, Eqn, Jaxpr, JaxprcError, JaxprTypeError, Literal,
                   PARAM_TYPES, PRIMITIVES, Primitive, param_type, RuleNotPrinted, ShapedArray, SourceInfo,
                   Thunk, Var)
from .tracing import (ConcretizationTypeError, Tracer, UnexpectedTracerError, bind, eval_jaxpr,
                      get_aval, trace_to_jaxpr)
from .equality import alpha_equivalent, structural_hash
from .parser import ParseError, parse
from .printer import pp_jaxpr
from .verify import verify
from .shape_poly import DimExpr, InconclusiveDimensionOperation, SymbolicScope, symbolic_shape
from .effects import Effect
from .host_callback import CallbackUnavailableError, HostCallback, bind_callbacks, program_callbacks
