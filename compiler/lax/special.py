"""Special functions: the incomplete gamma and beta functions, Hurwitz zeta, polygamma and the
exponentially scaled Bessel functions I0 and I1.

They are elementwise primitives of floating operands of one shape and dtype (as in JAX's lax).
XLA has ``chlo`` ops for ``zeta``, ``polygamma`` and ``bessel_i1e``; the others lower by
expanding, in the lowering, into the series and continued fractions XLA's math library uses
(the same algorithms as JAX, so the numbers agree): Lentz's method for the incomplete beta
function, the power series or the Legendre continued fraction for the incomplete gamma
function (and their derivatives in ``a``), Cephes' Chebyshev expansions for ``bessel_i0e``.
float16 and bfloat16 are computed in float32.
"""
from __future__ import annotations

from functools import reduce

import numpy as np
from jaxlib.mlir.dialects import chlo

from jaxprc import lax
from jaxprc.interpreters import ad, mlir
from jaxprc.passes import jet
from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import trace_to_jaxpr
from jaxprc.passes.jvp import jvp_eval

from . import elementwise as ew
from .support import operands as _ops
from .control_flow import while_loop
from .elementwise import IS_FLOAT, elementwise

__all__ = ["igamma", "igammac", "igamma_grad_a", "betainc", "zeta", "polygamma", "bessel_i0e",
           "bessel_i1e",
           "igamma_p", "igammac_p", "igamma_grad_a_p", "regularized_incomplete_beta_p", "zeta_p",
           "polygamma_p", "bessel_i0e_p", "bessel_i1e_p", "random_gamma_grad", "random_gamma_grad_p"]


# ------------------------------------------------------------- primitives

igamma_p = elementwise("igamma", 2, IS_FLOAT)
igammac_p = elementwise("igammac", 2, IS_FLOAT)
igamma_grad_a_p = elementwise("igamma_grad_a", 2, IS_FLOAT)
regularized_incomplete_beta_p = elementwise("regularized_incomplete_beta", 3, IS_FLOAT)
zeta_p = elementwise("zeta", 2, IS_FLOAT)
polygamma_p = elementwise("polygamma", 2, IS_FLOAT)
bessel_i0e_p = elementwise("bessel_i0e", 1, IS_FLOAT)
bessel_i1e_p = elementwise("bessel_i1e", 1, IS_FLOAT)


# ------------------------------------------------------- scalar constants

def _typed(op):
    """``op`` with Python scalars given the other operand's exact dtype. The expansions below run
    on float64 operands even where x64 is off (lowering), where a bare Python float would be
    float32 and not combine with them."""
    def f(x, y):
        if _ops.is_py_scalar(x):
            x = _ops.scalar_of_dtype(x, _ops.aval(y).dtype, True)
        elif _ops.is_py_scalar(y):
            y = _ops.scalar_of_dtype(y, _ops.aval(x).dtype, True)
        return op(x, y)
    return f


_add, _sub, _mul, _div, _rem = map(_typed, (ew.add, ew.sub, ew.mul, ew.div, ew.rem))
_lt, _le, _gt, _ge, _eq, _ne = map(_typed, (ew.lt, ew.le, ew.gt, ew.ge, ew.eq, ew.ne))


# --------------------------------------------------------------- builders

def _nary(prim, name):
    @_ops.builder
    def op(*args):
        return _ops.nary(prim, name, *args)
    op.__name__ = op.__qualname__ = name
    return op


igamma = _nary(igamma_p, "igamma")
igamma.__doc__ = "Regularized lower incomplete gamma function P(a, x)."
igammac = _nary(igammac_p, "igammac")
igammac.__doc__ = "Regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."
igamma_grad_a = _nary(igamma_grad_a_p, "igamma_grad_a")
igamma_grad_a.__doc__ = "dP(a, x)/da, the derivative of igamma in its first operand."
betainc = _nary(regularized_incomplete_beta_p, "betainc")
betainc.__doc__ = "Regularized incomplete beta function I_x(a, b)."
zeta = _nary(zeta_p, "zeta")
zeta.__doc__ = "Hurwitz zeta function zeta(x, q) = sum_k (k + q)^-x."
polygamma = _nary(polygamma_p, "polygamma")
polygamma.__doc__ = "Polygamma function psi^(m)(x), the m-th derivative of digamma."
bessel_i0e = _nary(bessel_i0e_p, "bessel_i0e")
bessel_i0e.__doc__ = "Exponentially scaled modified Bessel function of order 0: ``exp(-|x|) I0(x)``."
bessel_i1e = _nary(bessel_i1e_p, "bessel_i1e")
bessel_i1e.__doc__ = "Exponentially scaled modified Bessel function of order 1: ``exp(-|x|) I1(x)``."


# -------------------------------------------------------------------- jvp

def _not_differentiable(name, operand):
    def rule(t, *args):
        raise ValueError(f"{name}: the derivative with respect to {operand} is not supported "
                         "(as in JAX)")
    return rule


def _igamma_dx(t, a, x):
    """dP/dx = x^(a-1) e^-x / Gamma(a), the integrand, summed in JAX's order (at a = x = 1e30
    the two large terms cancel exactly only in that order)."""
    return _mul(t, ew.exp(_sub(_add(ew.neg(x), _mul(_sub(a, 1.0), ew.log(x))), ew.lgamma(a))))


ad.defjvp(igamma_p, lambda t, a, x: _mul(t, igamma_grad_a(a, x)), _igamma_dx)
ad.defjvp(igammac_p, lambda t, a, x: ew.neg(_mul(t, igamma_grad_a(a, x))),
          lambda t, a, x: ew.neg(_igamma_dx(t, a, x)))
# d/dx dP/da = d/da dP/dx = dP/dx (log x - digamma(a)); d2P/da2 has no closed form (nor in JAX).
ad.defjvp(igamma_grad_a_p, _not_differentiable("igamma_grad_a", "a"),
          lambda t, a, x: _mul(_igamma_dx(t, a, x), _sub(ew.log(x), ew.digamma(a))))


def _betainc_dx(t, a, b, x):
    """dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    lbeta = _sub(_add(ew.lgamma(a), ew.lgamma(b)), ew.lgamma(_add(a, b)))
    log_density = _add(_mul(_sub(b, 1.0), ew.log1p(ew.neg(x))), _mul(_sub(a, 1.0), ew.log(x)))
    return _mul(t, ew.exp(_sub(log_density, lbeta)))


ad.defjvp(regularized_incomplete_beta_p, _not_differentiable("betainc", "a"),
          _not_differentiable("betainc", "b"), _betainc_dx)
# d zeta(x, q)/dq = -x zeta(x + 1, q); the derivative in x is not supported, as in JAX's lax.
ad.defjvp(zeta_p, _not_differentiable("zeta", "x"),
          lambda t, x, q: ew.neg(_mul(t, _mul(x, zeta(_add(x, 1.0), q)))))
ad.defjvp(polygamma_p, _not_differentiable("polygamma", "m"),
          lambda t, m, x: _mul(t, polygamma(_add(m, 1.0), x)))
# As in JAX: XLA's polygamma gives digamma's derivatives their poles (inf at -1, NaN beyond).
ad.defjvp(ew.digamma_p, lambda t, x: _mul(t, polygamma(_full(x, 1.0), x)))


def _i0e_jvp(primals, tangents):
    """d i0e/dx = i1e(x) - sign(x) i0e(x)."""
    (x,), (t,) = primals, tangents
    y = bessel_i0e(x)
    if isinstance(t, ad.Zero):
        return y, t
    return y, _mul(t, _sub(bessel_i1e(x), _mul(ew.sign(x), y)))


def _i1e_jvp(primals, tangents):
    """d i1e/dx = i0e(x) - i1e(x) (sign(x) + 1/x), which is 1/2 at 0 (taken there for |x| <= eps)."""
    (x,), (t,) = primals, tangents
    y = bessel_i1e(x)
    if isinstance(t, ad.Zero):
        return y, t
    eps = float(dt.finfo(_ops.aval(x).dtype).eps)
    not_tiny = _gt(ew.abs(x), eps)
    safe_x = ew.select(not_tiny, x, _full(x, eps))
    slope = _sub(bessel_i0e(safe_x), _mul(y, _add(ew.sign(safe_x), _div(1.0, safe_x))))
    return y, _mul(t, ew.select(not_tiny, slope, _full(x, 0.5)))


ad.primitive_jvps[bessel_i0e_p] = _i0e_jvp
ad.primitive_jvps[bessel_i1e_p] = _i1e_jvp


# ------------------------------------------------- expansions (lowerings)
# Written with lax ops on operands of one shape and dtype f32/f64; mlir.lower_fun inlines them.

def _full(x, value):
    """``value`` in ``x``'s shape and exact dtype."""
    a = _ops.aval(x)
    return lax.broadcast_in_dim(_ops.scalar_of_dtype(value, a.dtype, False), a.shape, ())


def _cast(x, dtype):
    """``x`` as exactly ``dtype`` (no canonicalization: float64 stays float64 in lowerings)."""
    return ew.convert_element_type_p.bind(x, new_dtype=np.dtype(dtype), weak_type=False)


def _any(pred):
    return lax.reduce_or(pred, tuple(range(_ops.aval(pred).ndim)))


def _or(*preds):
    return reduce(ew.bitwise_or, preds)


def _and(*preds):
    return reduce(ew.bitwise_and, preds)


def _isnan(x):
    return _ne(x, x)


def _finfo(x):
    return dt.finfo(_ops.aval(x).dtype)


def _where(pred, on_true, on_false):
    return ew.select(pred, on_true, on_false)


def _lentz(nth_numerator, nth_denominator, num_iterations, small, threshold):
    """The continued fraction b0 + a1/(b1 + a2/(b2 + ...)) by the modified Lentz algorithm, all
    elements iterating until every one has converged (|delta - 1| < threshold) or the limit."""
    b0 = nth_denominator(0)
    h = _where(_lt(ew.abs(b0), small), _full(b0, small), b0)

    def cond(state):
        i, unconverged, *_ = state
        return ew.bitwise_and(_lt(i, num_iterations), unconverged)

    def body(state):
        i, _, c, d, h = state
        num, den = nth_numerator(i), nth_denominator(i)
        c = _add(den, _div(num, c))
        c = _where(_lt(ew.abs(c), small), _full(c, small), c)
        d = _add(den, _mul(num, d))
        d = _div(1.0, _where(_lt(ew.abs(d), small), _full(d, small), d))
        delta = _mul(c, d)
        return (_add(i, 1), _any(_ge(ew.abs(_sub(delta, 1.0)), threshold)), c, d, _mul(h, delta))

    one = np.int32(1)
    state = lax.while_loop(cond, body, (one, np.bool_(True), h, _full(h, 0.0), h))
    return state[4]


def _betainc_impl(a, b, x):
    """I_x(a, b) by the continued fraction of DLMF 8.17.22, on the side of the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) where it converges fast (x < (a+1)/(a+b+2))."""
    fi = _finfo(x)
    dtype = _ops.aval(x).dtype
    a_is_zero = _or(_eq(a, 0.0), _eq(b, np.inf))
    b_is_zero = _or(_eq(b, 0.0), _eq(a, np.inf))
    x_is_zero, x_is_one = _eq(x, 0.0), _eq(x, 1.0)
    result_is_zero = _or(_and(b_is_zero, ew.bitwise_not(x_is_one)), _and(a_is_zero, x_is_zero))
    result_is_one = _or(_and(a_is_zero, ew.bitwise_not(x_is_zero)), _and(b_is_zero, x_is_one))
    result_is_nan = _or(_lt(a, 0.0), _lt(b, 0.0), _lt(x, 0.0), _gt(x, 1.0),
                        _and(a_is_zero, b_is_zero), _isnan(a), _isnan(b), _isnan(x))

    fast = _lt(x, _div(_add(a, 1.0), _add(_add(a, b), 2.0)))
    a, b = _where(fast, a, b), _where(fast, b, a)
    x = _where(fast, x, _sub(1.0, x))
    shape = _ops.aval(x).shape

    def numerator(i):
        # d_1 = 1; d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)); d_{2m} = m(b-m)x / ((a+2m-1)(a+2m))
        i = lax.broadcast_in_dim(i, shape, ())
        m = _cast(_div(_sub(i, 1), 2), dtype)
        even = _eq(_rem(i, 2), 0)
        a2m = _add(a, _mul(m, 2.0))
        first = _div(_mul(ew.neg(_add(a, b)), x), _add(a, 1.0))   # m == 0: exact near a = 0
        odd_m = _div(_mul(_mul(ew.neg(_add(a, m)), _add(_add(a, b), m)), x),
                       _mul(a2m, _add(a2m, 1.0)))
        even_m = _div(_mul(_mul(m, _sub(b, m)), x), _mul(_sub(a2m, 1.0), a2m))
        value = _where(even, _where(_eq(m, 0.0), first, odd_m), even_m)
        return _where(_eq(i, 1), _full(x, 1.0), value)

    def denominator(i):
        return _full(x, 0.0) if isinstance(i, int) else _where(
            _eq(lax.broadcast_in_dim(i, shape, ()), 0), _full(x, 0.0), _full(x, 1.0))

    small = float(fi.eps) / 2
    fraction = _lentz(numerator, denominator, 200 if dtype == dt.float32 else 600, small, small)
    # a B(a, b) -> 1 as a -> 0+, so tiny a uses the limit (no 0/0)
    lbeta_small_a = _sub(ew.lgamma(b), ew.lgamma(_add(a, b)))
    lbeta = _add(ew.lgamma(a), lbeta_small_a)
    log1mx = ew.log1p(ew.neg(x))
    factor = _where(_lt(a, float(fi.tiny) * 2),
                    ew.exp(_sub(_mul(log1mx, b), lbeta_small_a)),
                    _div(ew.exp(_sub(_add(_mul(ew.log(x), a), _mul(log1mx, b)), lbeta)), a))
    result = _mul(fraction, factor)
    result = _where(fast, result, _sub(1.0, result))
    result = _where(result_is_zero, _full(a, 0.0), result)
    result = _where(result_is_one, _full(a, 1.0), result)
    return _where(result_is_nan, _full(a, np.nan), result)


def _igamma_series(ax, x, a, enabled, derivative):
    """P(a, x) = ax/a sum_n x^n / ((a+1)...(a+n)) (ax = x^a e^-x / Gamma(a)), or its derivative in
    ``a``, summed for the ``enabled`` elements until the last term is below eps relative."""
    eps = float(_finfo(x).eps)

    def cond(state):
        return _any(state[0])

    def body(state):
        on, r, c, ans, dc_da, dans_da = state
        r1 = _add(r, 1.0)
        dc_da1 = _sub(_mul(dc_da, _div(x, r1)), _div(_mul(c, x), _mul(r1, r1)))
        dans_da1 = _add(dans_da, dc_da1)
        c1 = _mul(c, _div(x, r1))
        ans1 = _add(ans, c1)
        more = _gt(ew.abs(_div(dc_da1, dans_da1)), eps) if derivative else _gt(_div(c1, ans1), eps)
        return (ew.bitwise_and(on, more), _where(on, r1, r), _where(on, c1, c), _where(on, ans1, ans),
                _where(on, dc_da1, dc_da), _where(on, dans_da1, dans_da))

    one, zero = _full(a, 1.0), _full(a, 0.0)
    _, _, _, ans, _, dans_da = lax.while_loop(cond, body, (enabled, a, one, one, zero, zero))
    if not derivative:
        return _div(_mul(ans, ax), a)
    dlogax_da = _sub(ew.log(x), ew.digamma(_add(a, 1.0)))
    return _div(_mul(ax, _add(_mul(ans, dlogax_da), dans_da)), a)


def _igammac_fraction(ax, x, a, enabled, derivative):
    """Q(a, x) = ax * (Legendre's continued fraction), by its convergents p_k/q_k (rescaled when
    they grow), or its derivative in ``a``; at most 2000 terms."""
    eps = float(_finfo(x).eps)

    def cond(state):
        return ew.bitwise_and(_lt(state[5], 2000), _any(state[0]))

    def body(state):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans) = state
        c1 = _add(c, 1)
        c1f = _cast(c1, _ops.aval(x).dtype)
        y1, z1 = _add(y, 1.0), _add(z, 2.0)
        yc = _mul(y1, c1f)
        pk = _sub(_mul(pkm1, z1), _mul(pkm2, yc))
        qk = _sub(_mul(qkm1, z1), _mul(qkm2, yc))
        nonzero = _ne(qk, 0.0)
        r = _div(pk, qk)
        t1 = _where(nonzero, ew.abs(_div(_sub(ans, r), r)), _full(r, 1.0))
        ans1 = _where(nonzero, r, ans)
        dpk = _add(_sub(_sub(_mul(dpkm1, z1), pkm1), _mul(dpkm2, yc)), _mul(pkm2, c1f))
        dqk = _add(_sub(_sub(_mul(dqkm1, z1), qkm1), _mul(dqkm2, yc)), _mul(qkm2, c1f))
        dans1 = _where(nonzero, _div(_sub(dpk, _mul(ans1, dqk)), qk), dans)
        dchange = _where(nonzero, ew.abs(_sub(dans1, dans)), _full(dans, 1.0))
        rescale = _gt(ew.abs(pk), 1.0 / eps)
        scaled = lambda v: _where(rescale, _mul(v, eps), v)
        new = [ans1, t1, y1, z1, None, scaled(pk), scaled(qk), scaled(pkm1), scaled(qkm1),
               scaled(dpkm1), scaled(dqkm1), scaled(dpk), scaled(dqk), dans1]
        more = _gt(dchange, eps) if derivative else _gt(t1, eps)
        old = state[1:]
        kept = [c1 if n is None else _where(on, n, o) for n, o in zip(new, old)]
        return (ew.bitwise_and(on, more), *kept)

    y = _sub(1.0, a)
    z = _add(_add(x, y), 1.0)
    pkm1, qkm1 = _add(x, 1.0), _mul(z, x)
    ans = _div(pkm1, qkm1)
    zero = _full(x, 0.0)
    dqkm1 = ew.neg(x)
    dans = _div(ew.neg(_mul(ans, dqkm1)), qkm1)
    count = np.int32(0)     # one term count for all elements
    init = (enabled, ans, _full(x, 1.0), y, z, count, pkm1, qkm1, _full(x, 1.0), x,
            zero, zero, zero, dqkm1, dans)
    out = lax.while_loop(cond, body, init)
    if not derivative:
        return _mul(out[1], ax)
    dlogax_da = _sub(ew.log(x), ew.digamma(a))
    return _mul(ax, _add(_mul(out[1], dlogax_da), out[14]))


def _igamma_prelude(a, x):
    """x^a e^-x / Gamma(a) and whether its logarithm underflows."""
    log_ax = _sub(_sub(_mul(a, ew.log(x)), x), ew.lgamma(a))
    return ew.exp(log_ax), _lt(log_ax, -float(np.log(_finfo(x).max)))


def _igamma_edges(a, x):
    """What igamma and igammac share: the edges x = inf, a = 0 and x = 0, the domain error (NaN
    operands included), and the prelude."""
    is_nan = _or(_isnan(a), _isnan(x))
    x_inf, a_zero, x_zero = _eq(x, np.inf), _eq(a, 0.0), _eq(x, 0.0)
    domain_error = _or(_lt(x, 0.0), _lt(a, 0.0), _and(a_zero, x_zero), is_nan)
    return (x_inf, a_zero, x_zero, domain_error, *_igamma_prelude(a, x))


def _igamma_impl(a, x):
    x_inf, a_zero, x_zero, domain_error, ax, underflow = _igamma_edges(a, x)
    use_fraction = _and(_ge(x, 1.0), _gt(x, a))
    enabled = ew.bitwise_not(_or(x_zero, domain_error, underflow, x_inf))
    out = _where(use_fraction,
                 _sub(1.0, _igammac_fraction(ax, x, a, _and(enabled, use_fraction), False)),
                 _igamma_series(ax, x, a, _and(enabled, ew.bitwise_not(use_fraction)), False))
    out = _where(x_zero, _full(a, 0.0), out)
    out = _where(x_inf, _full(a, 1.0), out)
    return _where(domain_error, _full(a, np.nan), out)


def _igammac_impl(a, x):
    x_inf, a_zero, x_zero, domain_error, ax, underflow = _igamma_edges(a, x)
    use_series = _or(_lt(x, 1.0), _lt(x, a))
    enabled = ew.bitwise_not(_or(domain_error, underflow, x_inf, a_zero))
    out = _where(use_series,
                 _sub(1.0, _igamma_series(ax, x, a, _and(enabled, use_series), False)),
                 _igammac_fraction(ax, x, a, _and(enabled, ew.bitwise_not(use_series)), False))
    out = _where(_or(x_inf, a_zero), _full(out, 0.0), out)
    return _where(domain_error, _full(a, np.nan), out)


def _igamma_grad_a_impl(a, x):
    is_nan = _or(_isnan(a), _isnan(x))
    x_zero = _eq(x, 0.0)
    domain_error = _or(_lt(x, 0.0), _le(a, 0.0))
    use_fraction = _and(_gt(x, 1.0), _gt(x, a))
    ax, underflow = _igamma_prelude(a, x)
    enabled = ew.bitwise_not(_or(x_zero, domain_error, underflow, is_nan))
    out = _where(use_fraction,
                 ew.neg(_igammac_fraction(ax, x, a, _and(enabled, use_fraction), True)),
                 _igamma_series(ax, x, a, _and(enabled, ew.bitwise_not(use_fraction)), True))
    out = _where(x_zero, _full(out, 0.0), out)
    return _where(_or(domain_error, is_nan), _full(a, np.nan), out)


def _chebyshev(x, coefficients):
    """Clenshaw's recurrence for sum' c_k T_k(x/2) in Cephes' convention (highest first)."""
    b0 = b1 = b2 = _full(x, 0.0)
    for c in coefficients:
        b2, b1 = b1, b0
        b0 = _add(_sub(_mul(x, b1), b2), float(c))
    return _mul(_sub(b0, b2), 0.5)


# Cephes' i0e coefficients: on [0, 8] in x/2 - 2, and on (8, inf) in 32/x - 2 (times 1/sqrt(x)).
_I0E_A = [-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
          1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
          -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
          9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
          -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
          1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
          -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
          1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
          -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
          1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1]
_I0E_B = [-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
          3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
          1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
          -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
          7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
          -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
          3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
          2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
          8.04490411014108831608E-1]
# float32 uses the tails of the series (the leading terms are below its precision).
_I0E_COEFFICIENTS = {dt.float64: (_I0E_A, _I0E_B), dt.float32: (_I0E_A[-18:], _I0E_B[-7:])}


def _i0e_impl(x):
    a, b = _I0E_COEFFICIENTS[_ops.aval(x).dtype]
    x = ew.abs(x)
    small = _chebyshev(_sub(_mul(x, 0.5), 2.0), a)
    large = _div(_chebyshev(_sub(_div(32.0, x), 2.0), b), ew.sqrt(x))
    return _where(_le(x, 8.0), small, large)


def _in_float32(impl):
    """``impl`` on f32/f64 operands; float16 and bfloat16 go through float32."""
    def fun(*args):
        dtype = _ops.aval(args[0]).dtype
        if dtype in (dt.float32, dt.float64):
            return impl(*args)
        wide = [ew.convert_element_type(v, dt.float32) for v in args]
        return ew.convert_element_type(impl(*wide), dtype)
    return fun


for _prim, _impl in [(igamma_p, _igamma_impl), (igammac_p, _igammac_impl),
                     (igamma_grad_a_p, _igamma_grad_a_impl),
                     (regularized_incomplete_beta_p, _betainc_impl), (bessel_i0e_p, _i0e_impl)]:
    mlir.register_lowering(_prim, mlir.lower_fun(_in_float32(_impl), multiple_results=False))


def _chlo_lowering(op):
    return lambda ctx, *args: op(*args)


for _prim, _op in [(zeta_p, chlo.zeta), (polygamma_p, chlo.polygamma), (bessel_i1e_p, chlo.bessel_i1e)]:
    mlir.register_lowering(_prim, _chlo_lowering(_op))


# ------------------------------------------------------- random_gamma_grad
# The derivative of a Gamma(a, 1) sample x in a, by implicit reparameterisation: x = F^-1(u; a) of
# the gamma CDF F = igamma(a, x) moves with a as dx/da = -(dF/da) / (dF/dx). The numerator comes
# from the series (x <= 1 or x <= a) or the continued fraction of the incomplete gamma function,
# differentiated term by term: the recurrences, stopping rules and edge cases of JAX's
# lax.random_gamma_grad, so gradients of gamma samples agree bit for bit. float16/bfloat16 are
# computed in float32.

random_gamma_grad_p = elementwise("random_gamma_grad", 2, IS_FLOAT)


def random_gamma_grad(a, x):
    """Elementwise derivative of Gamma(``a``, 1) samples ``x`` with respect to ``a``."""
    a, x = _ops.match_python_scalars("random_gamma_grad", (a, x))
    shape = np.broadcast_shapes(_ops.aval(a).shape, _ops.aval(x).shape)
    a, x = (lax.broadcast_in_dim(v, shape, range(len(shape) - _ops.aval(v).ndim, len(shape)))
            if _ops.aval(v).shape != shape else v for v in (a, x))
    return random_gamma_grad_p.bind(a, x)


def _scalar(x, value):
    """``value`` as a scalar of ``x``'s dtype (typed, so no weak-type promotion enters)."""
    return np.array(value, _ops.aval(x).dtype)


def _sample_grad_series(x, a, enabled, eps):
    """dx/da from the power series of igamma (x small or x <= a)."""
    def body(vals):
        enabled, r, c, ans, x_, dc_da, dans_da = vals
        r_new = lax.add(r, _scalar(r, 1))
        dc_da_new = lax.sub(lax.mul(dc_da, lax.div(x_, r_new)), lax.div(lax.mul(c, x_), lax.mul(r_new, r_new)))
        dans_da_new = lax.add(dans_da, dc_da_new)
        c_new = lax.mul(c, lax.div(x_, r_new))
        ans_new = lax.add(ans, c_new)
        going = lax.bitwise_and(enabled, lax.gt(lax.abs(lax.div(dc_da_new, dans_da_new)), _scalar(x_, eps)))
        new = (r_new, c_new, ans_new, x_, dc_da_new, dans_da_new)
        return (going, *(_where(enabled, n, o) for n, o in zip(new, vals[1:])))

    one, zero = lax.full_like(a, 1), lax.full_like(a, 0)
    vals = while_loop(lambda v: _any(v[0]), body, (enabled, a, one, one, x, zero, zero))
    ans, dans_da = vals[3], vals[6]
    dlogax_da = lax.sub(lax.log(x), lax.digamma(lax.add(a, _scalar(a, 1))))
    return lax.div(lax.mul(lax.neg(lax.add(dans_da, lax.mul(ans, dlogax_da))), x), a)


def _sample_grad_fraction(x, a, enabled, eps):
    """dx/da from the continued fraction of igammac (x large and x > a), up to 2000 terms."""
    dtype = _ops.aval(x).dtype

    def cond(vals):
        return lax.bitwise_and(lax.lt(vals[5], np.array(2000, dtype)), _any(vals[0]))

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = lax.add(c, np.array(1, dtype))
        y = lax.add(y, _scalar(y, 1))
        z = lax.add(z, _scalar(z, 2))
        yc = lax.mul(y, c)
        pk = lax.sub(lax.mul(pkm1, z), lax.mul(pkm2, yc))
        qk = lax.sub(lax.mul(qkm1, z), lax.mul(qkm2, yc))
        qk_nonzero = lax.ne(qk, _scalar(qk, 0))
        r = lax.div(pk, qk)
        t = _where(qk_nonzero, lax.abs(lax.div(lax.sub(ans, r), r)), lax.full_like(r, 1))
        ans = _where(qk_nonzero, r, ans)
        dpk_da = lax.add(lax.sub(lax.sub(lax.mul(dpkm1_da, z), pkm1), lax.mul(dpkm2_da, yc)), lax.mul(pkm2, c))
        dqk_da = lax.add(lax.sub(lax.sub(lax.mul(dqkm1_da, z), qkm1), lax.mul(dqkm2_da, yc)), lax.mul(qkm2, c))
        dans_da_new = _where(qk_nonzero, lax.div(lax.sub(dpk_da, lax.mul(ans, dqk_da)), qk), dans_da)
        grad_step = _where(qk_nonzero, lax.abs(lax.sub(dans_da_new, dans_da)), lax.full_like(dans_da, 1))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        # Rescale the convergents (and their derivatives) before they overflow.
        rescale = lax.gt(lax.abs(pk), lax.div(np.array(1, dtype), np.array(eps, dtype)))
        pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            _where(rescale, lax.mul(v, np.array(eps, dtype)), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        going = lax.bitwise_and(enabled, lax.gt(grad_step, np.array(eps, dtype)))
        new = (ans, t, y, z)
        rest = (pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
        return (going, *(_where(enabled, n, o) for n, o in zip(new, vals[1:5])), c,
                *(_where(enabled, n, o) for n, o in zip(rest, vals[6:])))

    y = lax.sub(_scalar(a, 1), a)
    z = lax.add(lax.add(x, y), _scalar(x, 1))
    pkm1 = lax.add(x, _scalar(x, 1))
    qkm1 = lax.mul(z, x)
    ans = lax.div(pkm1, qkm1)
    zeros = lax.full_like(x, 0)
    dqkm1_da = lax.neg(x)
    dans_da = lax.div(lax.sub(zeros, lax.mul(ans, dqkm1_da)), qkm1)
    init = (enabled, ans, lax.full_like(x, 1), y, z, np.array(0, dtype), pkm1, qkm1, lax.full_like(x, 1), x,
            zeros, zeros, zeros, dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans, dans_da = vals[1], vals[14]
    dlogax_da = lax.sub(lax.log(x), lax.digamma(a))
    return lax.neg(lax.mul(lax.add(dans_da, lax.mul(ans, dlogax_da)), x))


def _random_gamma_grad_impl(a, x):
    dtype = _ops.aval(a).dtype
    if dtype in (dt.float16, dt.bfloat16):     # computed in float32, as in JAX
        out = _random_gamma_grad_impl(*(lax.convert_element_type(v, np.float32) for v in (a, x)))
        return lax.convert_element_type(out, dtype)
    eps = float(dt.finfo(dtype).eps)
    is_nan = lax.bitwise_or(lax.ne(a, a), lax.ne(x, x))
    x_is_zero = lax.eq(x, _scalar(x, 0))
    domain_error = lax.bitwise_or(lax.lt(x, _scalar(x, 0)), lax.le(a, _scalar(a, 0)))
    use_continued_fraction = lax.bitwise_and(lax.gt(x, _scalar(x, 1)), lax.gt(x, a))
    log_ax = lax.sub(lax.sub(lax.mul(a, lax.log(x)), x), lax.lgamma(a))
    underflow = lax.lt(log_ax, lax.neg(lax.log(np.array(dt.finfo(dtype).max, dtype))))
    enabled = lax.bitwise_not(lax.bitwise_or(lax.bitwise_or(lax.bitwise_or(x_is_zero, domain_error), underflow),
                                             is_nan))
    out = _where(use_continued_fraction,
                  lax.neg(_sample_grad_fraction(x, a, lax.bitwise_and(enabled, use_continued_fraction), eps)),
                  _sample_grad_series(x, a, lax.bitwise_and(enabled, lax.bitwise_not(use_continued_fraction)), eps))
    out = _where(x_is_zero, lax.full_like(out, 0), out)
    return _where(lax.bitwise_or(domain_error, is_nan), lax.full_like(a, np.nan), out)


mlir.register_lowering(random_gamma_grad_p, mlir.lower_fun(_random_gamma_grad_impl, multiple_results=False))


def _random_gamma_grad_jvp(primals, tangents):
    """Forward-mode through the recurrences (as JAX differentiates its loop-based function)."""
    cj = trace_to_jaxpr(lambda a, x: [_random_gamma_grad_impl(a, x)], [_ops.aval(v) for v in primals],
                        name="random_gamma_grad")
    (out,), (tangent_out,) = jvp_eval(cj.jaxpr, cj.consts, list(primals), list(tangents))
    return out, tangent_out


ad.primitive_jvps[random_gamma_grad_p] = _random_gamma_grad_jvp


# ---------------------------------------------------------- jet (Taylor series)
def _polygamma_jet(primals_in, series_in):
    """Beyond JAX: through x (m, an integer order, held fixed); the derivative is polygamma(m + 1, x)."""
    m, x = primals_in
    return polygamma_p.bind(m, x), jet.deriv_series(lambda x: polygamma(m + 1, x), x, series_in[1])


jet.jet_rules[polygamma_p] = _polygamma_jet
