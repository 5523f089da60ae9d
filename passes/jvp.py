"""Forward-mode differentiation as a pass: f: a -> b  ==>  (a, Ta) -> (b, Tb).

The pass re-traces the program: a new builder gets the primal inputs and the
nonzero tangent inputs, and each equation is replaced by its rule
``jvp_rules[prim](primals, tangents, **params) -> (primal_out, tangent_out)``
(lists for multiple results). Tangents may be ``Zero(aval)``: a symbolic zero
that costs nothing and is only materialised when an output must hold it.
Integer and boolean values have float0 tangents, which are always Zero.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir import lax
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.prims.structural import GatherDimensionNumbers, GatherScatterMode
from jaxprc.ir.tracing import get_aval, source_info_of, trace_to_jaxpr

from . import emit
from .registry import register_pass


# ---------------------------------------------------------------- tangents

class Zero:
    """A symbolic zero tangent (or cotangent) of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> "Zero":
        return Zero(tangent_aval(aval_of(x)))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def aval_of(x) -> ShapedArray:
    """The type of a value, tracer, Literal, Zero or UndefinedPrimal."""
    aval = getattr(x, "aval", None)
    return aval if isinstance(aval, ShapedArray) else get_aval(x)


def is_differentiable(aval: ShapedArray) -> bool:
    return dt.is_inexact(aval.dtype)


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent type: the same for floats, float0 for integers and booleans (as in JAX)."""
    return aval if is_differentiable(aval) else ShapedArray(aval.shape, dt.float0)


def zeros(aval: ShapedArray):
    if aval.dtype == dt.float0:
        raise TypeError(f"cannot materialise a float0 zero of type {aval.str_short()} in a program")
    return emit.zeros(aval)


def instantiate_zeros(t):
    return zeros(t.aval) if isinstance(t, Zero) else t


def add_tangents(a, b):
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return emit.add(a, b)


def literal_value(lit: Literal):
    """A literal as a rule argument: a Python scalar when weakly typed, else a numpy scalar."""
    return lit.val.item() if lit.aval.weak_type else lit.val


# --------------------------------------------------------------- the pass

JvpRule = Callable[..., Any]
jvp_rules: dict = {}


def jvp_eval(jaxpr: Jaxpr, consts: Sequence[Any], primals: Sequence[Any], tangents: Sequence[Any]):
    """Run ``jaxpr`` on primals and tangents in the current trace: (primal outs, tangent outs)."""
    primal_env: dict[Var, Any] = {}
    tangent_env: dict[Var, Any] = {}

    def read_primal(a):
        return literal_value(a) if isinstance(a, Literal) else primal_env[a]

    def read_tangent(a):
        return Zero(tangent_aval(a.aval)) if isinstance(a, Literal) else tangent_env[a]

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v], tangent_env[v] = c, Zero(tangent_aval(v.aval))
    for v, p, t in zip(jaxpr.invars, primals, tangents):
        primal_env[v], tangent_env[v] = p, t
    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        tangents_in = [read_tangent(a) for a in eqn.invars]
        with source_info_of(eqn.source_info):    # what the rule emits keeps the user's line
            if all(isinstance(t, Zero) for t in tangents_in):
                outs = prim.bind(*[a if isinstance(a, Literal) else primal_env[a] for a in eqn.invars],
                                 **eqn.params)
                outs = outs if prim.multiple_results else [outs]
                touts = [Zero(tangent_aval(v.aval)) for v in eqn.outvars]
            else:
                rule = jvp_rules.get(prim)
                if rule is None:
                    raise NotImplementedError(
                        f"Differentiation rule for '{prim.name}' not implemented (jvp pass): no entry in "
                        "jvp_rules, so forward- and reverse-mode derivatives through it are unavailable.")
                outs, touts = rule([read_primal(a) for a in eqn.invars], tangents_in, **eqn.params)
                if not prim.multiple_results:
                    outs, touts = [outs], [touts]
        for v, p, t in zip(eqn.outvars, outs, touts):
            primal_env[v], tangent_env[v] = p, t
    return ([read_primal(a) if isinstance(a, Literal) else primal_env[a] for a in jaxpr.outvars],
            [read_tangent(a) for a in jaxpr.outvars])


def jvp_jaxpr(cj: ClosedJaxpr, nonzeros: Sequence[bool], instantiate: Sequence[bool] | bool,
              primal_values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The jvp of ``cj``: inputs are the primals then the tangents of inputs marked ``nonzeros``;
    outputs are the primal outputs then the tangents of outputs that are nonzero (or instantiated).

    Returns that jaxpr and the nonzero mask of output tangents. Integer outputs never get a
    tangent output (float0 zeros are made by the caller). ``primal_values``, when given, are
    concrete primal inputs, so Python code traced during the pass may inspect values.
    """
    n_out = len(cj.jaxpr.outvars)
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * n_out
    in_avals = cj.in_avals
    nonzeros = [bool(nz) and is_differentiable(a) for nz, a in zip(nonzeros, in_avals)]
    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    out_nonzeros: list[bool] = []

    def fun(*args):
        primals, rest = list(args[:len(in_avals)]), iter(args[len(in_avals):])
        tangents = [next(rest) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, nonzeros)]
        outs, touts = jvp_eval(cj.jaxpr, cj.consts, primals, tangents)
        touts = [instantiate_zeros(t) if inst and is_differentiable(aval_of(t)) else t
                 for t, inst in zip(touts, instantiate)]
        out_nonzeros[:] = [not isinstance(t, Zero) for t in touts]
        return outs + [t for t in touts if not isinstance(t, Zero)]

    concrete = None
    if primal_values is not None:
        concrete = list(primal_values) + [None] * len(tangent_avals)
    out = trace_to_jaxpr(fun, list(in_avals) + tangent_avals, name="jvp", concrete_args=concrete)
    return out, out_nonzeros


def jvp(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: (primals, tangents of every float input) -> (outputs, all tangents)."""
    out, _ = jvp_jaxpr(cj, [True] * len(cj.in_avals), instantiate=True)
    return out


register_pass("jvp", jvp)


# ------------------------------------------------------- rule definitions

def _rule(*names: str):
    """Register a rule under the named primitives (those that exist)."""
    def register(fn):
        for name in names:
            if name in PRIMITIVES:
                jvp_rules[PRIMITIVES[name]] = fn if len(names) == 1 else _bound(fn, PRIMITIVES[name])
        return fn
    return register


def _bound(fn, prim):
    return lambda primals, tangents, **params: fn(prim, primals, tangents, **params)


def _zero_tangent_jvp(prim, primals, tangents, **params):
    outs = prim.bind(*primals, **params)
    avals = [aval_of(o) for o in (outs if prim.multiple_results else [outs])]
    touts = [Zero(tangent_aval(a)) for a in avals]
    return outs, (touts if prim.multiple_results else touts[0])


_rule("sign", "floor", "ceil", "round", "is_finite", "not", "population_count", "clz",
      "stop_gradient", "nextafter", "and", "or", "xor", "shift_left", "shift_right_arithmetic",
      "shift_right_logical", "eq", "ne", "lt", "le", "gt", "ge", "bitcast_convert_type",
      "argmax", "argmin", "iota", "reduce_and", "reduce_or", "reduce_xor")(_zero_tangent_jvp)


def _linear_jvp(prim, primals, tangents, **params):
    """Linear in its first operand, the others (indices) held fixed: the tangent is the op itself."""
    out = prim.bind(*primals, **params)
    return out, prim.bind(instantiate_zeros(tangents[0]), *primals[1:], **params)


_rule("neg", "copy", "real", "imag", "conj", "broadcast_in_dim", "reshape", "transpose", "squeeze",
      "rev", "slice", "reduce_sum", "cumsum", "dynamic_slice", "gather")(_linear_jvp)


def _multilinear_jvp(prim, primals, tangents, **params):
    """Linear in all operands jointly (zeros instantiated): pad, concatenate, ..."""
    out = prim.bind(*primals, **params)
    return out, prim.bind(*map(instantiate_zeros, tangents), **params)


_rule("pad", "concatenate")(_multilinear_jvp)


def _unary(name: str, tangent: Callable):
    """``tangent(t, x, ans)``: the output tangent of a unary function (linear in t)."""
    prim = PRIMITIVES.get(name)

    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        return ans, tangent(t, x, ans, **params)
    if prim is not None:
        jvp_rules[prim] = rule


_SQRT_PI = math.sqrt(math.pi)
_unary("exp", lambda t, x, ans: lax.mul(t, ans))
_unary("exp2", lambda t, x, ans: lax.mul(t, lax.mul(ans, math.log(2.0))))
_unary("log", lambda t, x, ans: lax.div(t, x))
_unary("log1p", lambda t, x, ans: lax.div(t, lax.add(x, 1.0)))
_unary("expm1", lambda t, x, ans: lax.mul(t, lax.add(ans, 1.0)))
_unary("tanh", lambda t, x, ans: lax.mul(t, lax.sub(1.0, lax.mul(ans, ans))))
_unary("logistic", lambda t, x, ans: lax.mul(t, lax.mul(ans, lax.sub(1.0, ans))))
_unary("sin", lambda t, x, ans: lax.mul(t, lax.cos(x)))
_unary("cos", lambda t, x, ans: lax.mul(t, lax.neg(lax.sin(x))))
_unary("tan", lambda t, x, ans: lax.mul(t, lax.add(1.0, lax.mul(ans, ans))))
_unary("asin", lambda t, x, ans: lax.mul(t, lax.rsqrt(lax.sub(1.0, lax.mul(x, x)))))
_unary("acos", lambda t, x, ans: lax.mul(t, lax.neg(lax.rsqrt(lax.sub(1.0, lax.mul(x, x))))))
_unary("atan", lambda t, x, ans: lax.div(t, lax.add(1.0, lax.mul(x, x))))
_unary("sinh", lambda t, x, ans: lax.mul(t, lax.cosh(x)))
_unary("cosh", lambda t, x, ans: lax.mul(t, lax.sinh(x)))
_unary("asinh", lambda t, x, ans: lax.mul(t, lax.rsqrt(lax.add(lax.mul(x, x), 1.0))))
_unary("acosh", lambda t, x, ans: lax.mul(t, lax.rsqrt(lax.mul(lax.sub(x, 1.0), lax.add(x, 1.0)))))
_unary("atanh", lambda t, x, ans: lax.div(t, lax.sub(1.0, lax.mul(x, x))))
_unary("sqrt", lambda t, x, ans: lax.div(t, lax.mul(ans, 2.0)))
_unary("rsqrt", lambda t, x, ans: lax.mul(t, lax.mul(lax.div(ans, x), -0.5)))
_unary("cbrt", lambda t, x, ans: lax.mul(t, lax.mul(lax.integer_pow(ans, -2), 1.0 / 3.0)))
_unary("square", lambda t, x, ans: lax.mul(t, lax.mul(x, 2.0)))


def _abs_tangent(t, x, ans):
    if not dt.is_complex(aval_of(x).dtype):
        return lax.mul(t, lax.sign(x))
    # d|z| = Re(dz conj(z) / |z|), with |z| taken as 1 where z == 0 (JAX's convention)
    safe_ans = lax.select_n(lax.eq(ans, 0.0), ans, lax.full_like(ans, 1))
    factor = lax.div(lax.conj(x), lax.convert_element_type(safe_ans, aval_of(x).dtype))
    return lax.real(lax.mul(t, factor))


_unary("abs", _abs_tangent)
_unary("erf", lambda t, x, ans: lax.mul(t, lax.mul(lax.exp(lax.neg(lax.mul(x, x))), 2.0 / _SQRT_PI)))
_unary("erfc", lambda t, x, ans: lax.mul(t, lax.mul(lax.exp(lax.neg(lax.mul(x, x))), -2.0 / _SQRT_PI)))
_unary("erf_inv", lambda t, x, ans: lax.mul(t, lax.mul(lax.exp(lax.mul(ans, ans)), _SQRT_PI / 2.0)))
_unary("lgamma", lambda t, x, ans: lax.mul(t, lax.digamma(x)))


def _integer_pow_tangent(t, x, ans, *, y):
    if y == 1:
        return t
    return lax.mul(t, lax.mul(lax.integer_pow(x, y - 1) if y != 2 else x, float(y)))


_unary("integer_pow", _integer_pow_tangent)


@_rule("convert_element_type")
def _convert_element_type_jvp(primals, tangents, *, new_dtype, **params):
    (x,), (t,) = primals, tangents
    out = PRIMITIVES["convert_element_type"].bind(x, new_dtype=new_dtype, **params)
    if not dt.is_inexact(new_dtype):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, lax.convert_element_type(t, new_dtype)


def _bilinear(prim, primals, tangents, **params):
    """Products: d(x*y) = dx*y + x*dy, each term the op itself with one tangent operand."""
    (x, y), (tx, ty) = primals, tangents
    out = prim.bind(x, y, **params)
    left = Zero(tangent_aval(aval_of(out))) if isinstance(tx, Zero) else prim.bind(tx, y, **params)
    right = Zero(tangent_aval(aval_of(out))) if isinstance(ty, Zero) else prim.bind(x, ty, **params)
    return out, add_tangents(left, right)


_rule("mul", "dot_general")(_bilinear)


@_rule("add")
def _add_jvp(primals, tangents):
    return lax.add(*primals), add_tangents(*tangents)


@_rule("complex")
def _complex_jvp(primals, tangents):
    """Linear in (re, im) jointly; a zero part is instantiated only when the other is not."""
    out = lax.complex(*primals)
    if all(isinstance(t, Zero) for t in tangents):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, lax.complex(*map(instantiate_zeros, tangents))


@_rule("sub")
def _sub_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return lax.sub(x, y), add_tangents(tx, ty if isinstance(ty, Zero) else lax.neg(ty))


def _scaled(t, factor):
    """t * factor; ``factor=1`` means t itself."""
    return t if isinstance(t, Zero) or (isinstance(factor, int) and factor == 1) else lax.mul(t, factor)


def _binary(name: str, partials: Callable):
    """``partials(x, y, ans) -> (dans/dx, dans/dy)``; the tangent is tx*dx + ty*dy."""
    prim = PRIMITIVES.get(name)

    def rule(primals, tangents, **params):
        (x, y), (tx, ty) = primals, tangents
        ans = prim.bind(x, y, **params)
        dx, dy = partials(x, y, ans)
        return ans, add_tangents(_scaled(tx, dx) if dx is not None else Zero(tangent_aval(aval_of(ans))),
                                 _scaled(ty, dy) if dy is not None else Zero(tangent_aval(aval_of(ans))))
    if prim is not None:
        jvp_rules[prim] = rule


@_rule("div")
def _div_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    ans = lax.div(x, y)
    left = Zero(tangent_aval(aval_of(ans))) if isinstance(tx, Zero) else lax.div(tx, y)
    return ans, add_tangents(left, _scaled(ty, lax.neg(lax.div(ans, y))))


def _pow_partials(x, y, ans):
    # d/dy x**y = log(x) x**y, taken as 0 where x == 0 (as JAX does)
    safe_log = lax.log(lax.select_n(lax.eq(x, 0.0), x, lax.full_like(x, 1)))
    return lax.mul(y, lax.pow(x, lax.sub(y, 1.0))), lax.mul(ans, safe_log)


def _balanced_eq(x, ans, y):
    """1 where x alone attains the extremum, 1/2 on ties, 0 elsewhere (JAX's convention)."""
    one, half, zero = lax.full_like(ans, 1), lax.full_like(ans, 0.5), lax.full_like(ans, 0)
    return lax.select_n(lax.eq(x, ans), zero, lax.select_n(lax.eq(y, ans), one, half))


def _atan2_partials(x, y, ans):
    denom = lax.add(lax.mul(x, x), lax.mul(y, y))
    return lax.div(y, denom), lax.neg(lax.div(x, denom))


def _rem_partials(x, y, ans):
    q = lax.div(x, y)
    return 1, lax.neg(lax.mul(lax.sign(q), lax.floor(lax.abs(q))))


_binary("pow", _pow_partials)
_binary("max", lambda x, y, ans: (_balanced_eq(x, ans, y), _balanced_eq(y, ans, x)))
_binary("min", lambda x, y, ans: (_balanced_eq(x, ans, y), _balanced_eq(y, ans, x)))
_binary("atan2", _atan2_partials)
_binary("rem", _rem_partials)


@_rule("clamp")
def _clamp_jvp(primals, tangents):
    (lo, x, hi), (tlo, tx, thi) = primals, tangents
    out = PRIMITIVES["clamp"].bind(lo, x, hi)
    shape = aval_of(x).shape

    def where(pred, t):
        if isinstance(t, Zero):
            return Zero(tangent_aval(aval_of(out)))
        if aval_of(t).shape != shape:
            t = lax.broadcast_in_dim(t, shape, ())
        return lax.select_n(pred, lax.full_like(out, 0), t)
    inside = lax.bitwise_and(lax.gt(x, lo), lax.lt(x, hi))
    t = add_tangents(where(lax.lt(x, lo), tlo), where(inside, tx))
    return out, add_tangents(t, where(lax.gt(x, hi), thi))


@_rule("select_n")
def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = PRIMITIVES["select_n"].bind(which, *cases)
    return out, PRIMITIVES["select_n"].bind(which, *map(instantiate_zeros, tangents[1:]))


@_rule("dynamic_update_slice")
def _dynamic_update_slice_jvp(primals, tangents):
    x, update, *idx = primals
    prim = PRIMITIVES["dynamic_update_slice"]
    return prim.bind(x, update, *idx), prim.bind(instantiate_zeros(tangents[0]),
                                                 instantiate_zeros(tangents[1]), *idx)


def _scatter_linear_jvp(prim, primals, tangents, **params):
    """scatter-add is linear in (operand, updates); plain scatter too when indices are unique."""
    operand, indices, updates = primals
    out = prim.bind(operand, indices, updates, **params)
    return out, prim.bind(instantiate_zeros(tangents[0]), indices, instantiate_zeros(tangents[2]),
                          **params)


jvp_rules[PRIMITIVES["scatter-add"]] = _bound(_scatter_linear_jvp, PRIMITIVES["scatter-add"])


@_rule("scatter")
def _scatter_jvp(primals, tangents, **params):
    """With duplicate indices, which update lands is XLA's choice, so the program asks: it
    scatters an id per update (0 stands for the operand), reads the ids back, and masks out the
    values that lost. Value and tangent are then scatter-adds of the masked values (as JAX does),
    which transpose."""
    prim = PRIMITIVES["scatter"]
    if params["unique_indices"]:
        return _scatter_linear_jvp(prim, primals, tangents, **params)
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    u_shape = aval_of(updates).shape
    window = params["dimension_numbers"].update_window_dims
    id_shape = tuple(1 if d in window else n for d, n in enumerate(u_shape))
    ids = lax.add(lax.reshape(lax.iota(np.int32, math.prod(id_shape)), id_shape), 1)
    ids = lax.broadcast_in_dim(ids, u_shape, tuple(range(len(u_shape))))
    landed = prim.bind(lax.full(aval_of(operand).shape, 0, np.int32), indices, ids, **params)
    operand_kept = lax.eq(landed, 0)
    update_kept = lax.eq(ids, scatter_window_gather(landed, indices, u_shape, **params))
    keep = lambda kept, x: lax.select_n(kept, lax.full_like(x, 0), x)
    scatter_add = lambda x, u: PRIMITIVES["scatter-add"].bind(x, indices, u, **params)
    out = scatter_add(keep(operand_kept, operand), keep(update_kept, updates))
    if isinstance(t_operand, Zero) and isinstance(t_updates, Zero):
        return out, Zero(tangent_aval(aval_of(out)))
    return out, scatter_add(keep(operand_kept, instantiate_zeros(t_operand)),
                            keep(update_kept, instantiate_zeros(t_updates)))


def _extremum_jvp(prim, primals, tangents, *, axes):
    """The tangent at the extremum, averaged over ties (JAX's convention)."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axes=axes)
    shape = aval_of(x).shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    location = lax.convert_element_type(lax.eq(x, lax.broadcast_in_dim(ans, shape, kept)), aval_of(x).dtype)
    counts = PRIMITIVES["reduce_sum"].bind(location, axes=axes)
    weights = lax.div(location, lax.broadcast_in_dim(counts, shape, kept))
    return ans, PRIMITIVES["reduce_sum"].bind(lax.mul(t, weights), axes=axes)


_rule("reduce_max", "reduce_min")(_extremum_jvp)


@_rule("reduce_prod")
def _reduce_prod_jvp(primals, tangents, *, axes):
    """d prod(x) = sum_i t_i * prod_{j != i} x_j, with the products of the others computed by
    exclusive cumulative products from both ends (exact when some x_j are zero)."""
    (x,), (t,) = primals, tangents
    aval = aval_of(x)
    kept = [d for d in range(aval.ndim) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    kept_shape = tuple(aval.shape[d] for d in kept)
    n = int(np.prod([aval.shape[d] for d in axes], dtype=np.int64))
    flat = lambda v: lax.reshape(lax.transpose(v, perm), kept_shape + (n,))
    xf, tf = flat(x), flat(instantiate_zeros(t))
    last = len(kept_shape)
    ones_pad = lambda v, lo, hi: lax.pad(v, lax.full((), 1, aval.dtype), [(0, 0, 0)] * last + [(lo, hi, 0)])
    cum = lambda v, reverse: PRIMITIVES["cumprod"].bind(v, axis=last, reverse=reverse)
    before = ones_pad(cum(xf, False), 1, -1)     # prod_{j<i}
    after = ones_pad(cum(xf, True), -1, 1)       # prod_{j>i}
    others = lax.mul(before, after)
    ans = PRIMITIVES["reduce_prod"].bind(x, axes=axes)
    return ans, PRIMITIVES["reduce_sum"].bind(lax.mul(tf, others), axes=(last,))


@_rule("cumlogsumexp", "cumprod")
def _cumulative_jvp(prim, primals, tangents, *, axis, reverse):
    """Closed forms: for cumlogsumexp dy_i = exp(-y_i) sum_{j<=i} t_j exp(x_j); for cumprod
    dy_i = y_i sum_{j<=i} t_j / x_j (nonzero x)."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axis=axis, reverse=reverse)
    cumsum = lambda v: PRIMITIVES["cumsum"].bind(v, axis=axis, reverse=reverse)
    if prim.name == "cumlogsumexp":
        return ans, lax.mul(cumsum(lax.mul(t, lax.exp(x))), lax.exp(lax.neg(ans)))
    return ans, lax.mul(cumsum(lax.div(t, x)), ans)


def take_along_axis(x, indices, axis: int, permutation: bool = False):
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis`` (indices: int32 of
    x's shape): a gather whose other dimensions are batch dimensions. ``permutation``: the
    indices are a permutation along ``axis`` (unique, in bounds)."""
    aval = aval_of(x)
    batch = tuple(d for d in range(aval.ndim) if d != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,), operand_batching_dims=batch,
                                   start_indices_batching_dims=batch)
    return PRIMITIVES["gather"].bind(
        x, lax.reshape(indices, aval.shape + (1,)), dimension_numbers=dnums,
        slice_sizes=(1,) * aval.ndim, indices_are_sorted=False, unique_indices=permutation,
        mode=GatherScatterMode.PROMISE_IN_BOUNDS if permutation else GatherScatterMode.CLIP,
        fill_value=None)


@_rule("sort")
def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Sort a position iota along, then move each tangent by that permutation."""
    aval = aval_of(primals[0])
    iota = lax.broadcasted_iota(np.int32, aval.shape, dimension)
    *outs, perm = PRIMITIVES["sort"].bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                                          num_keys=num_keys)
    return outs, [t if isinstance(t, Zero) else take_along_axis(t, perm, dimension, permutation=True)
                  for t in tangents]


@_rule("cummax", "cummin")
def _cumulative_extremum_jvp(prim, primals, tangents, *, axis, reverse):
    """Each output is one of the inputs: the running extremum, last attained at a position p where
    x[p] equals the output at p (the running extremum only changes there). The tangent is t[p].
    On ties this picks the latest position in scan order; JAX's rule (an associative scan of
    max's jvp) mixes the tied tangents instead."""
    (x,), (t,) = primals, tangents
    ans = prim.bind(x, axis=axis, reverse=reverse)
    aval = aval_of(x)
    iota = lax.broadcasted_iota(np.int32, aval.shape, axis)
    attained = lax.eq(x, ans)
    if reverse:     # the nearest attaining position at or after i
        never = lax.full(aval.shape, aval.shape[axis] - 1, np.int32)
        pos = lax.cummin(lax.select_n(attained, never, iota), axis, reverse=True)
    else:           # the nearest attaining position at or before i
        pos = lax.cummax(lax.select_n(attained, lax.full(aval.shape, 0, np.int32), iota), axis)
    return ans, take_along_axis(instantiate_zeros(t), pos, axis)


def _trigamma(x):
    """polygamma(1, x) = sum_k 1/(x+k)^2, from lax ops (there is no polygamma primitive): for
    x < 1/2 the reflection pi^2/sin^2(pi x) - trigamma(1-x); otherwise ``shift`` terms of the
    sum, then the asymptotic series at w = x + shift >= 8.5 (relative error below 1e-11)."""
    shift = 8
    reflect = lax.lt(x, 0.5)
    z = lax.select_n(reflect, x, lax.sub(1.0, x))
    head = None
    for k in range(shift):
        zk = lax.add(z, float(k)) if k else z
        term = lax.div(1.0, lax.mul(zk, zk))
        head = term if head is None else lax.add(head, term)
    w = lax.add(z, float(shift))
    inv = lax.div(1.0, w)
    inv2 = lax.mul(inv, inv)
    # 1/w + 1/(2w^2) + 1/(6w^3) - 1/(30w^5) + 1/(42w^7) - 1/(30w^9)  (Bernoulli numbers)
    series = lax.sub(1.0 / 42, lax.mul(inv2, 1.0 / 30))
    series = lax.sub(1.0 / 30, lax.mul(inv2, series))
    series = lax.sub(1.0 / 6, lax.mul(inv2, series))
    series = lax.add(lax.add(1.0, lax.mul(inv, 0.5)), lax.mul(inv2, series))
    value = lax.add(head, lax.mul(inv, series))
    sin = lax.sin(lax.mul(x, math.pi))
    reflected = lax.sub(lax.div(math.pi ** 2, lax.mul(sin, sin)), value)
    return lax.select_n(reflect, value, reflected)


_unary("digamma", lambda t, x, ans: lax.mul(t, _trigamma(x)))


def scatter_window_gather(x, indices, updates_shape, *, dimension_numbers, indices_are_sorted,
                          unique_indices, mode):
    """The windows of ``x`` that a scatter with these params writes, shaped like its updates (the
    gather inverse to the scatter)."""
    dn = dimension_numbers
    slice_sizes, pos = [], 0
    for d in range(aval_of(x).ndim):
        if d in dn.inserted_window_dims or d in dn.operand_batching_dims:
            slice_sizes.append(1)
        else:
            slice_sizes.append(updates_shape[dn.update_window_dims[pos]])
            pos += 1
    gdn = GatherDimensionNumbers(offset_dims=dn.update_window_dims,
                                 collapsed_slice_dims=dn.inserted_window_dims,
                                 start_index_map=dn.scatter_dims_to_operand_dims,
                                 operand_batching_dims=dn.operand_batching_dims,
                                 start_indices_batching_dims=dn.scatter_indices_batching_dims)
    return PRIMITIVES["gather"].bind(x, indices, dimension_numbers=gdn, slice_sizes=tuple(slice_sizes),
                                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                                     mode=mode, fill_value=None)


@_rule("scatter-mul")
def _scatter_mul_jvp(primals, tangents, **params):
    """As JAX: linear in the operand; the updates' tangent only with unique indices
    (out = x * u there, so d out = x * du scattered)."""
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    prim = PRIMITIVES["scatter-mul"]
    out = prim.bind(operand, indices, updates, **params)
    t_out = Zero(tangent_aval(aval_of(out)))
    if not isinstance(t_operand, Zero):
        t_out = prim.bind(t_operand, indices, updates, **params)
    if not isinstance(t_updates, Zero):
        if not params["unique_indices"]:
            raise NotImplementedError(
                "Differentiation rule for 'scatter-mul' with respect to its updates is only "
                "implemented with unique_indices=True (jvp pass), as in JAX.")
        spread = PRIMITIVES["scatter-add"].bind(zeros(aval_of(operand)), indices, t_updates, **params)
        t_out = add_tangents(t_out, lax.mul(operand, spread))
    return out, t_out


@_rule("scatter-min", "scatter-max")
def _scatter_extremum_jvp(prim, primals, tangents, **params):
    """At each position the tangent of the value that won, averaged over ties (JAX's convention,
    as for max): the operand and every update equal to the result there are the winners."""
    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    out = prim.bind(operand, indices, updates, **params)
    if isinstance(t_operand, Zero) and isinstance(t_updates, Zero):
        return out, Zero(tangent_aval(aval_of(out)))
    dtype = aval_of(operand).dtype
    scatter_add = lambda x, u: PRIMITIVES["scatter-add"].bind(x, indices, u, **params)
    won = lambda x, y: lax.convert_element_type(lax.eq(x, y), dtype)
    update_won = won(updates, scatter_window_gather(out, indices, aval_of(updates).shape, **params))
    operand_won = won(operand, out)
    winners = scatter_add(operand_won, update_won)
    total = scatter_add(lax.mul(instantiate_zeros(t_operand), operand_won),
                        lax.mul(instantiate_zeros(t_updates), update_won))
    return out, lax.div(total, winners)
