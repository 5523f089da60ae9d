"""The error function family and the normal distribution: erf, erfc, erfinv, erfcx, wofz (the
Faddeeva function), dawsn, ndtr, ndtri, log_ndtr, owens_t."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as jnp
from ...transformations.custom_derivatives import custom_jvp
from ...ir import dtypes as dt
from ._common import dtype_of, finfo, float32_or_64, inexact, polyval, strong

_SQRT_PI = float(np.sqrt(np.pi))


def erf(x):
    return lax.erf(inexact("erf", x))


def erfc(x):
    return lax.erfc(inexact("erfc", x))


def erfinv(x):
    return lax.erf_inv(inexact("erfinv", x))


# ------------------------------------------------------------------ erfcx, wofz

def _erfcx_asymptotic(x, nterms):
    """erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k, for large x."""
    coefficients = [7918.06640625, -1055.7421875, 162.421875, -29.53125, 6.5625, -1.875, 0.75, -0.5, 1.0]
    return polyval(coefficients[-nterms:], 1.0 / (x * x)) / (x * _SQRT_PI)


def _erfcx_real(x):
    """exp(x^2) erfc(x) directly, and asymptotically where exp(x^2) would overflow."""
    threshold = float(np.sqrt(np.log(finfo(x).max)))
    large = x > threshold
    safe = jnp.where(large, 1.0, x)
    return jnp.where(large, _erfcx_asymptotic(x, 9 if dtype_of(x) == dt.float64 else 5),
                     jnp.exp(safe * safe) * lax.erfc(safe))


@custom_jvp
def _erfcx(x):
    if dtype_of(x) in (dt.float32, dt.float64):
        return _erfcx_real(x)
    return _erfcx_real(x.astype(dt.float32)).astype(dtype_of(x))


_erfcx.defjvps(lambda t, ans, x: t * (2 * x * ans - 2.0 / _SQRT_PI))

# Weideman's rational approximation of w(z) in the upper half plane (N = 32, L = 2^(1/4) sqrt(N)).
_WOFZ_L = 4.756828460010884
_WOFZ_C = [-1.3034426067909105e-12, 3.741183837373847e-12, 8.030427700497756e-12, -2.154359355749088e-11,
           -5.544244996323793e-11, 1.165824698850374e-10, 4.1537441121999766e-10, -5.231020211492061e-10,
           -3.2080151339721323e-09, 8.124886421653591e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
           -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07, 4.401531731283225e-06,
           6.821031944357515e-06, -2.1409619201999998e-05, -0.0001307544925457942, -0.00024532980270038237,
           0.00039259136070109705, 0.004519541105349309, 0.0190061557848455, 0.05730440352983728,
           0.14060716226893755, 0.2954445107150874, 0.5460139720639338, 0.9019254893648001,
           1.345544169234545, 1.8256696296324815, 2.2635372999002676, 2.5722534081245696]


def _wofz_upper(z):
    iz = lax.complex(-jnp.imag(z), jnp.real(z))
    denominator = _WOFZ_L - iz
    p = polyval(_WOFZ_C, (_WOFZ_L + iz) / denominator)
    return 2 * p / (denominator * denominator) + (1.0 / _SQRT_PI) / denominator


@custom_jvp
def _wofz(z):
    """The lower half plane by w(-z) = 2 exp(-z^2) - w(z)."""
    upper = jnp.imag(z) >= 0
    w = _wofz_upper(jnp.where(upper, z, -z))
    return jnp.where(upper, w, 2 * jnp.exp(-(z * z)) - w)


_wofz.defjvps(lambda t, ans, z: t * (-2 * z * ans + 2j / _SQRT_PI))


def wofz(z):
    """The Faddeeva function w(z) = exp(-z^2) erfc(-iz) (complex result)."""
    z = inexact("wofz", z, complex_ok=True)
    if not dt.is_complex(dtype_of(z)):
        z = z.astype(dt.complex128 if dtype_of(z) == dt.float64 else dt.complex64)
    return _wofz(z)


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x) (complex x through wofz)."""
    x = inexact("erfcx", x, complex_ok=True)
    if dt.is_complex(dtype_of(x)):
        return _wofz(lax.complex(-jnp.imag(x), jnp.real(x)))
    return strong(_erfcx(x))


# ------------------------------------------------------------------------ dawsn
# Cephes' rational approximations on [0, 3.25), [3.25, 6.25) and [6.25, inf).
_DAWSN_AN = [1.1368149897175597e-11, 8.492622676674738e-10, 1.9443420417555306e-08, 9.531517412544844e-07,
             3.078283098749132e-06, 0.00035251336852028877, -0.0008501498467244109, 0.04226182230055466,
             -0.09174803717734524, 1.0]
_DAWSN_AD = [2.403720730667626e-11, 1.488646813684934e-09, 5.212652810105416e-08, 1.2725847827318697e-06,
             2.324902498207895e-05, 0.00032552474182605793, 0.003488058146571626, 0.027944853119882897,
             0.15887424196012057, 0.5749186294893204, 1.0]
_DAWSN_BN = [0.5089551564179009, -0.24475441814269785, 0.09415123353035344, -0.021871125514203903,
             0.003662076123295692, -0.0004232091144603888, 3.5964130479389666e-05, -2.1464035171996896e-06,
             9.100107800763914e-08, -2.4027452082825098e-09, 3.592333854409284e-11]
_DAWSN_BD = [1.0, -0.6318398698733682, 0.2367067882282487, -0.053180636700322324, 0.008480417185862954,
             -0.0009479967684866654, 7.810255929445524e-05, -4.558751532524426e-06, 1.8910035811142186e-07,
             -4.913246913319206e-09, 7.184664032357345e-11]
_DAWSN_CN = [-0.5905928605347732, 0.6292352427243688, -0.17285897538038814, 0.016483704782518965,
             -0.0004868276130204627]
_DAWSN_CD = [1.0, -2.698200571975449, 1.7327079904594784, -0.3937085822819395, 0.03442789240412334,
             -0.0009736552260409412]


def _dawsn_real(x):
    ax = jnp.abs(x)
    first, second = ax < 3.25, ax < 6.25
    r1 = jnp.where(first, ax, 1.0)
    v1 = r1 * polyval(_DAWSN_AN, r1 * r1) / polyval(_DAWSN_AD, r1 * r1)
    t = 1.0 / (ax * ax)

    def tail(mask, num, den):
        t_, ax_ = jnp.where(mask, t, 1.0), jnp.where(mask, ax, 1.0)
        return 0.5 / ax_ * (1.0 + t_ * polyval(num, t_) / polyval(den, t_))

    v2 = tail(~first & second, _DAWSN_BN, _DAWSN_BD)
    v3 = tail(~second, _DAWSN_CN, _DAWSN_CD)
    return jnp.sign(x) * jnp.where(first, v1, jnp.where(second, v2, v3))


@custom_jvp
def _dawsn(x):
    if dtype_of(x) in (dt.float32, dt.float64):
        return _dawsn_real(x)
    return _dawsn_real(x.astype(dt.float32)).astype(dtype_of(x))


_dawsn.defjvps(lambda t, ans, x: t * (1.0 - 2.0 * x * ans))


def dawsn(x):
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt."""
    return strong(_dawsn(inexact("dawsn", x)))


# ---------------------------------------------------------- the normal distribution

def _ndtr(x):
    """Phi(x) from erf near 0 and erfc in the tails (no cancellation)."""
    w = x * float(0.5 * np.sqrt(2.0))
    z = jnp.abs(w)
    return 0.5 * jnp.where(z < float(0.5 * np.sqrt(2.0)), 1.0 + lax.erf(w),
                           jnp.where(w > 0, 2.0 - lax.erfc(z), lax.erfc(z)))


def ndtr(x):
    """The standard normal CDF Phi(x)."""
    return strong(_ndtr(float32_or_64("ndtr", x)))


# Cephes' ndtri: a rational function of (p - 1/2) in the middle, of 1/sqrt(-2 log p) in the tails.
_NDTRI_P0 = [-59.96335010141079, 98.00107541859997, -56.67628574690703, 13.931260938727968, -1.2391658386738125]
_NDTRI_Q0 = [1.0, 1.9544885833814176, 4.676279128988815, 86.36024213908905, -225.46268785411937,
             200.26021238006066, -82.03722561683334, 15.90562251262117, -1.1833162112133]
_NDTRI_P1 = [4.0554489230596245, 31.525109459989388, 57.16281922464213, 44.08050738932008, 14.684956192885803,
             2.1866330685079025, -0.1402560791713545, -0.03504246268278482, -0.0008574567851546854]
_NDTRI_Q1 = [1.0, 15.779988325646675, 45.39076351288792, 41.3172038254672, 15.04253856929075,
             2.504649462083094, -0.14218292285478779, -0.03808064076915783, -0.0009332594808954574]
_NDTRI_P2 = [3.2377489177694603, 6.915228890689842, 3.9388102529247444, 1.3330346081580755,
             0.20148538954917908, 0.012371663481782003, 0.00030158155350823543, 2.6580697468673755e-06,
             6.239745391849833e-09]
_NDTRI_Q2 = [1.0, 6.02427039364742, 3.6798356385616087, 1.3770209948908132, 0.21623699359449663,
             0.013420400608854318, 0.00032801446468212774, 2.8924786474538068e-06, 6.790194080099813e-09]


def ndtri(p):
    """The inverse of ndtr: x with Phi(x) = p (-inf at 0, inf at 1, NaN outside [0, 1])."""
    p = float32_or_64("ndtri", p)
    dtype = dtype_of(p)
    near_one = p > float(-np.expm1(-2.0))
    q = jnp.where(near_one, 1.0 - p, p)
    q = jnp.where(q == 0.0, 0.5, q)
    w = q - 0.5
    ww = w * w
    middle = (w + w * ww * (polyval(_NDTRI_P0, ww) / polyval(_NDTRI_Q0, ww))) * -float(np.sqrt(2.0 * np.pi))
    z = jnp.sqrt(-2.0 * jnp.log(q))
    first = z - jnp.log(z) / z
    inv = 1.0 / z
    far = first - polyval(_NDTRI_P2, inv) / polyval(_NDTRI_Q2, inv) / z
    near = first - polyval(_NDTRI_P1, inv) / polyval(_NDTRI_Q1, inv) / z
    x = jnp.where(q > float(np.exp(-2.0)), middle, jnp.where(z >= 8.0, far, near))
    x = jnp.where(near_one, x, -x)
    return jnp.where(p == 0.0, -np.inf, jnp.where(p == 1.0, np.inf, x)).astype(dtype)


_LOG_NDTR_SEGMENTS = {dt.float64: (-20.0, 8.0), dt.float32: (-10.0, 5.0)}


def _log_ndtr_lower(x, series_order):
    """log Phi(x) for very negative x: the asymptotic series of Phi(x) sqrt(2 pi) (-x) e^(x^2/2)."""
    x2 = x * x
    log_scale = -0.5 * x2 - jnp.log(-x) - float(0.5 * np.log(2.0 * np.pi))
    if series_order <= 0:
        return log_scale
    even, odd = jnp.zeros_like(x), jnp.zeros_like(x)
    x2n = x2
    for n in range(1, series_order + 1):
        term = float(np.prod(np.arange(2 * n - 1, 1, -2))) / x2n    # (2n-1)!! / x^2n
        if n % 2:
            odd = odd + term
        else:
            even = even + term
        x2n = x2n * x2
    return log_scale + jnp.log(1.0 + even - odd)


def _log_ndtr(series_order, x):
    lower, upper = _LOG_NDTR_SEGMENTS[dtype_of(x)]
    above = x > upper
    phi = _ndtr(jnp.where(above, -x, jnp.maximum(x, lower)))
    return jnp.where(above, -phi, jnp.where(x > lower, jnp.log(phi),
                                              _log_ndtr_lower(jnp.minimum(x, lower), series_order)))


_log_ndtr_custom = custom_jvp(_log_ndtr, nondiff_argnums=(0,))


def _norm_logpdf(x):
    return -0.5 * x * x - float(np.log(np.sqrt(2 * np.pi)))


@_log_ndtr_custom.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    (x,), (t,) = primals, tangents
    ans = _log_ndtr_custom(series_order, x)
    return ans, t * jnp.exp(_norm_logpdf(x) - ans)


def log_ndtr(x, series_order: int = 3):
    """log Phi(x), accurate in both tails (an asymptotic series of ``series_order`` terms below
    -20 in float64, -10 in float32; -Phi(-x) above 8 or 5)."""
    if not isinstance(series_order, int):
        raise TypeError("log_ndtr: series_order must be a Python integer")
    if series_order < 0:
        raise ValueError("log_ndtr: series_order must be non-negative")
    if series_order > 30:
        raise ValueError("log_ndtr: series_order must be <= 30")
    return strong(_log_ndtr_custom(series_order, float32_or_64("log_ndtr", x)))


# ---------------------------------------------------------------------- owens_t
# Gauss-Legendre nodes and weights (13 points on [0, 1]) for T(h, a) with |a| <= 1.
_OWENS_T_POINTS = np.array([0.0035082039676451716, 0.031279042338030756, 0.08526682628321945,
                            0.16245071730812277, 0.25851196049125436, 0.3680755384069753,
                            0.485010929056047, 0.6027751415261857, 0.7147788421775323, 0.814755109887601,
                            0.8971102975594897, 0.9572380808594426, 0.991788329746297])
_OWENS_T_WEIGHTS = np.array([0.018831438115323503, 0.01856708624397765, 0.018042093461223385,
                             0.017263829606398752, 0.016243219975989858, 0.014994592034116705,
                             0.013535474469662087, 0.011886351605820165, 0.010070377242777432,
                             0.008113054574229958, 0.006041900952847024, 0.0038862217010742057,
                             0.001679303108454609])


def _owens_t_quadrature(h, a):
    dtype = dtype_of(a)
    r = jnp.square(a)[..., None] * _OWENS_T_POINTS.astype(dtype)
    integrand = jnp.exp(-0.5 * jnp.square(h)[..., None] * (1.0 + r)) / (1.0 + r)
    return a * jnp.sum(integrand * _OWENS_T_WEIGHTS.astype(dtype), axis=-1)


@custom_jvp
def _owens_t(h, a):
    """|a| > 1 by T(h, a) = (Phi(h) + Phi(ah))/2 - Phi(h) Phi(ah) - T(ah, 1/a) (h >= 0)."""
    h = jnp.abs(h)
    abs_a = jnp.abs(a)
    root_2 = float(np.sqrt(2))
    h_normed = h / root_2
    mod_a = jnp.where(abs_a <= 1.0, abs_a, 1.0 / abs_a)
    mod_h = jnp.where(abs_a <= 1.0, h, abs_a * h)
    out = _owens_t_quadrature(mod_h, mod_a)
    out = jnp.where(mod_h == 0.0, jnp.arctan(mod_a) / (2 * np.pi), out)
    out = jnp.where(mod_a == 1.0, 0.125 * lax.erfc(-mod_h / root_2) * lax.erfc(mod_h / root_2), out)
    norm_h, norm_ah = lax.erfc(h_normed), lax.erfc(abs_a * h_normed)
    small = 0.25 - 0.25 * lax.erf(h_normed) * lax.erf(abs_a * h_normed) - out
    large = 0.25 * (norm_h + norm_ah - norm_h * norm_ah) - out
    out = jnp.where(abs_a > 1.0, jnp.where(abs_a * h <= 0.67, small, large), out)
    out = jnp.sign(a) * out
    return jnp.where(jnp.isnan(a) | jnp.isnan(h), jnp.nan, out)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    (h, a), (dh, da) = primals, tangents
    out = _owens_t(h, a)
    d_h = -jnp.exp(-0.5 * h * h) * lax.erf(a * h / float(np.sqrt(2))) / (2.0 * float(np.sqrt(2.0 * np.pi)))
    d_a = jnp.exp(-0.5 * (a * a + 1.0) * h * h) / (2.0 * np.pi * (a * a + 1.0))
    return out, (d_h * dh + d_a * da).astype(dtype_of(out))


def owens_t(h, a):
    """Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2)/2) / (1 + x^2) dx."""
    return _owens_t(*inexact("owens_t", h, a))
