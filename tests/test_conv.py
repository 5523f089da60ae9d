"""Convolutions and windowed reductions against direct numpy computations: values, finite
differences (convolution is bilinear, so central differences are exact up to rounding),
transposition identities <ct, J t> = <J^T ct, t>, vmap against a loop, and the text round trip."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir.core import JaxprTypeError
from roundtrip import assert_round_trip

RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _dilate_pad(x, axes, dilation, padding, fill):
    """``x`` with ``dilation - 1`` fill values between elements and (low, high) padding (negative
    padding crops) along ``axes``."""
    for ax, d, (lo, hi) in zip(axes, dilation, padding):
        n = x.shape[ax]
        shape = list(x.shape)
        shape[ax] = 0 if n == 0 else (n - 1) * d + 1
        out = np.full(shape, fill, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(None, None, d)
        out[tuple(idx)] = x
        widths = [(0, 0)] * x.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        out = np.pad(out, widths, constant_values=fill)
        idx[ax] = slice(max(-lo, 0), out.shape[ax] - max(-hi, 0))
        x = out[tuple(idx)]
    return x


def _windows(x, axes, window, strides, dilation):
    """(..., *out positions, *window taps) of ``x`` along ``axes``."""
    span = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    v = sliding_window_view(x, span, axis=axes)
    idx = [slice(None)] * x.ndim + [slice(None, None, d) for d in dilation]
    for ax, s in zip(axes, strides):
        idx[ax] = slice(None, None, s)
    return v[tuple(idx)]


def np_conv(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
            feature_group_count=1, batch_group_count=1):
    """conv_general_dilated by definition: every output element a sum over one window."""
    dn = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    lhs, rhs = np.transpose(lhs, dn.lhs_spec), np.transpose(rhs, dn.rhs_spec)
    ns = lhs.ndim - 2
    sp = tuple(range(2, 2 + ns))
    lhs_dilation, rhs_dilation = lhs_dilation or (1,) * ns, rhs_dilation or (1,) * ns
    if isinstance(padding, str):
        padding = lax.padtype_to_pads(lhs.shape[2:], [(k - 1) * d + 1 for k, d in zip(rhs.shape[2:], rhs_dilation)],
                                      window_strides, padding)
    lhs = _dilate_pad(lhs, sp, lhs_dilation, padding, 0)
    win = _windows(lhs, sp, rhs.shape[2:], window_strides, rhs_dilation)      # N C *out *k
    n, c, o = win.shape[0], win.shape[1], rhs.shape[0]
    out_space = win.shape[2:2 + ns]
    win = win.reshape(n, c, int(np.prod(out_space)), -1)
    kern = rhs.reshape(o, rhs.shape[1], -1)
    groups = max(feature_group_count, batch_group_count)
    og = o // groups
    parts = []
    for g in range(groups):
        if batch_group_count > 1:
            nb = n // groups
            w = win[g * nb:(g + 1) * nb]
        else:
            cg = c // groups
            w = win[:, g * cg:(g + 1) * cg]
        parts.append(np.einsum("ncpk,ock->nop", w.astype(np.float64), kern[g * og:(g + 1) * og].astype(np.float64)))
    out = np.concatenate(parts, axis=1).reshape(parts[0].shape[0], o, *out_space)
    return np.transpose(out, np.argsort(dn.out_spec)).astype(np.float32)


CONFIGS = [
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(2,), padding="SAME")),
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(1,), padding="SAME_LOWER", rhs_dilation=(2,))),
    ((2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(2, 1), padding=((1, 2), (0, -1)), lhs_dilation=(2, 1),
                                      rhs_dilation=(1, 2))),
    ((2, 6, 5, 3), (3, 2, 3, 6), dict(window_strides=(1, 1), padding="SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 4, 5, 5), (6, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ((4, 3, 5, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ((5, 4, 2, 3), (2, 3, 4, 2), dict(window_strides=(1, 1), padding=((1, 0), (0, 1)),
                                      dimension_numbers=("HCNW", "WHIO", "NWHC"))),
    ((1, 2, 4, 3, 5), (3, 2, 2, 2, 3), dict(window_strides=(1, 2, 1), padding="SAME", rhs_dilation=(1, 1, 2))),
]


def _vdot(a, b):
    return float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))


@pytest.mark.sample(2)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("i", range(len(CONFIGS)))
def test_conv_against_numpy_fd_and_transposes(i):
    xs, ws, kw = CONFIGS[i]
    x, w = rand(*xs), rand(*ws)
    f = jx.jit(lambda x, w: lax.conv_general_dilated(x, w, **kw))
    y = f(x, w)
    np.testing.assert_allclose(y, np_conv(x, w, **kw), rtol=1e-4, atol=1e-4)
    tx, tw = rand(*xs), rand(*ws)
    _, ty = jx.jvp(f, (x, w), (tx, tw))
    eps = 1e-2
    fd = (np.asarray(f(x + eps * tx, w + eps * tw), np.float64) - f(x - eps * tx, w - eps * tw)) / (2 * eps)
    np.testing.assert_allclose(ty, fd, rtol=1e-3, atol=1e-3)
    ct = rand(*y.shape)
    _, vjp = jx.vjp(f, x, w)
    cx, cw = vjp(ct)
    for cot, tangent, jv in [(cx, tx, f(tx, w)), (cw, tw, f(x, tw))]:
        np.testing.assert_allclose(_vdot(cot, tangent), _vdot(ct, jv), rtol=1e-4)


@pytest.mark.parametrize("i", [0, 2, 4, 5, 6])
def test_conv_vmap_matches_loop(i):
    xs, ws, kw = CONFIGS[i]
    xb, wb = rand(3, *xs), rand(3, *ws)
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)
    for axes in [(0, 0), (0, None), (None, 0), (1, 2)]:
        x = np.moveaxis(xb, 0, axes[0]) if axes[0] is not None else xb[0]
        w = np.moveaxis(wb, 0, axes[1]) if axes[1] is not None else wb[0]
        got = jx.jit(jx.vmap(f, in_axes=axes))(x, w)
        loop = [np_conv(xb[k] if axes[0] is not None else xb[0], wb[k] if axes[1] is not None else wb[0], **kw)
                for k in range(3)]
        np.testing.assert_allclose(got, np.stack(loop), rtol=1e-4, atol=1e-4)


def test_conv_helpers_round_trip_and_errors():
    x, w = rand(2, 5, 4, 3), rand(3, 2, 3, 4)
    dn = ("NHWC", "HWIO", "NHWC")
    # conv_transpose with transpose_kernel is the input gradient of the forward conv
    fwd = lambda z: lax.conv_general_dilated(z, w, (2, 1), "SAME", dimension_numbers=dn)
    z = rand(2, 10, 4, 3)
    ct = rand(*np.shape(fwd(z)))
    grad_in = jx.vjp(fwd, z)[1](ct)[0]
    np.testing.assert_allclose(lax.conv_transpose(ct, w, (2, 1), "SAME", dimension_numbers=dn, transpose_kernel=True),
                               grad_in, rtol=1e-4, atol=1e-4)
    patches = lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID", dimension_numbers=dn)
    assert patches.shape == (2, 4, 3, 12)
    np.testing.assert_allclose(patches[0, 1, 2].reshape(3, 2, 2), np.transpose(x[0, 1:3, 2:4], (2, 0, 1)))
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), "SAME") == (2, 4, 5, 5)
    xa, wa = rand(2, 4, 5, 5), rand(6, 2, 3, 3)
    programs = [
        (lambda x, w: lax.conv(x, w, (1, 1), "SAME"), (xa, rand(6, 4, 3, 3))),
        (jx.grad(lambda x, w: jnp.sum(lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (2, 1)),
                                                               feature_group_count=2) ** 2), argnums=(0, 1)),
         (xa, wa)),
        (jx.vmap(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2)),
         (rand(3, *xa.shape), rand(3, *wa.shape))),
        (lambda x: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn,
                                            precision=lax.Precision.HIGHEST, preferred_element_type=np.float32),
         (x,)),
    ]
    for fun, args in programs:
        assert_round_trip(jx.make_jaxpr(fun)(*args))
    with pytest.raises(JaxprTypeError, match="conv_general_dilated.*feature_group_count"):
        lax.conv_general_dilated(rand(1, 4, 3, 3), rand(2, 3, 1, 1), (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(JaxprTypeError, match="conv_general_dilated.*window_strides"):
        lax.conv_general_dilated(rand(1, 4, 3, 3), rand(2, 4, 1, 1), (1,), "VALID")
    with pytest.raises(TypeError, match="dimension_numbers"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIX", "NHWC"))
    with pytest.raises(JaxprTypeError, match="conv_general_dilated.*positive window_strides"):
        lax.conv(rand(1, 1, 3, 3), rand(1, 1, 2, 2), (0, 1), "VALID")
    with pytest.raises(JaxprTypeError, match="conv_general_dilated.*positive feature_group_count"):
        lax.conv_general_dilated(rand(1, 1, 3, 3), rand(1, 1, 2, 2), (1, 1), "VALID", feature_group_count=0)
    with pytest.raises(ValueError, match="window_strides must be positive"):
        lax.conv(rand(1, 1, 3, 3), rand(1, 1, 2, 2), (0, 1), "SAME")
    with pytest.raises(RuntimeError, match="Unrecognized padding"):
        lax.conv(rand(1, 1, 3, 3), rand(1, 1, 2, 2), (1, 1), "FULL")


# ------------------------------------------------------------ windowed reductions

def np_reduce_window(x, init, op, window_dimensions, window_strides, padding, base_dilation=None,
                     window_dilation=None):
    n = x.ndim
    if isinstance(padding, str):
        wd = window_dilation or (1,) * n
        padding = lax.padtype_to_pads(x.shape, [(k - 1) * d + 1 for k, d in zip(window_dimensions, wd)],
                                      window_strides, padding)
    x = _dilate_pad(x, range(n), base_dilation or (1,) * n, padding, init)
    win = _windows(x, tuple(range(n)), window_dimensions, window_strides, window_dilation or (1,) * n)
    return op(win.reshape(*win.shape[:n], -1), axis=-1, initial=init)


WINDOWS = [
    dict(window_dimensions=(1, 2, 2), window_strides=(1, 2, 2), padding="SAME"),
    dict(window_dimensions=(2, 2, 3), window_strides=(1, 2, 1), padding=((0, 1), (1, 1), (2, 0))),
    dict(window_dimensions=(1, 2, 2), window_strides=(1, 1, 1), padding="SAME_LOWER", base_dilation=(1, 2, 1)),
    dict(window_dimensions=(1, 3, 2), window_strides=(1, 2, 1), padding=((0, 0), (1, 1), (0, 1)),
         window_dilation=(1, 2, 1)),
]


@pytest.mark.parametrize("i", range(len(WINDOWS)))
def test_reduce_window_against_numpy_and_transposes(i):
    kw = WINDOWS[i]
    x, t = rand(2, 6, 5), rand(2, 6, 5)
    reducers = [(-np.inf, lax.max, np.max), (np.inf, lax.min, np.min), (0.0, lax.add, np.sum), (1.0, lax.mul, np.prod)]
    fs = [lambda x, init=init, op=op: lax.reduce_window(x, init, op, **kw) for init, op, _ in reducers]
    # values and jvps of all four (mul: the generic reducer), vjps where JAX defines them
    with_vjp = [k for k in range(3) if k == 2 or "window_dilation" not in kw]
    cts = [rand(*np.shape(np_reduce_window(x, 0.0, np.sum, **kw))) for _ in with_vjp]

    def run(x, t, cts):
        outs = [jx.jvp(f, (x,), (t,)) for f in fs]
        return outs, [jx.vjp(fs[k], x)[1](ct)[0] for k, ct in zip(with_vjp, cts)]
    outs, vjps = jx.jit(run)(x, t, cts)
    for (y, jv), (init, _, np_op) in zip(outs, reducers):
        np.testing.assert_allclose(y, np_reduce_window(x, init, np_op, **kw), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[2][1], np_reduce_window(t, 0.0, np.sum, **kw), rtol=1e-5, atol=1e-5)   # linear
    for k, ct, cx in zip(with_vjp, cts, vjps):
        np.testing.assert_allclose(_vdot(cx, t), _vdot(ct, outs[k][1]), rtol=1e-4)


def test_max_pool_gradients_vmap_round_trip():
    x = rand(2, 6, 5)
    pool = lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2), (1, 2, 2), "SAME")
    g = jx.grad(lambda x: jnp.sum(pool(x)))(x)
    # every window sends its 1 to its maximum
    win = np_reduce_window(x, -np.inf, np.max, (1, 2, 2), (1, 2, 2), "SAME")
    assert g.sum() == win.size and set(np.unique(g)) <= {0.0, 1.0}
    np.testing.assert_array_equal(np.sort(x[g == 1]), np.sort(win.ravel()))
    # second derivative of a squared pool: 2 at each chosen element (hvp with ones)
    sq = lambda x: jnp.sum(pool(x) ** 2)
    hv = jx.jvp(jx.grad(sq), (x,), (np.ones_like(x),))[1]
    np.testing.assert_allclose(hv, 2 * g)
    xb = rand(3, 2, 6, 5)
    np.testing.assert_allclose(jx.vmap(jx.grad(lambda x: jnp.sum(pool(x) ** 2)))(xb),
                               np.stack([jx.grad(sq)(xb[k]) for k in range(3)]), rtol=1e-6)
    for fun in [pool, jx.grad(sq), jx.grad(lambda x: jnp.sum(jx.grad(sq)(x) ** 2)),
                lambda x: lax.reduce_window((x, x), (0.0, 1.0), lambda a, b: (a[0] + b[0], a[1] * b[1]),
                                            (1, 2, 1), (1, 1, 1), "VALID"),
                jx.grad(lambda x: jnp.sum(lax.reduce_window(x, 0.0, lax.add, (1, 2, 2), (1, 2, 1), "SAME",
                                                            base_dilation=(1, 1, 2))))]:
        assert_round_trip(jx.make_jaxpr(fun)(x))
    with pytest.raises(JaxprTypeError, match="reduce_window_max.*window_dimensions"):
        lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID")
    with pytest.raises(JaxprTypeError, match="reduce_window_sum.*positive window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (1, 0, 2), (1, 1, 1), "VALID")
    with pytest.raises(NotImplementedError, match="reduce_window"):
        jx.grad(lambda x: jnp.sum(lax.reduce_window(x, 1.0, lax.mul, (1, 2, 2), (1, 1, 1), "VALID")))(x)
