"""``jaxprc.test_util``: JAX's gradient checks against finite differences (``jax.test_util``).

Each check looks in one pseudo-random direction (numpy's ``RandomState(0)``, as JAX draws it),
so it stays cheap for large inputs: ``check_jvp`` compares ``f_jvp``'s tangent with the central
difference ``(f(x + eps t) - f(x - eps t)) / (2 eps)``; ``check_vjp`` compares the projections
``<t, vjp(ct)>`` and ``<jvp(t), ct>``; ``check_grads`` runs them on ``jvp`` / ``vjp`` of ``f``,
recursively up to ``order``. Tolerances are JAX's per dtype, scaled by the array size as JAX
scales them; a mismatch raises ``AssertionError``.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from .transformations.ad import jvp, linearize, vjp
from .ir import dtypes as dt
from .tree_util import tree_map, tree_reduce

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

# Python scalars are taken at 64 bits, then narrowed like any dtype when tolerances are looked up.
_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
                         complex: np.dtype(np.complex128)}

_F8 = [getattr(ml_dtypes, n) for n in ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                                       "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")]
_COARSE = {np.dtype(t): 1e-1 for t in _F8} | {np.dtype(ml_dtypes.float4_e2m1fn): 1.0,
                                              np.dtype(ml_dtypes.float8_e8m0fnu): 1.0}
# Exact comparison for integers and booleans; what a dtype missing from a tolerance dict gets.
_VALUE_TOLERANCE = {np.dtype(t): 0 for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    ml_dtypes.int2, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.uint4)} | {dt.float0: 0} | _COARSE | {
    np.dtype(ml_dtypes.bfloat16): 1e-2, np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
    np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-15}
_GRADIENT_TOLERANCE = _COARSE | {
    np.dtype(ml_dtypes.bfloat16): 1e-1, np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
    np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5}
_UPCAST = {np.dtype(t) for t in _F8} | {np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float4_e2m1fn),
                                        np.dtype(ml_dtypes.float8_e8m0fnu)}


def _is_python_scalar(x) -> bool:
    return type(x) in _PYTHON_SCALAR_DTYPES or (isinstance(x, (bool, int, float, complex))
                                                and not isinstance(x, np.generic))


def _dtype(x) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    for kind, dtype in _PYTHON_SCALAR_DTYPES.items():
        if type(x) is kind:
            return dtype
    return np.asarray(x).dtype


def _merged(tol, defaults: dict):
    """A tolerance as given (a number), or a dict over ``defaults``."""
    if tol is None:
        return defaults
    if not isinstance(tol, dict):
        return tol
    return defaults | {np.dtype(k): v for k, v in tol.items()}


def _tolerance(dtype, tol) -> float:
    if not isinstance(tol, dict):
        return tol
    dtype = dt.canonicalize_dtype(dtype)
    return tol.get(dtype, _VALUE_TOLERANCE[dtype])


def _assert_close_leaf(a, b, atol, rtol, err_msg: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{err_msg}: shapes differ, {a.shape} vs {b.shape}"
    if a.dtype == b.dtype == dt.float0:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    atol = max(_tolerance(a.dtype, atol), _tolerance(b.dtype, atol)) * a.size
    rtol = max(_tolerance(a.dtype, rtol), _tolerance(b.dtype, rtol)) * b.size
    a, b = (x.astype(np.float32) if x.dtype in _UPCAST else x for x in (a, b))
    kw = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v}    # 0: numpy's own default
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(a, b, **kw, err_msg=err_msg)


def _check_close(xs, ys, atol, rtol, err_msg: str) -> None:
    tree_map(lambda a, b: _assert_close_leaf(a, b, atol, rtol, err_msg), xs, ys)


def _check_dtypes_match(xs, ys) -> None:
    def same(x, y):
        a, b = _dtype(x), _dtype(y)
        if not dt.config.jax_enable_x64:
            a, b = dt.canonicalize_dtype(a), dt.canonicalize_dtype(b)
        assert a == b, f"dtypes differ: {a} vs {b}"
    tree_map(same, xs, ys)


def _keeping_type(op):
    """``op`` on numpy values in the first operand's dtype; Python scalars stay Python scalars."""
    def apply(*xs):
        out = np.array(op(*(np.asarray(x) for x in xs)), dtype=_dtype(xs[0]))
        return out.item() if all(_is_python_scalar(x) for x in xs) else out
    return functools.partial(tree_map, apply)


_add, _sub, _conj = _keeping_type(np.add), _keeping_type(np.subtract), _keeping_type(np.conj)


def _safe_sub(xs, ys):
    """``x - y`` with ``inf - inf = 0`` (an infinite value that stays put has no slope)."""
    def sub(x, y):
        dtype = _dtype(x)
        x, y = np.asarray(x), np.asarray(y)
        with np.errstate(invalid="ignore"):
            return np.where(x == y, np.array(0, dtype), np.subtract(x, y, dtype=dtype))
    return tree_map(sub, xs, ys)


def _scale(xs, a):
    def mul(x):
        dtype = _dtype(x)
        out = np.multiply(np.asarray(x), np.array(a, dtype=dtype), dtype=dtype)
        return out.item() if _is_python_scalar(x) else out
    return tree_map(mul, xs)


def _random_like(rng: np.random.RandomState, x):
    dtype = _dtype(x)
    draw = lambda: np.asarray(rng.randn(*np.shape(x)), dtype=dtype)   # noqa: E731
    out = draw() + dtype.type(1j) * draw() if np.issubdtype(dtype, np.complexfloating) else draw()
    return out.item() if _is_python_scalar(x) else out


def _inner(xs, ys):
    def dot(x, y):
        return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
    return tree_reduce(np.add, tree_map(dot, xs, ys))


def _numerical_jvp(f, primals, tangents, eps):
    step = _scale(tangents, eps)
    return _scale(_safe_sub(f(*_add(primals, step)), f(*_sub(primals, step))), 0.5 / eps)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check ``f_jvp`` (typically ``functools.partial(jaxprc.jvp, f)``) at ``args`` against finite
    differences of ``f`` in one random direction; AssertionError if they differ."""
    atol, rtol = _merged(atol, _GRADIENT_TOLERANCE), _merged(rtol, _GRADIENT_TOLERANCE)
    rng = np.random.RandomState(0)
    tangent = tree_map(functools.partial(_random_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_expected = f(*args)
    _check_dtypes_match(v_out, v_expected)
    t_expected = _numerical_jvp(f, args, tangent, eps)
    _check_close(v_out, v_expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    _check_close(t_out, t_expected, atol, rtol, f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check ``f_vjp`` (typically ``functools.partial(jaxprc.vjp, f)``) at ``args``: the projection
    of a random cotangent's VJP on a random tangent against finite differences; AssertionError
    if they differ."""
    atol, rtol = _merged(atol, _GRADIENT_TOLERANCE), _merged(rtol, _GRADIENT_TOLERANCE)
    random_like = functools.partial(_random_like, np.random.RandomState(0))
    v_out, vjp_fun = f_vjp(*args)
    _check_close(v_out, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_map(random_like, args)
    tangent_out = _numerical_jvp(f, args, tangent, eps)
    cotangent = tree_map(random_like, v_out)
    cotangent_out = _conj(vjp_fun(_conj(cotangent)))
    _check_close(_inner(tangent, cotangent_out), _inner(tangent_out, cotangent), atol, rtol,
                 f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def _jvp_by_linearize(f, primals, tangents):
    out, f_lin = linearize(f, *primals)
    return out, f_lin(*tangents)


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives at ``args`` up to ``order`` against finite differences: forward
    (``"fwd"``, jvp), reverse (``"rev"``, vjp) and/or ``"lin"`` (linearize) mode, each in one
    random direction; AssertionError if they differ."""
    args, eps = tuple(args), eps or EPS
    jvp_check = functools.partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
    vjp_check = functools.partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

    def forward(f, args, order, what, name, make_jvp):
        msg = f"{name} of {what}" if what else name
        jvp_check(f, functools.partial(make_jvp, f), args, err_msg=msg)
        if order > 1:
            check(functools.partial(make_jvp, f), (args, args), order - 1, msg)

    def check(f, args, order, what=""):        # JAX's order: fwd, rev, lin
        if "fwd" in modes:
            forward(f, args, order, what, "JVP", jvp)
        if "rev" in modes:
            msg = f"VJP of {what}" if what else "VJP"
            vjp_check(f, functools.partial(vjp, f), args, err_msg=msg)
            if order > 1:
                def pulled_back(*args):
                    out, pullback = vjp(f, *args)
                    return pullback(out)
                check(pulled_back, args, order - 1, msg)
        if "lin" in modes:
            forward(f, args, order, what, "LIN", _jvp_by_linearize)

    check(f, args, order)
