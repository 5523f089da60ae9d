"""Convolutions, windowed reductions, image ops and the example libraries against JAX:
values, dtypes, gradients, batching, and small trainings step for step."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(a, b, tol=1e-4):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# (lhs shape, rhs shape, kwargs of conv_general_dilated)
CONV_CONFIGS = [
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(2,), padding="SAME")),
    ((2, 3, 7), (4, 3, 3), dict(window_strides=(1,), padding="SAME_LOWER", rhs_dilation=(2,))),
    ((2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 2), padding="VALID")),
    ((2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(2, 1), padding=((1, 2), (0, -1)), lhs_dilation=(2, 1),
                                      rhs_dilation=(1, 2))),
    ((2, 6, 5, 3), (3, 2, 3, 6), dict(window_strides=(1, 1), padding="SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 4, 5, 5), (6, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ((2, 4, 5, 5), (4, 1, 3, 3), dict(window_strides=(2, 2), padding="VALID", feature_group_count=4)),
    ((4, 3, 5, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ((5, 4, 2, 3), (2, 3, 4, 2), dict(window_strides=(1, 1), padding=((1, 0), (0, 1)),
                                      dimension_numbers=("HCNW", "WHIO", "NWHC"))),
    ((1, 2, 4, 3, 5), (3, 2, 2, 2, 3), dict(window_strides=(1, 2, 1), padding="SAME", rhs_dilation=(1, 1, 2))),
]


def _conv_pair(kw):
    return (lambda x, w: lax.conv_general_dilated(x, w, **kw),
            lambda x, w: jax.lax.conv_general_dilated(x, w, **kw))


@pytest.mark.parametrize("i", range(len(CONV_CONFIGS)))
def test_conv_values_and_grads(i):
    xs, ws, kw = CONV_CONFIGS[i]
    x, w = rand(*xs), rand(*ws)
    mine, ref = _conv_pair(kw)
    close(jx.jit(mine)(x, w), ref(x, w))
    ct = rand(*np.shape(ref(x, w)))
    loss = lambda f: (lambda x, w: (f(x, w) * ct).sum())
    for a, b in zip(jx.grad(loss(mine), argnums=(0, 1))(x, w), jax.grad(loss(ref), argnums=(0, 1))(x, w)):
        close(a, b)


@pytest.mark.parametrize("i", [0, 3, 5, 7, 8])
def test_conv_vmap_over_inputs_and_kernels(i):
    xs, ws, kw = CONV_CONFIGS[i]
    x, w = rand(3, *xs), rand(3, *ws)
    mine, ref = _conv_pair(kw)
    for axes in [(0, 0), (0, None), (None, 0)]:
        a = x if axes[0] == 0 else x[0]
        b = w if axes[1] == 0 else w[0]
        close(jx.vmap(mine, in_axes=axes)(a, b), jax.vmap(ref, in_axes=axes)(a, b))


def test_conv_hvp_and_dtypes():
    x, w = rand(2, 3, 6, 6), rand(4, 3, 3, 3)
    f = lambda lib, lx: lambda x, w: lib.numpy.sum(lx.tanh(lx.conv(x, w, (1, 1), "SAME")) ** 2)
    hvp = lambda lib, lx: lambda x, w, v: lib.jvp(lib.grad(f(lib, lx)), (x, w), (v, w))[1]
    close(hvp(jx, lax)(x, w, x), hvp(jax, jax.lax)(x, w, x))
    xi, wi = np.arange(2 * 3 * 4 * 4, dtype=np.int32).reshape(2, 3, 4, 4) % 5, np.ones((2, 3, 2, 2), np.int32)
    close(lax.conv(xi, wi, (1, 1), "VALID"), jax.lax.conv(xi, wi, (1, 1), "VALID"))
    xh = x.astype(np.float16)
    wh = w.astype(np.float16)
    close(lax.conv(xh, wh, (1, 1), "SAME", preferred_element_type=np.float32),
          jax.lax.conv(xh, wh, (1, 1), "SAME", preferred_element_type=np.float32), 1e-2)
    xc = (x + 1j * rand(*x.shape)).astype(np.complex64)
    close(lax.conv(xc, w.astype(np.complex64), (1, 1), "SAME"),
          jax.lax.conv(xc, w.astype(np.complex64), (1, 1), "SAME"), 1e-3)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2), (0, 1))])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose(padding, transpose_kernel):
    x, w = rand(2, 5, 4, 3), rand(3, 2, 3, 4) if transpose_kernel else rand(3, 2, 3, 4)
    kw = dict(strides=(2, 1), padding=padding, transpose_kernel=transpose_kernel)
    if transpose_kernel:
        w = rand(3, 2, 4, 3)
    close(lax.conv_transpose(x, w, **kw), jax.lax.conv_transpose(x, w, **kw))
    g = lambda lib: lib.grad(lambda x, w: (lib.lax.conv_transpose(x, w, **kw) ** 2).sum(), argnums=(0, 1))(x, w)
    for a, b in zip(g(jx), g(jax)):
        close(a, b, 1e-3)
    assert lax.conv_transpose_shape_tuple(x.shape, w.shape, (2, 1), padding if isinstance(padding, str) else padding,
                                          ("NHWC", "HWIO", "NHWC")) == \
        jax.lax.conv_transpose_shape_tuple(x.shape, w.shape, (2, 1), padding, ("NHWC", "HWIO", "NHWC"))


def test_conv_patches_local_and_shape_helpers():
    x = rand(2, 3, 6, 5)
    kw = dict(filter_shape=(2, 3), window_strides=(1, 2), padding="SAME")
    close(lax.conv_general_dilated_patches(x, **kw), jax.lax.conv_general_dilated_patches(x, **kw))
    xn = rand(2, 6, 5, 3)
    dn = ("NHWC", "HWIO", "NHWC")
    close(lax.conv_general_dilated_patches(xn, (2, 2), (1, 1), "VALID", dimension_numbers=dn),
          jax.lax.conv_general_dilated_patches(xn, (2, 2), (1, 1), "VALID", dimension_numbers=dn))
    w = rand(6, 3, 3 * 2 * 3, 4)      # out spatial (6, 3), I = C*2*3, O = 4 for 'HWIO'
    args = (xn, w, (1, 2), "SAME", (2, 3))
    close(lax.conv_general_dilated_local(*args, dimension_numbers=dn),
          jax.lax.conv_general_dilated_local(*args, dimension_numbers=dn))
    assert lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), ("NHWC", "OIHW", "CNHW")) == \
        tuple(jax.lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), ("NHWC", "OIHW", "CNHW")))
    assert lax.conv_general_shape_tuple((2, 6, 5, 3), (3, 2, 3, 4), (2, 1), "SAME", dn) == \
        jax.lax.conv_general_shape_tuple((2, 6, 5, 3), (3, 2, 3, 4), (2, 1), "SAME", dn)
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), "SAME") == \
        jax.lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), "SAME")
    for p in ("SAME", "SAME_LOWER", "VALID"):
        assert [tuple(t) for t in lax.padtype_to_pads((7, 8), (3, 4), (2, 3), p)] == \
            [tuple(t) for t in jax.lax.padtype_to_pads((7, 8), (3, 4), (2, 3), p)]


# ------------------------------------------------------------ windowed reductions

WINDOW_CONFIGS = [
    dict(window_dimensions=(1, 2, 2), window_strides=(1, 2, 2), padding="SAME"),
    dict(window_dimensions=(1, 3, 2), window_strides=(1, 1, 2), padding="VALID"),
    dict(window_dimensions=(2, 2, 3), window_strides=(1, 2, 1), padding=((0, 1), (1, 1), (2, 0))),
    dict(window_dimensions=(1, 2, 2), window_strides=(1, 1, 1), padding="SAME_LOWER", base_dilation=(1, 2, 1)),
    dict(window_dimensions=(1, 3, 2), window_strides=(1, 2, 1), padding=((0, 0), (1, 1), (0, 1)),
         window_dilation=(1, 2, 1)),
]

REDUCERS = [("max", -np.inf, "max"), ("min", np.inf, "min"), ("add", 0.0, "add")]


@pytest.mark.parametrize("i", range(len(WINDOW_CONFIGS)))
@pytest.mark.parametrize("op,init,name", REDUCERS)
def test_reduce_window_values_and_grads(i, op, init, name):
    kw = WINDOW_CONFIGS[i]
    x = rand(2, 6, 5)
    x[0, 1, :2] = x[0, 0, 0]      # ties
    mine = lambda x: lax.reduce_window(x, init, getattr(lax, name), **kw)
    ref = lambda x: jax.lax.reduce_window(x, init, getattr(jax.lax, name), **kw)
    close(jx.jit(mine)(x), ref(x))
    ct = rand(*np.shape(ref(x)))
    close(jx.jvp(mine, (x,), (ct.sum() + x,))[1], jax.jvp(ref, (x,), (ct.sum() + x,))[1])
    if kw.get("window_dilation") and name != "add":
        return        # JAX has no VJP of max/min pooling with window dilation
    grad = lambda lib, f: lib.grad(lambda x: (f(x) * ct).sum())(x)
    close(grad(jx, mine), grad(jax, ref))
    gg = lambda lib, f: lib.grad(lambda x: (lib.grad(lambda y: (f(y) ** 2 * ct).sum())(x) ** 2).sum())(x)
    close(gg(jx, mine), gg(jax, ref), 1e-3)


def test_pooling_vmap_integers_and_generic_reducers():
    x = rand(3, 2, 6, 5)
    kw = WINDOW_CONFIGS[0]
    for name, init in [("max", -np.inf), ("add", 0.0)]:
        f = lambda lib: lambda x: lib.lax.reduce_window(x, init, getattr(lib.lax, name), **kw)
        close(jx.vmap(f(jx))(x), jax.vmap(f(jax))(x))
        close(jx.vmap(jx.grad(lambda x: f(jx)(x).sum()))(x), jax.vmap(jax.grad(lambda x: f(jax)(x).sum()))(x))
    xi = (np.arange(60, dtype=np.int32).reshape(2, 6, 5) * 7) % 11
    close(lax.reduce_window(xi, np.iinfo(np.int32).min, lax.max, (1, 2, 2), (1, 1, 1), "VALID"),
          jax.lax.reduce_window(xi, np.iinfo(np.int32).min, jax.lax.max, (1, 2, 2), (1, 1, 1), "VALID"))
    prod = lambda lib: lambda x: lib.lax.reduce_window(x, 1.0, lib.lax.mul, (1, 2, 2), (1, 1, 2), "SAME")
    close(jx.jit(prod(jx))(x[0]), prod(jax)(x[0]))
    close(jx.jvp(prod(jx), (x[0],), (x[1],))[1], jax.jvp(prod(jax), (x[0],), (x[1],))[1])
    close(jx.vmap(prod(jx))(x), jax.vmap(prod(jax))(x))

    def argmax_pool(lib):
        def reducer(a, b):
            pick = a[0] >= b[0]
            return lib.lax.select(pick, a[0], b[0]), lib.lax.select(pick, a[1], b[1])
        return lambda x, i: lib.lax.reduce_window((x, i), (-np.inf, np.int32(-1)), reducer, (2, 2), (2, 1),
                                                  "VALID")
    idx = np.arange(30, dtype=np.int32).reshape(6, 5)
    for a, b in zip(jx.jit(argmax_pool(jx))(x[0, 0], idx), argmax_pool(jax)(x[0, 0], idx)):
        close(a, b)
    assert lax.reduce_window_shape_tuple((7, 8), (3, 2), (2, 1), ((1, 0), (0, 2)), (2, 1), (1, 3)) == \
        tuple(jax.lax.reduce_window_shape_tuple((7, 8), (3, 2), (2, 1), ((1, 0), (0, 2)), (2, 1), (1, 3)))
