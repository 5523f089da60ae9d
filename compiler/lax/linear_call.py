"""``linear_call[callee, transpose_thunk, num_consts, num_res]`` *consts *residuals *linear_args.

A call of a function linear in its linear arguments whose transpose is the
user's: ``callee`` and the jaxpr of ``transpose_thunk`` both take the node's
consts (values either closes over), the residuals, then the linear arguments
(callee) or the cotangents of its results (transpose). Transposing the node
swaps the two; its jvp is the node applied to the tangents (linear), and vmap
maps both with every linear value batched at axis 0, so they stay each
other's transposes. Derivatives with respect to the residuals or consts are an
error (JAX asserts). The user API is ``jaxprc.transformations.custom_derivatives.linear_call``.
"""
from __future__ import annotations

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprTypeError, Primitive, ShapedArray, Thunk, Var
from jaxprc.ir.params import ClosedJaxprParam, Int, Rule
from jaxprc.ir.tracing import close_over_consts, get_aval
from jaxprc.passes.jvp import Zero, is_differentiable, tangent_aval
from jaxprc.passes.transpose import is_undefined_primal
from jaxprc.passes.vmap import axis_size_of, batch_jaxpr, matchaxis

from .control_flow.common import check_count, check_operand_types, check_subjaxpr
from .custom_derivatives import _batch_all_at_front

__all__ = ["linear_call_p"]

linear_call_p = Primitive("linear_call")
linear_call_p.multiple_results = True
linear_call_p.def_params(callee=ClosedJaxprParam(), transpose_thunk=Rule(), num_consts=Int(min=0),
                         num_res=Int(min=0))


@linear_call_p.def_abstract_eval
def _linear_call_abstract_eval(*avals, callee, transpose_thunk, num_consts, num_res):
    check_subjaxpr("linear_call", "callee", callee)
    check_count("linear_call", "num_consts", num_consts, len(avals))
    check_count("linear_call", "num_res", num_res, len(avals) - num_consts)
    if not callable(transpose_thunk):
        raise JaxprTypeError(f"linear_call: param transpose_thunk must be a thunk, got "
                             f"{type(transpose_thunk).__name__}")
    check_operand_types("linear_call", "operands (callee's inputs: consts, residuals, linear arguments)",
                        callee.in_avals, avals)
    return list(callee.out_avals)


def _linear_call_lowering(ctx, *args, callee, **_):
    return ctx.lower_jaxpr(callee, *args)


mlir.register_lowering(linear_call_p, _linear_call_lowering)


class LinearCallResidualError(TypeError):
    """A derivative of a linear_call with respect to its residuals or closed-over values."""


def _residual_error(what: str) -> LinearCallResidualError:
    return LinearCallResidualError(
        f"linear_call: {what} with respect to residual_args (or values the linear function closes "
        "over) is not supported: the function is linear only in linear_args, and linear_call defines "
        "no derivative in the residuals. Pass those values as linear_args, or stop their gradient.")


def _as_operand(t, aval: ShapedArray):
    """A linear operand from a tangent or cotangent: zeros where it is ``Zero`` (of the primal's
    dtype for integer values, whose tangents are float0)."""
    from jaxprc import lax
    if isinstance(t, Zero) or get_aval(t).dtype == dt.float0:
        return lax.full(aval.shape, 0, aval.dtype)
    return t


def _linear_call_jvp(primals, tangents, *, callee, transpose_thunk, num_consts, num_res):
    n_fixed = num_consts + num_res
    if any(not isinstance(t, Zero) for t in tangents[:n_fixed]):
        raise _residual_error("differentiation")
    params = dict(callee=callee, transpose_thunk=transpose_thunk, num_consts=num_consts, num_res=num_res)
    outs = linear_call_p.bind(*primals, **params)
    lin_avals = callee.in_avals[n_fixed:]
    touts = linear_call_p.bind(*primals[:n_fixed], *map(_as_operand, tangents[n_fixed:], lin_avals), **params)
    return outs, [t if is_differentiable(a) else Zero(tangent_aval(a)) for t, a in zip(touts, callee.out_avals)]


ad.primitive_jvps[linear_call_p] = _linear_call_jvp


def _linear_call_t(cts, *args, callee, transpose_thunk, num_consts, num_res):
    n_fixed = num_consts + num_res
    if any(is_undefined_primal(x) for x in args[:n_fixed]):
        raise _residual_error("transposition")
    # values the transpose closes over (a rule formed lazily may keep some) lead the new node's
    # operands; the callee, its transpose now, takes and ignores them
    transpose, t_consts = close_over_consts(transpose_thunk())
    t_avals = [Var(get_aval(c)) for c in t_consts]
    j = callee.jaxpr
    back = ClosedJaxpr(Jaxpr(j.constvars, t_avals + j.invars, j.outvars, j.eqns), callee.consts)
    cts = list(map(_as_operand, cts, callee.out_avals))
    outs = linear_call_p.bind(*t_consts, *args[:n_fixed], *cts, callee=transpose,
                              transpose_thunk=Thunk(lambda: back, name=transpose_thunk.name + "_transpose"),
                              num_consts=len(t_consts) + num_consts, num_res=num_res)
    # a linear argument known here (a constant offset) gets no cotangent
    return [None] * n_fixed + [ct if is_undefined_primal(x) else None for ct, x in zip(outs, args[n_fixed:])]


ad.primitive_transposes[linear_call_p] = _linear_call_t


def _linear_call_batch(args, dims, *, callee, transpose_thunk, num_consts, num_res):
    size = axis_size_of(args, dims)
    n_fixed = num_consts + num_res
    fixed_dims = list(dims[:n_fixed])
    lin = [matchaxis(x, d, 0, size) for x, d in zip(args[n_fixed:], dims[n_fixed:])]
    n_out = len(callee.out_avals)
    batched_callee, _ = batch_jaxpr(callee, size, fixed_dims + [0] * len(lin), [True] * n_out)

    def batched_transpose():
        return _batch_all_at_front(transpose_thunk(), size, fixed_dims + [0] * n_out)
    outs = linear_call_p.bind(*args[:n_fixed], *lin, callee=batched_callee,
                              transpose_thunk=Thunk(batched_transpose, name=transpose_thunk.name),
                              num_consts=num_consts, num_res=num_res)
    return outs, [0] * n_out


batching.primitive_batchers[linear_call_p] = _linear_call_batch
