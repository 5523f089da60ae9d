"""Jet rules of the built-in primitives: those of JAX's ``jax.experimental.jet``, by the same
recurrences, so the series agree with JAX's, and some more (marked "beyond JAX").

Terms are Taylor coefficients (not factorial scaled). Most recurrences come from an ODE the
function satisfies: for ``v = f(u)`` with ``f' = c``, ``v' = c(u) u'`` gives
``v_k = sum_{j=1..k} j c_{k-j} u_j / k``. The primal output of every rule is the primitive
itself, so ``jet``'s primal output is ``fun(*primals)`` to the last bit (JAX computes some from
the compositions its series come from: ``tanh`` as ``2 logistic(2x) - 1``).
"""
from __future__ import annotations

import operator
from functools import partial, reduce
from typing import Any

import numpy as np

from jaxprc import lax
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Var
from jaxprc.ir.tracing import close_over_consts, get_aval
from jaxprc.lax.control_flow.conditionals import _hoist_shared
from jaxprc.lax.control_flow.loops import _groups, _reorder
from jaxprc.lax.slicing import take_along_axis
from jaxprc.passes.jet import jet_eval, jet_jaxpr

from .jet import (_jet_inline, def_comp, def_deriv, deflinear, defzero, deriv_series, jet_rules,
                  ode_term)


def _sum(terms):
    """The sum of a non-empty sequence of terms, without a leading 0 (an op fewer)."""
    return reduce(operator.add, terms)


# ---------------------------------------------------------------- zero and linear

for _p in (lax.le_p, lax.lt_p, lax.gt_p, lax.ge_p, lax.eq_p, lax.ne_p, lax.not_p, lax.and_p,
           lax.or_p, lax.xor_p, lax.floor_p, lax.ceil_p, lax.round_p, lax.sign_p,
           lax.stop_gradient_p, lax.is_finite_p, lax.shift_left_p, lax.shift_right_arithmetic_p,
           lax.shift_right_logical_p, lax.bitcast_convert_type_p,
           lax.argmax_p, lax.argmin_p):          # beyond JAX: integer results, as the comparisons
    defzero(_p)

for _p in (lax.neg_p, lax.real_p, lax.complex_p, lax.conj_p, lax.imag_p, lax.add_p, lax.sub_p,
           lax.convert_element_type_p, lax.broadcast_in_dim_p, lax.concatenate_p, lax.pad_p,
           lax.reshape_p, lax.squeeze_p, lax.rev_p, lax.transpose_p, lax.slice_p, lax.reduce_sum_p,
           lax.reduce_window_sum_p, lax.fft_p, lax.copy_p, lax.cumsum_p,
           lax.name_p, lax.optimization_barrier_p, lax.sharding_constraint_p):   # beyond JAX
    deflinear(_p)


def _linear_in(positions, prim):
    """``prim`` is linear in the operands at ``positions`` jointly, the others (indices) fixed."""
    def rule(primals_in, series_in, **params):
        out = prim.bind(*primals_in, **params)
        series_out = []
        for k in range(len(series_in[0])):
            args = [series_in[i][k] if i in positions else x for i, x in enumerate(primals_in)]
            series_out.append(prim.bind(*args, **params))
        return out, series_out
    jet_rules[prim] = rule


_linear_in({0}, lax.dynamic_slice_p)
_linear_in({0, 1}, lax.dynamic_update_slice_p)
_linear_in({0}, lax.gather_p)
_linear_in({0, 2}, lax.scatter_add_p)


def _select_n_rule(primals_in, series_in):
    which, *cases = primals_in
    out = lax.select_n_p.bind(which, *cases)
    return out, [lax.select_n_p.bind(which, *terms) for terms in zip(*series_in[1:])]


jet_rules[lax.select_n_p] = _select_n_rule


# ------------------------------------------------------------- products

def _bilinear_rule(prim, primals_in, series_in, **params):
    """The Cauchy product: ``v_k = sum_j op(x_j, y_{k-j})``."""
    (x, y), (xs, ys) = primals_in, series_in
    u, w = [x] + xs, [y] + ys
    op = partial(prim.bind, **params)
    v = [_sum(op(u[j], w[k - j]) for j in range(k + 1)) for k in range(len(u))]
    return v[0], v[1:]


for _p in (lax.mul_p, lax.dot_general_p, lax.conv_general_dilated_p):
    jet_rules[_p] = partial(_bilinear_rule, _p)


def _div_rule(primals_in, series_in):
    """``v w = u``, solved term by term: ``v_k = (u_k - sum_{j<k} v_j w_{k-j}) / w_0``."""
    (x, y), (xs, ys) = primals_in, series_in
    u, w = [x] + xs, [y] + ys
    v: list[Any] = [lax.div_p.bind(x, y)]
    for k in range(1, len(u)):
        v.append((u[k] - _sum(v[j] * w[k - j] for j in range(k))) / w[0])
    return v[0], v[1:]


jet_rules[lax.div_p] = _div_rule


# ------------------------------------------------- exponentials and logarithms

def _exp_series(v0, u, scale=None):
    """The series of ``v = exp(s u)`` given ``v_0``: ``v' = s v u'``."""
    v = [v0]
    for k in range(1, len(u)):
        term = ode_term(v, u, k)
        v.append(term if scale is None else scale * term)
    return v


def _exp_rule(primals_in, series_in, **params):
    x, = primals_in
    v = _exp_series(lax.exp_p.bind(x, **params), [x] + series_in[0])
    return v[0], v[1:]


def _exp2_rule(primals_in, series_in, **params):     # beyond JAX: exp2(u) = exp(log(2) u)
    x, = primals_in
    v = _exp_series(lax.exp2_p.bind(x, **params), [x] + series_in[0], float(np.log(2.)))
    return v[0], v[1:]


def _log_rule(primals_in, series_in, **params):
    """``u v' = u'``: ``v_k = (u_k - sum_{0<j<k} j v_j u_{k-j} / k) / u_0``."""
    x, = primals_in
    u = [x] + series_in[0]
    v: list[Any] = [lax.log_p.bind(x, **params)]
    for k in range(1, len(u)):
        rest = u[k] if k == 1 else u[k] - _sum(j * v[j] * u[k - j] for j in range(1, k)) / k
        v.append(rest / u[0])
    return v[0], v[1:]


def _pow_rule(primals_in, series_in):
    """``x ** y = exp(y log x)``."""
    x, y = primals_in
    e0, es = _jet_inline(lambda x, y: lax.mul(y, lax.log(x)), primals_in, series_in)
    v = _exp_series(lax.pow_p.bind(x, y), [e0] + es)
    return v[0], v[1:]


def _pow_by_squaring(x, n: int):
    if n < 0:
        return _pow_by_squaring(1 / x, -n)
    if n == 0:
        return 1
    if n % 2 == 0:
        return _pow_by_squaring(x * x, n // 2)
    return x * _pow_by_squaring(x * x, (n - 1) // 2)


def _integer_pow_rule(primals_in, series_in, *, y):
    x, = primals_in
    out = lax.integer_pow_p.bind(x, y=y)
    if y == 0:
        return out, [lax.full_like(t, 0) for t in series_in[0]]
    _, series_out = _jet_inline(lambda x: _pow_by_squaring(x, y), primals_in, series_in)
    return out, series_out


jet_rules[lax.exp_p] = _exp_rule
jet_rules[lax.exp2_p] = _exp2_rule
jet_rules[lax.log_p] = _log_rule
jet_rules[lax.pow_p] = _pow_rule
jet_rules[lax.integer_pow_p] = _integer_pow_rule


def _logistic_series(v0, u):
    """``v = logistic(u)``: ``v' = e u'`` with ``e = v (1 - v)``, both expanded together."""
    v: list[Any] = [v0]
    e: list[Any] = [v0 * (1 - v0)]
    for k in range(1, len(u)):
        v.append(ode_term(e, u, k))
        e.append((1 - v[0]) * v[k] - _sum(v[j] * v[k - j] for j in range(1, k + 1)))
    return v


def _logistic_rule(primals_in, series_in, **params):
    x, = primals_in
    v = _logistic_series(lax.logistic_p.bind(x, **params), [x] + series_in[0])
    return v[0], v[1:]


def _tanh_rule(primals_in, series_in, **params):
    """``tanh(x) = 2 logistic(2x) - 1``."""
    x, = primals_in
    v = _logistic_series(lax.logistic(2 * x), [2 * x] + [2 * t for t in series_in[0]])
    return lax.tanh_p.bind(x, **params), [2 * t for t in v[1:]]


jet_rules[lax.logistic_p] = _logistic_rule
jet_rules[lax.tanh_p] = _tanh_rule


# ---------------------------------------------------------------- trigonometric

def _sinusoidal_rule(sign, pair, which, primals_in, series_in, **params):
    """``s' = c u'`` and ``c' = sign s u'``, expanded together (sin/cos: -1, sinh/cosh: +1)."""
    x, = primals_in
    u = [x] + series_in[0]
    s, c = [pair[0](x)], [pair[1](x)]
    for k in range(1, len(u)):
        s.append(ode_term(c, u, k))
        c.append(ode_term(s, u, k) * sign)
    prim = (pair[2], pair[3])[which]
    return prim.bind(x, **params), (s, c)[which][1:]


_SIN = (lax.sin, lax.cos, lax.sin_p, lax.cos_p)
_SINH = (lax.sinh, lax.cosh, lax.sinh_p, lax.cosh_p)
jet_rules[lax.sin_p] = partial(_sinusoidal_rule, -1, _SIN, 0)
jet_rules[lax.cos_p] = partial(_sinusoidal_rule, -1, _SIN, 1)
jet_rules[lax.sinh_p] = partial(_sinusoidal_rule, 1, _SINH, 0)
jet_rules[lax.cosh_p] = partial(_sinusoidal_rule, 1, _SINH, 1)


def _atan2_rule(primals_in, series_in):
    """``atan2(x, y)`` has the series of ``atan(x / y)``, whose derivative is ``1 / (1 + q^2)``."""
    q0, qs = _jet_inline(lax.div, primals_in, series_in)
    c0, cs = _jet_inline(lambda q: lax.div(lax.full_like(q, 1), 1 + lax.square(q)), [q0], [qs])
    c, u = [c0] + cs, [q0] + qs
    v = [ode_term(c, u, k) for k in range(1, len(u))]
    return lax.atan2_p.bind(*primals_in), v


jet_rules[lax.atan2_p] = _atan2_rule


# ------------------------------------------------- from a derivative or a composition

def _erf_deriv(x):
    return (2. / np.sqrt(np.pi)) * lax.exp(lax.neg(lax.square(x)))


def_deriv(lax.erf_p, _erf_deriv)
# beyond JAX: the inverse trigonometric functions and tan, from their derivatives
def_deriv(lax.tan_p, lambda x: 1 + lax.square(lax.tan(x)))
def_deriv(lax.asin_p, lambda x: lax.rsqrt(1 - lax.square(x)))
def_deriv(lax.acos_p, lambda x: lax.neg(lax.rsqrt(1 - lax.square(x))))
def_deriv(lax.atan_p, lambda x: lax.div(lax.full_like(x, 1), 1 + lax.square(x)))

_COMPOSITIONS = {
    lax.expm1_p: lambda x: lax.exp(x) - 1,
    lax.log1p_p: lambda x: lax.log(1 + x),
    lax.sqrt_p: lambda x: x ** 0.5,
    lax.square_p: lambda x: x * x,
    lax.rsqrt_p: lambda x: x ** -0.5,
    lax.asinh_p: lambda x: lax.log(x + lax.sqrt(lax.square(x) + 1)),
    lax.acosh_p: lambda x: lax.log(x + lax.sqrt(lax.square(x) - 1)),
    lax.atanh_p: lambda x: 0.5 * lax.log(lax.div(1 + x, 1 - x)),
    lax.erfc_p: lambda x: 1 - lax.erf(x),
    lax.clamp_p: lambda lo, x, hi: lax.min(lax.max(lo, x), hi),
}
for _p, _comp in _COMPOSITIONS.items():
    def_comp(_p, _comp)


def _rem_rule(primals_in, series_in):
    """``rem(x, y) = x - y trunc(x / y)``, the quotient locally constant. (JAX composes
    ``x - y floor(x / y)``, which is another function where x / y < 0.)"""
    x, y = primals_in
    q = lax.div(x, y)
    q = lax.mul(lax.sign(q), lax.floor(lax.abs(q)))
    return lax.rem_p.bind(x, y), [tx - ty * q for tx, ty in zip(*series_in)]


jet_rules[lax.rem_p] = _rem_rule


def _erf_inv_rule(primals_in, series_in):
    """``v = erf_inv(u)``: ``v' = c u'`` with ``c = sqrt(pi)/2 exp(v^2)``, a function of the
    result, so c's series is built alongside v's (through ``s = v^2`` and ``e = exp(s)``)."""
    x, = primals_in
    u = [x] + series_in[0]
    const = np.sqrt(np.pi) / 2.
    v: list[Any] = [lax.erf_inv_p.bind(x)]
    s = [lax.square(v[0])]
    e = [lax.exp(s[0])]
    c = [const * e[0]]
    for k in range(1, len(u)):
        v.append(ode_term(c, u, k))
        if k + 1 < len(u):
            s.append(_sum(v[k - j] * v[j] for j in range(k + 1)))
            e.append(ode_term(e, s, k))
            c.append(const * e[k])
    return v[0], v[1:]


jet_rules[lax.erf_inv_p] = _erf_inv_rule


# ------------------------------------------------------ piecewise: abs, max, min

def _abs_rule(primals_in, series_in):
    """The terms times the sign of x (+1 at 0, as JAX's jet)."""
    x, = primals_in
    negs = lax.select(lax.lt(x, lax.full_like(x, 0)), lax.full_like(x, -1), lax.full_like(x, 1))
    return lax.abs_p.bind(x), [negs * t for t in series_in[0]]


jet_rules[lax.abs_p] = _abs_rule


def _max_min_rule(prim, compare, primals_in, series_in):
    """The terms of the chosen operand; at ties, their mean (as JAX's jet)."""
    x, y = primals_in
    chosen, tie = compare(x, y), lax.eq(x, y)

    def pick(tx, ty):
        return lax.select(tie, (tx + ty) / 2, lax.select(chosen, tx, ty))
    return prim.bind(x, y), [pick(tx, ty) for tx, ty in zip(*series_in)]


jet_rules[lax.max_p] = partial(_max_min_rule, lax.max_p, lax.gt)
jet_rules[lax.min_p] = partial(_max_min_rule, lax.min_p, lax.lt)


def _reduce_chooser_rule(prim, primals_in, series_in, *, axes):
    """The terms of the chosen elements, averaged over ties."""
    x, = primals_in
    out = prim.bind(x, axes=axes)
    shape = get_aval(x).shape
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    dtype = get_aval(series_in[0][0]).dtype if series_in[0] else get_aval(x).dtype
    where = lax.convert_element_type(lax.eq(x, lax.reshape(out, kept)), dtype)
    counts = lax.reduce_sum_p.bind(where, axes=axes)
    return out, [lax.div(lax.reduce_sum_p.bind(lax.mul(t, where), axes=axes), counts)
                 for t in series_in[0]]


jet_rules[lax.reduce_max_p] = partial(_reduce_chooser_rule, lax.reduce_max_p)
jet_rules[lax.reduce_min_p] = partial(_reduce_chooser_rule, lax.reduce_min_p)


def _cumulative_rule(prim, combine, primals_in, series_in, *, axis, reverse):
    """Through the parallel prefix scan, whose pieces have rules (as JAX)."""
    _, series_out = _jet_inline(
        lambda x: lax.associative_scan(combine, x, axis=axis, reverse=reverse), primals_in, series_in)
    return prim.bind(*primals_in, axis=axis, reverse=reverse), series_out


jet_rules[lax.cumprod_p] = partial(_cumulative_rule, lax.cumprod_p, lax.mul)
jet_rules[lax.cummax_p] = partial(_cumulative_rule, lax.cummax_p, lax.max)
jet_rules[lax.cummin_p] = partial(_cumulative_rule, lax.cummin_p, lax.min)


# ---------------------------------------------------- calls: transformed or inlined

def _jit_rule(primals_in, series_in, *, jaxpr, name):
    """A jit stays a call, of its callee's jet."""
    order = len(series_in[0])
    body, _ = jet_jaxpr(jaxpr, order, [True] * len(primals_in), instantiate=True)
    body, consts = close_over_consts(body)
    outs = lax.jit_p.bind(*consts, *primals_in, *(t for s in series_in for t in s),
                          jaxpr=body, name=name)
    n = len(jaxpr.out_avals)
    return outs[:n], [outs[n + i * order:n + (i + 1) * order] for i in range(n)]


def _inlined_rule(param):
    """Through the callee, inlined: remat is only a schedule, and custom derivatives are
    ignored (the custom function's own primitives are expanded, as JAX's jet does)."""
    def rule(primals_in, series_in, **params):
        callee = params[param]
        return jet_eval(callee.jaxpr, callee.consts, primals_in, series_in, len(series_in[0]))
    return rule


jet_rules[lax.jit_p] = _jit_rule
jet_rules[lax.checkpoint_p] = _inlined_rule("jaxpr")
jet_rules[lax.custom_jvp_call_jaxpr_p] = _inlined_rule("fun_jaxpr")
jet_rules[lax.custom_vjp_call_jaxpr_p] = _inlined_rule("fun_jaxpr")


# -------------------------------------- more functions (beyond JAX, whose jet has no rule)

def_deriv(lax.cbrt_p, lambda x: lax.div(lax.full_like(x, 1), 3 * lax.square(lax.cbrt(x))))
def_deriv(lax.lgamma_p, lax.digamma)
def_deriv(lax.digamma_p, lambda x: lax.polygamma(lax.full_like(x, 1), x))


def _polygamma_rule(primals_in, series_in):
    """Through x (m is an integer order, held fixed): the derivative is polygamma(m + 1, x)."""
    m, x = primals_in
    return lax.polygamma_p.bind(m, x), deriv_series(lambda x: lax.polygamma(m + 1, x), x, series_in[1])


jet_rules[lax.polygamma_p] = _polygamma_rule


def _reduce_prod_rule(primals_in, series_in, *, axes):
    """The last of the running products over the reduced axes (moved last and flattened)."""
    x, = primals_in
    out = lax.reduce_prod_p.bind(x, axes=axes)
    shape = get_aval(x).shape
    keep = [d for d in range(len(shape)) if d not in axes]
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    if n == 0:
        return out, [lax.full_like(out, 0) for _ in series_in[0]]

    def prod(x):
        y = lax.reshape(lax.transpose(x, keep + list(axes)), [shape[d] for d in keep] + [n])
        return lax.squeeze(lax.slice_in_dim(lax.cumprod(y, axis=len(keep)), n - 1, n, axis=len(keep)),
                           [len(keep)])
    return out, _jet_inline(prod, primals_in, series_in)[1]


jet_rules[lax.reduce_prod_p] = _reduce_prod_rule


def _sort_rule(primals_in, series_in, *, dimension, is_stable, num_keys):
    """Sort a position iota along; every term moves by that permutation."""
    iota = lax.broadcasted_iota(np.int32, get_aval(primals_in[0]).shape, dimension)
    *outs, perm = lax.sort_p.bind(*primals_in, iota, dimension=dimension, is_stable=is_stable,
                                  num_keys=num_keys)
    return outs, [[take_along_axis(t, perm, dimension, permutation=True) for t in terms]
                  for terms in series_in]


jet_rules[lax.sort_p] = _sort_rule


# ------------------------------------------- control flow (beyond JAX, whose jet has none)

def _chunks(flat, order: int) -> list:
    return [list(flat[i:i + order]) for i in range(0, len(flat), order)] if order else []


def _flat(series) -> list:
    return [t for s in series for t in s]


def _cond_rule(primals_in, series_in, *, branches):
    """Each branch by its jet; the index is piecewise constant."""
    index, *ops = primals_in
    order = len(series_in[0])
    new, consts = _hoist_shared([jet_jaxpr(br, order, [True] * len(ops), instantiate=True)[0]
                                 for br in branches])
    outs = lax.cond_p.bind(index, *consts, *ops, *_flat(series_in[1:]), branches=tuple(new))
    n = len(branches[0].out_avals)
    return outs[:n], _chunks(outs[n:], order) or [[] for _ in range(n)]


def _scan_rule(primals_in, series_in, *, jaxpr, length, reverse, unroll, num_consts, num_carry,
               linear):
    """The body's jet, the series of consts, carries and xs beside them."""
    order = len(series_in[0])
    nc, nk = num_consts, num_carry
    nx, ny = len(primals_in) - nc - nk, len(jaxpr.out_avals) - nk
    body, _ = jet_jaxpr(jaxpr, order, [True] * len(primals_in), instantiate=True)
    body, hoisted = close_over_consts(body)
    # body inputs: hoisted, consts, carry, xs, their series -> consts, carry, xs each with series
    h, c, k, x, sc, sk, sx = _groups([len(hoisted), nc, nk, nx, nc * order, nk * order, nx * order])
    oc, oy, osc, osy = _groups([nk, ny, nk * order, ny * order])
    body = _reorder(body, h + c + sc + k + sk + x + sx, oc + osc + oy + osy)
    p, s = primals_in, series_in
    operands = [*hoisted, *p[:nc], *_flat(s[:nc]), *p[nc:nc + nk], *_flat(s[nc:nc + nk]),
                *p[nc + nk:], *_flat(s[nc + nk:])]
    outs = lax.scan_p.bind(*operands, jaxpr=body, length=length, reverse=reverse, unroll=unroll,
                           num_consts=len(hoisted) + nc * (1 + order), num_carry=nk * (1 + order),
                           linear=(False,) * len(operands))
    carry, s_carry, ys, s_ys = (outs[i[0]:i[-1] + 1] if i else [] for i in _groups(
        [nk, nk * order, ny, ny * order]))
    n_out = nk + ny
    return list(carry) + list(ys), (_chunks(s_carry, order) + _chunks(s_ys, order)
                                    or [[] for _ in range(n_out)])


def _while_rule(primals_in, series_in, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """The body's jet carries the series; the condition ignores them (piecewise constant)."""
    order = len(series_in[0])
    cn, bn = cond_nconsts, body_nconsts
    nk = len(primals_in) - cn - bn
    body, _ = jet_jaxpr(body_jaxpr, order, [True] * (bn + nk), instantiate=True)
    body, hoisted = close_over_consts(body)
    h, b, k, sb, sk = _groups([len(hoisted), bn, nk, bn * order, nk * order])
    body = _reorder(body, h + b + sb + k + sk, list(range(nk * (1 + order))))
    cj = cond_jaxpr.jaxpr
    ignored = [Var(v.aval) for v in body.jaxpr.invars[len(h + b + sb) + nk:]]
    cond = ClosedJaxpr(Jaxpr(cj.constvars, cj.invars + ignored, cj.outvars, cj.eqns), cond_jaxpr.consts)
    p, s = primals_in, series_in
    outs = lax.while_p.bind(*p[:cn], *hoisted, *p[cn:cn + bn], *_flat(s[cn:cn + bn]),
                            *p[cn + bn:], *_flat(s[cn + bn:]), cond_jaxpr=cond, body_jaxpr=body,
                            cond_nconsts=cn, body_nconsts=len(hoisted) + bn * (1 + order))
    return outs[:nk], _chunks(outs[nk:], order) or [[] for _ in range(nk)]


jet_rules[lax.cond_p] = _cond_rule
jet_rules[lax.scan_p] = _scan_rule
jet_rules[lax.while_p] = _while_rule
