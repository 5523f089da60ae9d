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
from jaxprc.ir.tracing import close_over_consts, eval_jaxpr, get_aval, source_info_of, trace_to_jaxpr

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


_rule("argmax", "argmin", "iota", "reduce_and", "reduce_or", "reduce_xor")(_zero_tangent_jvp)


def _linear_jvp(prim, primals, tangents, **params):
    """Linear in its first operand, the others (indices) held fixed: the tangent is the op itself."""
    out = prim.bind(*primals, **params)
    return out, prim.bind(instantiate_zeros(tangents[0]), *primals[1:], **params)


_rule("broadcast_in_dim", "reshape", "transpose", "squeeze",
      "rev", "slice", "reduce_sum", "cumsum", "dynamic_slice", "gather")(_linear_jvp)


def _multilinear_jvp(prim, primals, tangents, **params):
    """Linear in all operands jointly (zeros instantiated): pad, concatenate, ..."""
    out = prim.bind(*primals, **params)
    return out, prim.bind(*map(instantiate_zeros, tangents), **params)


_rule("pad", "concatenate")(_multilinear_jvp)


def _bilinear(prim, primals, tangents, **params):
    """Products: d(x*y) = dx*y + x*dy, each term the op itself with one tangent operand."""
    (x, y), (tx, ty) = primals, tangents
    out = prim.bind(x, y, **params)
    left = Zero(tangent_aval(aval_of(out))) if isinstance(tx, Zero) else prim.bind(tx, y, **params)
    right = Zero(tangent_aval(aval_of(out))) if isinstance(ty, Zero) else prim.bind(x, ty, **params)
    return out, add_tangents(left, right)


jvp_rules[PRIMITIVES["dot_general"]] = _bound(_bilinear, PRIMITIVES["dot_general"])


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


# ------------------------------------------------------------ control flow
# Sub-jaxprs are differentiated with jvp_jaxpr; whatever the new body closes
# over (consts) is hoisted into leading operands, as control flow requires.

def _nonzero_tangents(tangents, nonzeros):
    return [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]


def _split_outs(outs, n, out_nz, out_avals):
    primals, rest = list(outs[:n]), iter(outs[n:])
    return primals, [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(out_nz, out_avals)]


def _jit_jvp(primals, tangents, *, jaxpr, **params):
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    outs = PRIMITIVES["jit"].bind(*consts, *primals, *_nonzero_tangents(tangents, nonzeros),
                                  jaxpr=body, **params)
    return _split_outs(outs, len(jaxpr.out_avals), out_nz, jaxpr.out_avals)


def _hoist_shared(jaxprs):
    """Close several jaxprs over the union of their consts: each takes all of them first."""
    closed = [close_over_consts(j) for j in jaxprs]
    all_consts = [c for _, cs in closed for c in cs]
    out = []
    for i, (j, cs) in enumerate(closed):
        before = sum(len(c) for _, c in closed[:i])
        avals = [get_aval(c) for c in all_consts]
        jj = j.jaxpr
        pad_before = [Var(a) for a in avals[:before]]
        pad_after = [Var(a) for a in avals[before + len(cs):]]
        out.append(ClosedJaxpr(Jaxpr([], pad_before + jj.invars[:len(cs)] + pad_after + jj.invars[len(cs):],
                                     jj.outvars, jj.eqns), []))
    return out, all_consts


def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    nonzeros = [not isinstance(t, Zero) for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for br in branches:
        out_nz = [a or b for a, b in zip(out_nz, jvp_jaxpr(br, nonzeros, instantiate=False)[1])]
    new = [jvp_jaxpr(br, nonzeros, instantiate=out_nz)[0] for br in branches]
    new, consts = _hoist_shared(new)
    outs = PRIMITIVES["cond"].bind(index, *consts, *ops, *_nonzero_tangents(tangents[1:], nonzeros),
                                   branches=tuple(new))
    return _split_outs(outs, len(branches[0].out_avals), out_nz, branches[0].out_avals)


def _reorder(cj: ClosedJaxpr, in_perm, out_perm) -> ClosedJaxpr:
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in in_perm],
                             [j.outvars[i] for i in out_perm], j.eqns), cj.consts)


def _groups(sizes):
    """Index ranges of consecutive groups of the given sizes."""
    out, start = [], 0
    for s in sizes:
        out.append(list(range(start, start + s)))
        start += s
    return out


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, unroll, num_consts, num_carry, linear):
    nc, nk = num_consts, num_carry
    n_ys = len(jaxpr.out_avals) - nk
    nz = [not isinstance(t, Zero) for t in tangents]
    consts_nz, carry_nz, xs_nz = nz[:nc], nz[nc:nc + nk], nz[nc + nk:]
    while True:    # a carry tangent is nonzero if its next value is
        _, out_nz = jvp_jaxpr(jaxpr, consts_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * n_ys)
        new = [a or b for a, b in zip(carry_nz, out_nz[:nk])]
        if new == carry_nz:
            break
        carry_nz = new
    body, out_nz = jvp_jaxpr(jaxpr, consts_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * n_ys)
    body, hoisted = close_over_consts(body)
    nh, nx = len(hoisted), len(primals) - nc - nk
    # body inputs: hoisted, consts, carry, xs, t_consts, t_carry, t_xs -> scan's consts, carry, xs
    h, c, k, x, tc, tk, tx = _groups([nh, nc, nk, nx, sum(consts_nz), sum(carry_nz), sum(xs_nz)])
    ys_nz = out_nz[nk:]
    # body outputs: carry, ys, t_carry, t_ys -> carry, t_carry, ys, t_ys
    oc, oy, otc, oty = _groups([nk, n_ys, sum(carry_nz), sum(ys_nz)])
    body = _reorder(body, h + c + tc + k + tk + x + tx, oc + otc + oy + oty)
    t_consts = _nonzero_tangents(tangents[:nc], consts_nz)
    t_carry = _nonzero_tangents(tangents[nc:nc + nk], carry_nz)
    t_xs = _nonzero_tangents(tangents[nc + nk:], xs_nz)
    operands = [*hoisted, *primals[:nc], *t_consts, *primals[nc:nc + nk], *t_carry, *primals[nc + nk:], *t_xs]
    new_linear = ((False,) * nh + tuple(linear[:nc]) + (True,) * len(t_consts) + tuple(linear[nc:nc + nk])
                  + (True,) * len(t_carry) + tuple(linear[nc + nk:]) + (True,) * len(t_xs))
    outs = PRIMITIVES["scan"].bind(*operands, jaxpr=body, length=length, reverse=reverse, unroll=unroll,
                                   num_consts=nh + nc + len(t_consts), num_carry=nk + len(t_carry),
                                   linear=new_linear)
    n_tk = len(t_carry)
    carry, t_carry_out = outs[:nk], outs[nk:nk + n_tk]
    ys, t_ys = outs[nk + n_tk:nk + n_tk + n_ys], outs[nk + n_tk + n_ys:]
    out_avals = PRIMITIVES["scan"].abstract_eval(*[aval_of(p) for p in primals], jaxpr=jaxpr, length=length,
                                                 reverse=reverse, unroll=unroll, num_consts=nc,
                                                 num_carry=nk, linear=linear)
    _, touts = _split_outs(list(carry) + list(ys) + list(t_carry_out) + list(t_ys), nk + n_ys,
                           carry_nz + ys_nz, out_avals)
    return list(carry) + list(ys), touts


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cn, bn = cond_nconsts, body_nconsts
    nz = [not isinstance(t, Zero) for t in tangents]
    bconsts_nz, carry_nz = nz[cn:cn + bn], nz[cn + bn:]
    while True:
        _, out_nz = jvp_jaxpr(body_jaxpr, bconsts_nz + carry_nz, instantiate=carry_nz)
        new = [a or b for a, b in zip(carry_nz, out_nz)]
        if new == carry_nz:
            break
        carry_nz = new
    body, _ = jvp_jaxpr(body_jaxpr, bconsts_nz + carry_nz, instantiate=carry_nz)
    body, hoisted = close_over_consts(body)
    nk = len(carry_nz)
    # body inputs: hoisted, bconsts, carry, t_bconsts, t_carry -> consts, carry
    h, b, k, tb, tk = _groups([len(hoisted), bn, nk, sum(bconsts_nz), sum(carry_nz)])
    body = _reorder(body, h + b + tb + k + tk, list(range(nk + sum(carry_nz))))
    # the condition ignores the tangent carries
    cj = cond_jaxpr.jaxpr
    extra = [Var(tangent_aval(cj.invars[cn + i].aval)) for i, z in enumerate(carry_nz) if z]
    cond = ClosedJaxpr(Jaxpr(cj.constvars, cj.invars + extra, cj.outvars, cj.eqns), cond_jaxpr.consts)
    t_bconsts = _nonzero_tangents(tangents[cn:cn + bn], bconsts_nz)
    t_carry = _nonzero_tangents(tangents[cn + bn:], carry_nz)
    outs = PRIMITIVES["while"].bind(*primals[:cn], *hoisted, *primals[cn:cn + bn], *t_bconsts,
                                    *primals[cn + bn:], *t_carry, cond_jaxpr=cond, body_jaxpr=body,
                                    cond_nconsts=cn, body_nconsts=len(hoisted) + bn + len(t_bconsts))
    avals = body_jaxpr.out_avals
    return _split_outs(outs, nk, carry_nz, avals)


for _name, _r in [("jit", _jit_jvp), ("cond", _cond_jvp), ("scan", _scan_jvp), ("while", _while_jvp)]:
    if _name in PRIMITIVES:
        jvp_rules[PRIMITIVES[_name]] = _r


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


# ------------------------------------------------------- custom derivatives
# A custom node's operands are its hoisted consts (values it closes over), then its arguments.
# Its rule jaxprs take the consts the rule itself closes over first: ``n_rule_consts`` leading
# operands, counted from the rule jaxpr's arity. Consts are not differentiable: a nonzero
# tangent there means the user differentiates with respect to a closed-over value.

class CustomDerivativeClosureError(TypeError):
    """Differentiation of a custom_jvp/custom_vjp function with respect to a closed-over value."""


def closed_over_error(kind: str) -> CustomDerivativeClosureError:
    rules = "custom JVP rule" if kind == "custom_jvp" else "custom VJP rule"
    adapt = "the custom_jvp rule" if kind == "custom_jvp" else "the custom_vjp fwd and bwd rules"
    return CustomDerivativeClosureError(
        f"Detected differentiation of a {kind} function with respect to a closed-over value. "
        f"That isn't supported because the {rules} only specifies how to differentiate the "
        f"{kind} function with respect to explicit input parameters.\n\n"
        f"Try passing the closed-over value into the {kind} function as an argument, and "
        f"adapting {adapt}.")


def rule_const_count(rule: ClosedJaxpr, n_inputs: int) -> int:
    """How many leading inputs of a rule jaxpr are consts (the rest are ``n_inputs`` values)."""
    return len(rule.in_avals) - n_inputs


def _custom_jvp_call_jvp(primals, tangents, *, fun_jaxpr, jvp_jaxpr_thunk, num_consts, symbolic_zeros):
    if any(not isinstance(t, Zero) for t in tangents[:num_consts]):
        raise closed_over_error("custom_jvp")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    diff = [is_differentiable(a) for a in fun_jaxpr.in_avals[num_consts:]]
    nonzero = [d and not isinstance(t, Zero) for d, t in zip(diff, arg_tangents)]
    rule = None
    if symbolic_zeros and not all(n == d for n, d in zip(nonzero, diff)):
        for_zeros = getattr(jvp_jaxpr_thunk, "for_nonzeros", None)
        rule = for_zeros(tuple(nonzero)) if for_zeros is not None else None
    if rule is None:    # the thunk's rule takes a tangent for every differentiable argument
        rule, nonzero = jvp_jaxpr_thunk(), diff
    ts = [instantiate_zeros(t) for t, nz in zip(arg_tangents, nonzero) if nz]
    n_rule_consts = rule_const_count(rule, len(args) + len(ts))
    outs = eval_jaxpr(rule.jaxpr, rule.consts, *primals[:n_rule_consts], *args, *ts)
    out_avals = fun_jaxpr.out_avals
    n_out = len(out_avals)
    touts = iter(outs[n_out:])
    return outs[:n_out], [next(touts) if is_differentiable(a) else Zero(tangent_aval(a)) for a in out_avals]


def _custom_vjp_call_jvp(primals, tangents, *, fun_jaxpr, fwd_jaxpr_thunk, bwd, num_consts, out_trees,
                         symbolic_zeros):
    """Linearization of a custom_vjp call: run ``fwd``, then ``custom_lin`` on the tangents (it
    carries ``bwd``; transposition calls it, forward mode cannot evaluate it)."""
    if any(not isinstance(t, Zero) for t in tangents[:num_consts]):
        raise closed_over_error("custom_vjp")
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    diff_in = [is_differentiable(a) for a in fun_jaxpr.in_avals[num_consts:]]
    perturbed = [d and not isinstance(t, Zero) for d, t in zip(diff_in, arg_tangents)]
    variant = None
    if symbolic_zeros and perturbed != diff_in and hasattr(bwd, "for_perturbed"):
        variant = bwd.for_perturbed(perturbed)
    fwd, bwd = variant if variant is not None else (fwd_jaxpr_thunk(), bwd)
    n_fwd_consts = rule_const_count(fwd, len(args))
    outs = eval_jaxpr(fwd.jaxpr, fwd.consts, *primals[:n_fwd_consts], *args)
    out_avals = fun_jaxpr.out_avals
    n_out = len(out_avals)
    res = outs[n_out:]
    diff_out = [is_differentiable(a) for a in out_avals]
    ts = [instantiate_zeros(t) for t, d in zip(arg_tangents, diff_in) if d]
    lin_avals = tuple(a.strip_weak_type() for a, d in zip(out_avals, diff_out) if d)
    touts = iter(PRIMITIVES["custom_lin"].bind(*res, *ts, num_res=len(res), bwd=bwd, out_avals=lin_avals,
                                               symbolic_zeros=symbolic_zeros) if lin_avals else [])
    return outs[:n_out], [next(touts) if d else Zero(tangent_aval(a)) for d, a in zip(diff_out, out_avals)]


for _name, _r in [("custom_jvp_call_jaxpr", _custom_jvp_call_jvp),
                  ("custom_vjp_call_jaxpr", _custom_vjp_call_jvp)]:
    if _name in PRIMITIVES:
        jvp_rules[PRIMITIVES[_name]] = _r
