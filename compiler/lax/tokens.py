"""XLA tokens: ``create_token`` (a token with no preconditions) and ``after_all`` (a token that
comes after all of its operands), as JAX has them.

A token is a 0-d value of dtype ``token`` (``token[]`` in text). Inside a program it is
StableHLO's ``!stablehlo.token``; across a program's boundary (a jit's arguments and results,
eager values) it travels as a boolean, like float0, since jaxlib moves no token values between
executions; a token entering a program starts a fresh chain there.
"""
from __future__ import annotations

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray
from jaxprc.ir.tracing import pytype_aval_mappings
from jaxprc.runtime import Token

from .support.operands import aval

__all__ = ["create_token", "after_all", "create_token_p", "after_all_p", "Token"]

_TOKEN = ShapedArray((), dt.token)
pytype_aval_mappings[Token] = lambda _: _TOKEN

create_token_p = Primitive("create_token").def_params()
after_all_p = Primitive("after_all").def_params()


@create_token_p.def_abstract_eval
def _create_token_rule(*operands):
    if operands:
        raise JaxprTypeError(f"create_token takes no operands, got {len(operands)}")
    return _TOKEN


@after_all_p.def_abstract_eval
def _after_all_rule(*operands):
    if any(a.dtype != dt.token for a in operands):
        raise JaxprTypeError("after_all: arguments to after_all must be tokens, got "
                             + ", ".join(a.str_short() for a in operands))
    return _TOKEN


def create_token(_=None):
    """A new token with no preconditions. The argument is ignored (JAX keeps it for backward
    compatibility)."""
    return create_token_p.bind()


def after_all(*operands):
    """A token that comes after every operand (tokens)."""
    if any(aval(x).dtype != dt.token for x in operands):
        raise TypeError("Arguments to after_all must be tokens")
    return after_all_p.bind(*operands)


for _prim in (create_token_p, after_all_p):
    ad.defjvp_zero(_prim)       # tokens have float0 tangents
    _prim.def_impl(lambda *_: Token())     # eager tokens hold nothing: no program to run


def _after_all_batch(args, dims):
    if any(d is not None for d in dims):
        raise ValueError("after_all: tokens cannot be batched (vmap over a token)")
    return after_all_p.bind(*args), None


batching.primitive_batchers[create_token_p] = lambda args, dims: (create_token_p.bind(), None)
batching.primitive_batchers[after_all_p] = _after_all_batch
mlir.register_lowering(create_token_p, lambda ctx: hlo.create_token())
mlir.register_lowering(after_all_p, lambda ctx, *tokens: hlo.after_all(list(tokens)))
