"""The fft primitive, jaxprc.numpy.fft and jaxprc.scipy.fft: values against numpy's FFT and direct
sums, the transposition identities of every transform kind, finite differences, vmap against a
loop, text round trips, and the errors a user can cause."""
import itertools

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import JaxprTypeError
from jaxprc.scipy import fft as jsf
from roundtrip import assert_round_trip

R = np.random.RandomState(0)


def _real(*shape, dtype=np.float32):
    return R.randn(*shape).astype(dtype)


def _cplx(*shape, dtype=np.complex64):
    return (R.randn(*shape) + 1j * R.randn(*shape)).astype(dtype)


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)


# ------------------------------------------------------------- the primitive

@pytest.mark.parametrize("typ,lengths", [("fft", (5,)), ("ifft", (4, 5)), ("rfft", (3, 4, 5)), ("irfft", (4, 6))])
def test_lax_fft_values_and_types(typ, lengths):
    shape = (2,) + lengths
    if typ == "irfft":
        x = _cplx(2, *lengths[:-1], lengths[-1] // 2 + 1)
        want = np.fft.irfftn(x, lengths, axes=range(-len(lengths), 0))
    elif typ == "rfft":
        x = _real(*shape)
        want = np.fft.rfftn(x, axes=range(-len(lengths), 0))
    else:
        x = _cplx(*shape)
        want = getattr(np.fft, typ + "n")(x, axes=range(-len(lengths), 0))
    out = lax.fft(x, typ, lengths)
    close(out, want)
    assert out.dtype == want.astype(np.float32 if typ == "irfft" else np.complex64).dtype
    close(jx.jit(lambda x: lax.fft(x, lax.FftType[typ.upper()], lengths))(x), want)


def test_lax_fft_converts_its_operand():
    assert lax.fft(np.arange(4, dtype=np.int32), "fft", (4,)).dtype == np.complex64
    assert lax.fft(np.arange(4, dtype=np.int32), "rfft", (4,)).dtype == np.complex64
    assert lax.fft(_real(4), "fft", ()).dtype == np.complex64          # no lengths: conversion only
    cj = jx.make_jaxpr(lambda x: lax.fft(x, "rfft", (4,)))(jx.ShapeDtypeStruct((4,), np.float32))
    assert "fft[fft_lengths=(4,) fft_type=FftType.RFFT]" in str(cj)
    assert not cj.out_avals[0].weak_type


def test_lax_fft_x64():
    with _x64():
        out = lax.fft(np.arange(6, dtype=np.float64), "rfft", (6,))
        assert out.dtype == np.complex128
        close(out, np.fft.rfft(np.arange(6.0)), 1e-12)
        assert lax.fft(out, "irfft", (6,)).dtype == np.float64


class _x64:
    def __enter__(self):
        jx.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        jx.config.update("jax_enable_x64", False)


def test_typing_errors_name_the_primitive():
    c4, r4 = _cplx(4), _real(4)
    with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
        lax.fft(c4, "rfft", (4,))
    with pytest.raises(TypeError, match="unknown FFT type 'dct'"):
        lax.fft(c4, "dct", (4,))
    for bad, match in [(lambda: lax.fft_p.bind(r4, fft_type=lax.FftType.FFT, fft_lengths=(4,)), "complex operand"),
                       (lambda: lax.fft_p.bind(c4, fft_type=lax.FftType.RFFT, fft_lengths=(4,)), "real operand"),
                       (lambda: lax.fft_p.bind(c4, fft_type=lax.FftType.FFT, fft_lengths=(5,)), "trailing"),
                       (lambda: lax.fft_p.bind(c4, fft_type=lax.FftType.IRFFT, fft_lengths=(4,)), "half spectrum"),
                       (lambda: lax.fft_p.bind(c4, fft_type=lax.FftType.FFT, fft_lengths=(1, 4)), "1 to 3"),
                       (lambda: lax.fft_p.bind(_cplx(1, 1, 1, 4), fft_type=lax.FftType.FFT,
                                               fft_lengths=(1, 1, 1, 4)), "1 to 3")]:
        with pytest.raises(JaxprTypeError, match=f"fft got operands.*{match}"):
            jx.make_jaxpr(bad)()


def test_empty_batch():
    out = lax.fft(np.zeros((0, 4), np.float32), "rfft", (4,))
    assert out.shape == (0, 3) and out.dtype == np.complex64
    assert jnp.fft.fft(np.zeros((3, 0), np.complex64), axis=0).shape == (3, 0)


# ------------------------------------------------ transposition and jvp

def _pairing(typ):
    """The bilinear pairing the transpose satisfies: <ct, f(x)> = <f^T(ct), x>, with the real part
    taken where one side is real (JAX's convention for real <-> complex maps)."""
    return {"fft": (lambda a: a, lambda a: a), "ifft": (lambda a: a, lambda a: a),
            "rfft": (np.real, lambda a: a), "irfft": (lambda a: a, np.real)}[typ]


@pytest.mark.parametrize("typ,lengths", [("fft", (6,)), ("ifft", (3, 4)), ("rfft", (5,)), ("rfft", (2, 3, 4)),
                                         ("irfft", (6,)), ("irfft", (3, 5))])
def test_transposition_identity(typ, lengths):
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    x = {"fft": _cplx, "ifft": _cplx, "rfft": _real, "irfft": _cplx}[typ](2, *(half if typ == "irfft" else lengths))
    f = lambda x: lax.fft(x, typ, lengths)
    y, vjp = jx.vjp(f, x)
    ct = (_real if typ == "irfft" else _cplx)(*np.shape(y))
    (g,) = vjp(ct)
    assert g.dtype == x.dtype
    out_side, in_side = _pairing(typ)
    lhs = out_side(np.sum(ct * np.asarray(y, np.complex128)))
    rhs = in_side(np.sum(np.asarray(g, np.complex128) * x))
    close(lhs, rhs, 1e-3)
    # linear: the jvp is the transform of the tangent
    t = x[::-1].copy()
    _, tout = jx.jvp(f, (x,), (t,))
    close(tout, np.asarray(f(t)))


def test_grad_of_power_spectrum_by_finite_differences():
    x = _real(6, dtype=np.float64)
    with _x64():
        loss = lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x * x, norm="ortho")) ** 3)
        g = np.asarray(jx.grad(loss)(x))
        eps = 1e-6
        fd = [(float(loss(x + eps * e)) - float(loss(x - eps * e))) / (2 * eps) for e in np.eye(6)]
        close(g, fd, 1e-5)
        irf = lambda z: jnp.sum(jnp.fft.irfft(z, n=7) ** 2)   # a complex input: grad is conj(df/dz)
        z = _cplx(4, dtype=np.complex128)
        gz = np.asarray(jx.grad(irf)(z))
        fd = [(float(irf(z + eps * e)) - float(irf(z - eps * e))) / (2 * eps)
              - 1j * (float(irf(z + 1j * eps * e)) - float(irf(z - 1j * eps * e))) / (2 * eps) for e in np.eye(4)]
        close(gz, fd, 1e-5)


# --------------------------------------------------------------- vmap

@pytest.mark.parametrize("typ,axis", [("fft", 0), ("ifft", 2), ("rfft", 1), ("irfft", 2)])
def test_vmap_matches_a_loop(typ, axis):
    x = (_real if typ == "rfft" else _cplx)(3, 4, 4) if typ != "irfft" else _cplx(3, 4, 3)
    f = lambda v: lax.fft(v, typ, (4,) if typ != "irfft" else (4,))
    x = np.moveaxis(x, 0, axis)
    batched = jx.vmap(f, in_axes=axis)(x)
    looped = np.stack([np.asarray(f(np.take(x, i, axis))) for i in range(x.shape[axis])])
    close(batched, looped)


# ----------------------------------------------------------- text round trip

def test_round_trip_of_a_transformed_program():
    spec, batch = jx.ShapeDtypeStruct((3, 4), np.float32), jx.ShapeDtypeStruct((2, 3, 4), np.float32)
    loss = lambda x: jnp.sum(jnp.abs(jnp.fft.irfft2(jnp.fft.rfft2(x) * 2.0, s=(3, 4)) - 1.0))
    for f, arg in [(loss, spec), (jx.vmap(jx.grad(loss)), batch)]:
        back = assert_round_trip(jx.make_jaxpr(f)(arg))
        assert any(e.primitive.name == "fft" for e in back.eqns)
    back = assert_round_trip(jx.make_jaxpr(jx.grad(loss))(spec))
    x = _real(3, 4)
    from jaxprc.ir.tracing import eval_jaxpr
    close(eval_jaxpr(back.jaxpr, back.consts, x)[0], np.asarray(jx.grad(loss)(x)))


# ------------------------------------------------------------ jnp.fft

_ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
_N_D = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]


def _input(name, shape):
    real_in = name in ("rfft", "ihfft", "rfft2", "rfftn")
    return _real(*shape) if real_in else _cplx(*shape)


@pytest.mark.parametrize("name", _ONE_D)
def test_one_dimensional_against_numpy(name):
    x = _input(name, (3, 6))
    cases = list(itertools.islice(itertools.product([None, 4, 9], [-1, 0], [None, "ortho", "forward"]), 0, None, 3))
    outs = jx.jit(lambda x: [getattr(jnp.fft, name)(x, n=n, axis=axis, norm=norm) for n, axis, norm in cases])(x)
    for out, (n, axis, norm) in zip(outs, cases):
        want = getattr(np.fft, name)(x, n=n, axis=axis, norm=norm)
        assert out.shape == want.shape, (name, n, axis, norm)
        close(out, want)
        assert out.dtype == (np.float32 if want.dtype.kind == "f" else np.complex64)


@pytest.mark.parametrize("name", _N_D)
def test_n_dimensional_against_numpy(name):
    x = _input(name, (2, 3, 6))
    two = name.endswith("2")
    cases = [dict(), dict(norm="ortho"), dict(s=(4, 5)), dict(axes=(0, 2), norm="forward"),
             dict(s=(3, 2), axes=(2, 0))]
    if not two:
        cases += [dict(s=(2, 4, 3)), dict(axes=(1,))]
    outs = jx.jit(lambda x: [getattr(jnp.fft, name)(x, **kw) for kw in cases])(x)
    for out, kw in zip(outs, cases):
        want = getattr(np.fft, name)(x, **kw)
        assert out.shape == want.shape, (name, kw)
        close(out, want)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_more_than_three_axes(name):
    x = _input(name, (2, 3, 2, 3, 4))
    close(getattr(jnp.fft, name)(x), getattr(np.fft, name)(x))
    close(getattr(jnp.fft, name)(x[0]), getattr(np.fft, name)(x[0]))


def test_frequencies_and_shifts():
    sizes = [(5, 1.0), (6, 0.5), (1, 2.0)]
    freqs = jx.jit(lambda: [(jnp.fft.fftfreq(n, d), jnp.fft.rfftfreq(n, d)) for n, d in sizes])()
    for (n, d), (full, half) in zip(sizes, freqs):
        close(full, np.fft.fftfreq(n, d), 1e-6)
        close(half, np.fft.rfftfreq(n, d), 1e-6)
    assert jnp.fft.fftfreq(4).dtype == np.float32
    assert jnp.fft.fftfreq(4, dtype=np.float16).dtype == np.float16
    x = np.arange(12).reshape(3, 4)
    all_axes = [None, 0, (1,), (0, 1)]
    shifted = jx.jit(lambda x: [(jnp.fft.fftshift(x, a), jnp.fft.ifftshift(x, a)) for a in all_axes])(x)
    for axes, (fwd, inv) in zip(all_axes, shifted):
        np.testing.assert_array_equal(fwd, np.fft.fftshift(x, axes))
        np.testing.assert_array_equal(inv, np.fft.ifftshift(x, axes))


def test_jnp_fft_errors():
    x = _cplx(3, 4)
    with pytest.raises(ValueError, match="does not support repeated axes"):
        jnp.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="Shape should be positive"):
        jnp.fft.fftn(x, s=(0, 2))
    with pytest.raises(ValueError, match="Shape and axes have different lengths"):
        jnp.fft.fftn(x, s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="only supports 2 axes"):
        jnp.fft.fft2(x, axes=(0,))
    with pytest.raises(ValueError, match="does not support multiple axes"):
        jnp.fft.fft(x, axis=(0, 1))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.fft.fft(x, axis=2)
    with pytest.raises(ValueError, match="Invalid norm"):
        jnp.fft.fft(x, norm="bogus")
    with pytest.raises(ValueError, match="only takes an int"):
        jnp.fft.fftfreq([3])


def test_jnp_fft_under_jit_and_grad():
    x = _real(4, 6)
    f = jx.jit(lambda x: jnp.fft.irfft2(jnp.fft.rfft2(x), s=x.shape))
    close(f(x), x)
    g = jx.grad(lambda x: jnp.sum(jnp.real(jnp.fft.fft(x)) ** 2))(x)
    want = np.zeros_like(x)
    for k in range(6):   # sum_k Re(X_k)^2 = sum_k (sum_n x_n cos(2 pi k n / 6))^2
        c = np.cos(2 * np.pi * k * np.arange(6) / 6)
        want += 2 * (x @ c)[:, None] * c
    close(g, want)


# ---------------------------------------------------------- jax.scipy.fft

def _dct2_direct(x, axis):
    """The DCT-II by its definition: y_k = 2 sum_n x_n cos(pi k (2n + 1) / 2N)."""
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    n = x.shape[-1]
    basis = np.cos(np.pi * np.outer(np.arange(n), 2 * np.arange(n) + 1) / (2 * n))
    return np.moveaxis(2 * x @ basis.T, -1, axis)


def _ortho(y, axis):
    n = y.shape[axis]
    scale = np.full(n, np.sqrt(1 / (2 * n)))
    scale[0] = np.sqrt(1 / (4 * n))
    shape = [1] * y.ndim
    shape[axis] = n
    return y * scale.reshape(shape)


def test_dct_against_the_definition_and_idct_inverts_it():
    x, z = _real(3, 5, 4), _cplx(5)
    cases = [(-1, None), (0, "ortho"), (1, "backward")]

    @jx.jit
    def run(x, z):
        ys = [jsf.dct(x, axis=axis, norm=norm) for axis, norm in cases]
        back = [jsf.idct(y, axis=axis, norm=norm) for y, (axis, norm) in zip(ys, cases)]
        return ys, back, jsf.dct(x, n=7), jsf.dct(x, n=2), jsf.dct(z)

    ys, back, padded, cropped, complex_out = run(x, z)
    for y, x_back, (axis, norm) in zip(ys, back, cases):
        want = _dct2_direct(x, axis)
        close(y, _ortho(want, axis) if norm == "ortho" else want)
        close(x_back, x)
    close(padded, _dct2_direct(np.pad(x, [(0, 0), (0, 0), (0, 3)]), -1))
    close(cropped, _dct2_direct(x[..., :2], -1))
    close(complex_out, _dct2_direct(z.real, 0) + 1j * _dct2_direct(z.imag, 0))
    assert jsf.dct(np.arange(4)).dtype == np.float32


def test_dctn_and_idctn():
    x = _real(3, 5, 4)
    want = x.astype(np.float64)
    for axis in range(3):
        want = _dct2_direct(want, axis)
    inverse_cases = [dict(), dict(norm="ortho"), dict(axes=(1,)), dict(axes=(0, 1), norm="ortho")]

    @jx.jit
    def run(x):
        return (jsf.dctn(x), jsf.dctn(x, axes=(0, 2)), jsf.dctn(x, s=(3, 2), axes=(2, 0)),
                [jsf.idctn(jsf.dctn(x, **kw), **kw) for kw in inverse_cases])

    full, two, resized, round_trips = run(x)
    close(full, want, 1e-3)
    close(two, _dct2_direct(_dct2_direct(x, 0), 2))
    close(resized, _dct2_direct(_dct2_direct(x[:2, :, :3], 0), 2))
    for back in round_trips:
        close(back, x)
    with pytest.raises(NotImplementedError, match="Only DCT type 2"):
        jsf.dct(x, type=3)
    with pytest.raises(ValueError, match="norm='forward' is not implemented"):
        jsf.idctn(x, norm="forward")


def test_dct_gradient_is_its_transpose():
    x, ct = _real(6), _real(6)
    vjp = jx.jit(lambda x, ct: jx.vjp(lambda v: jsf.dct(v, norm="ortho"), x)[1](ct)[0])
    close(vjp(x, ct), jx.jit(lambda c: jsf.idct(c, norm="ortho"))(ct))    # orthonormal: the transpose is the inverse


def test_gpu_lowering_of_multi_dimensional_irfft():
    """The GPU rule (an IFFT over the outer axes, then a 1-D IRFFT) gives numpy's values for a
    spectrum that is not Hermitian along the outer axes; checked here by running it on the CPU."""
    import importlib
    from jaxprc.engine import lowering
    fft_module = importlib.import_module("jaxprc.lax.fft")      # jaxprc.lax.fft is the function
    x = _cplx(2, 3, 4, 3)
    saved = lowering.PLATFORM_LOWERING_RULES["cpu"].get(lax.fft_p)
    lowering.PLATFORM_LOWERING_RULES["cpu"][lax.fft_p] = fft_module._fft_lowering_gpu
    try:
        for lengths in [(4, 4), (3, 4, 4)]:
            out = jx.jit(lambda v: lax.fft(v, "irfft", lengths))(x)
            close(out, np.fft.irfftn(x, lengths, axes=range(-len(lengths), 0)))
    finally:
        if saved is None:
            del lowering.PLATFORM_LOWERING_RULES["cpu"][lax.fft_p]
        else:
            lowering.PLATFORM_LOWERING_RULES["cpu"][lax.fft_p] = saved
