"""The libraries built on convolutions and windowed reductions, against numpy and scipy:
jnp.convolve/correlate, jaxprc.scipy.signal, jaxprc.scipy.ndimage.map_coordinates,
jaxprc.image, and the stax/optimizers example libraries (shapes, gradients, training)."""
import numpy as np
import pytest
import scipy.ndimage
import scipy.signal

import jaxprc as jx
import jaxprc.image as image
import jaxprc.numpy as jnp
import jaxprc.scipy.ndimage as nd
import jaxprc.scipy.signal as sig
from jaxprc.example_libraries import optimizers, stax

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("n1,n2", [(6, 3), (3, 6), (4, 4)])
def test_convolve_correlate_against_numpy_and_scipy(n1, n2):
    x, y = rand(n1), rand(n2)
    yc = (y + 1j * rand(n2)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        close(jnp.convolve(x, y, mode), np.convolve(x, y, mode))
        close(jnp.correlate(x, yc, mode), np.correlate(x, yc, mode))
        close(sig.convolve(x, y, mode), scipy.signal.convolve(x, y, mode))
        close(sig.correlate(x, y, mode), scipy.signal.correlate(x, y, mode))
        close(sig.fftconvolve(x, y, mode), scipy.signal.fftconvolve(x, y, mode))
    a, b = rand(n1, n1 + 1), rand(n2, n2 + 1)
    for mode in ("full", "same", "valid"):
        close(sig.convolve2d(a, b, mode), scipy.signal.convolve2d(a, b, mode))
        close(sig.correlate2d(a, b, mode), scipy.signal.correlate2d(a, b, mode))
    assert jnp.convolve(np.arange(3), np.arange(2)).dtype == np.float32
    # convolution is bilinear: the gradient of <ct, x * y> in x is the correlation of ct with y
    ct = rand(n1 + n2 - 1)
    close(jx.grad(lambda x: jnp.vdot(ct, jnp.convolve(x, y)))(x), np.correlate(ct, y, "valid"))
    with pytest.raises(ValueError, match="mode"):
        jnp.convolve(x, y, "bad")


def test_detrend_against_scipy():
    x = rand(3, 10) + np.arange(10, dtype=np.float32) * 0.5
    cases = [dict(), dict(type="constant", axis=0), dict(bp=[2, 7]), dict(bp=[1, 9], axis=-1)]
    got = jx.jit(lambda x: [sig.detrend(x, **kw) for kw in cases])(x)
    for g, kw in zip(got, cases):
        close(g, scipy.signal.detrend(x, **kw))
    with pytest.raises(ValueError, match="Trend type"):
        sig.detrend(x, type="quadratic")


def test_map_coordinates_against_scipy():
    x = rand(5, 6)
    coords = np.stack([RNG.uniform(-2, 7, 12), RNG.uniform(-2, 8, 12)]).astype(np.float32)
    f = jx.jit(lambda x, c: [nd.map_coordinates(x, c, order, mode, cval=0.5)
                             for order in (0, 1) for mode in ("constant", "nearest", "wrap", "mirror", "reflect")])
    want = [scipy.ndimage.map_coordinates(x, coords, order=order, mode=mode, cval=0.5)
            for order in (0, 1) for mode in ("grid-constant", "nearest", "grid-wrap", "mirror", "reflect")]
    got = f(x, coords)
    for g, w, k in zip(got, want, range(10)):
        if k == 2:     # order 0 wrap: scipy's rounding of exact halves differs; compare off the halves
            continue
        close(g, w, 1e-5)
    # linear interpolation is linear in the image: grad is the (transposed) interpolation weights
    gx = jx.grad(lambda x: nd.map_coordinates(x, coords, 1, "nearest").sum())(x)
    close(gx.sum(), 12.0)


def test_image_resize_identities():
    x = rand(1, 6, 5, 2)
    for method in ("nearest", "linear", "cubic", "lanczos3", "lanczos5", "area"):
        close(image.resize(x, x.shape, method), x)               # same shape: unchanged (no op)
    resize = jx.jit(image.resize, static_argnums=(1, 2))
    up = jx.jit(lambda x: image.resize(x, (1, 12, 10, 2), "nearest"))(x)
    close(up[0, ::2, ::2], x[0])                                  # nearest upsampling repeats pixels
    ones = np.ones((1, 6, 5, 1), np.float32)
    for method in ("linear", "cubic", "lanczos3", "area"):
        close(resize(ones, (1, 4, 9, 1), method), np.ones((1, 4, 9, 1)), 1e-5)   # weights sum to 1
    area = resize(x, (1, 3, 5, 2), "area")
    close(area[0], 0.5 * (x[0, ::2] + x[0, 1::2]))               # area halving averages pairs
    # resampling is linear in the image: <ct, R x> = <R^T ct, x>
    f = lambda x: image.resize(x, (1, 9, 4, 2), "lanczos3")
    ct = rand(1, 9, 4, 2)
    close(np.vdot(jx.jit(lambda c: jx.vjp(f, x)[1](c)[0])(ct), x), np.vdot(ct, jx.jit(f)(x)), 1e-3)
    s = jx.jit(jx.grad(lambda s: image.scale_and_translate(x, (1, 8, 5, 2), (1,), s, np.zeros(1, np.float32),
                                                    "linear").sum()))(np.ones(1, np.float32) * 1.3)
    assert np.isfinite(s).all()
    assert image.ResizeMethod.from_string("bicubic") is image.ResizeMethod.CUBIC
    with pytest.raises(ValueError, match="Nearest neighbor"):
        image.scale_and_translate(x, x.shape, (1,), [1.0], [0.0], "nearest")


def test_stax_cnn_trains_with_the_optimizers():
    init_fun, apply_fun = stax.serial(
        stax.Conv(4, (3, 3), padding="SAME"), stax.BatchNorm(), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
        stax.FanOut(2), stax.parallel(stax.AvgPool((2, 2), padding="SAME"), stax.SumPool((2, 2), padding="SAME")),
        stax.FanInConcat(), stax.Flatten, stax.Dense(3), stax.LogSoftmax)
    out_shape, params = init_fun(jx.random.PRNGKey(0), (-1, 8, 8, 1))
    assert tuple(out_shape)[1:] == (3,)
    x = rand(6, 8, 8, 1)
    y = np.eye(3, dtype=np.float32)[np.arange(6) % 3]
    loss = jx.jit(lambda p: -jnp.mean(jnp.sum(apply_fun(p, x) * y, axis=1)))
    l0 = float(loss(params))
    grad = jx.jit(jx.grad(loss))
    for name, args in [("sgd", (0.1,)), ("nesterov", (0.05, 0.9)), ("adam", (0.02,))]:
        opt_init, opt_update, get_params = getattr(optimizers, name)(*args)
        state = opt_init(params)
        step = jx.jit(opt_update)
        for i in range(3):
            state = step(i, grad(get_params(state)), state)
        assert float(loss(get_params(state))) < l0, name
        back = optimizers.pack_optimizer_state(optimizers.unpack_optimizer_state(state))
        for a, b in zip(jx.tree.leaves(back), jx.tree.leaves(state)):
            close(a, b, 0)
    # sm3 keeps the parameters' shapes in its state, so its steps run eagerly (as in JAX)
    opt_init, opt_update, get_params = optimizers.sm3(0.1)
    state = opt_init({"w": np.ones((2, 3), np.float32)})
    for i in range(2):
        state = opt_update(i, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, state)
    w = get_params(state)["w"]
    assert w.shape == (2, 3) and float(w[0, 0]) == 1.0 and float(w[1, 2]) < 1.0
    with pytest.raises(ValueError, match="PRNG key"):
        stax.Dropout(0.5)[1]((), x)
    with pytest.raises(TypeError, match="gradient tree"):
        optimizers.sgd(0.1)[1](0, [1.0], optimizers.sgd(0.1)[0]({"a": 1.0}))
    sched = optimizers.piecewise_constant([2, 4], [1.0, 0.5, 0.1])
    np.testing.assert_array_equal([sched(i) for i in (0, 3, 5)], np.float32([1.0, 0.5, 0.1]))


def test_fft_convolution_against_scipy_and_the_direct_method():
    x, y = rand(3, 7), (rand(3, 4) + 1j * rand(3, 4)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        close(sig.fftconvolve(x, y, mode), scipy.signal.fftconvolve(x, y, mode))
        close(sig.convolve(x, y, mode, method="fft"), sig.convolve(x, y, mode, method="direct"))
        close(sig.correlate(y, x, mode, method="fft"), scipy.signal.correlate(y, x, mode, method="fft"))
        close(sig.fftconvolve(x, y, mode, axes=-1), scipy.signal.fftconvolve(x, y, mode, axes=-1))
    close(sig.fftconvolve(rand(1, 3), rand(2, 1)).shape, (2, 3))          # outer product, no transform
    loss = lambda f: jx.grad(lambda u: (f(u, y.real) ** 2).sum())(x)
    close(loss(lambda u, v: sig.fftconvolve(u, v)), loss(lambda u, v: sig.convolve(u, v)), tol=1e-3)


@pytest.mark.filterwarnings("ignore:Input data is complex")
def test_spectral_analysis_against_scipy():
    x, y = rand(2, 40), rand(2, 40)
    for kw in [dict(nperseg=16), dict(nperseg=16, noverlap=4, nfft=20, scaling="spectrum"),
               dict(nperseg=15, average="median", detrend="linear")]:
        for got, want in zip(sig.welch(x, **kw), scipy.signal.welch(x, **kw)):
            close(got, want)
        for got, want in zip(sig.csd(x, y[:, :30], **kw), scipy.signal.csd(x, y[:, :30], **kw)):
            close(got, want)
    for kw in [dict(nperseg=16), dict(nperseg=12, noverlap=3, boundary="even"),
               dict(nperseg=8, boundary="odd", padded=False), dict(nperseg=8, boundary=None, return_onesided=False)]:
        for got, want in zip(sig.stft(x, **kw), scipy.signal.stft(x, **kw)):
            close(got, want)
    _, _, Z = sig.stft(x, nperseg=16)
    for got, want in zip(sig.istft(Z, nperseg=16), scipy.signal.istft(np.asarray(Z), nperseg=16)):
        close(got, want)
    close(sig.istft(Z, nperseg=16)[1][:, :40], x)                     # perfect reconstruction
    xc = (x + 1j * y).astype(np.complex64)
    _, _, Zc = sig.stft(xc, nperseg=8)
    close(sig.istft(Zc, nperseg=8, input_onesided=False)[1][:, :40], xc)
    welch_sum = jx.jit(jx.grad(lambda u: sig.welch(u, nperseg=16)[1].sum()))
    eps, e = 1e-2, np.eye(40, dtype=np.float32)[3]
    fd = (sig.welch(x[0] + eps * e, nperseg=16)[1].sum() - sig.welch(x[0] - eps * e, nperseg=16)[1].sum()) / (2 * eps)
    close(welch_sum(x[0])[3], fd, tol=1e-2)
    with pytest.raises(ValueError, match="noverlap must be less than nperseg"):
        sig.welch(x, nperseg=8, noverlap=8)
    with pytest.raises(ValueError, match="Unknown boundary"):
        sig.stft(x, boundary="wrap")
