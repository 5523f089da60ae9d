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
        # one of (operand, tangent) batched: select_and_gather_add / select_and_scatter_add broadcast the other
        t = x[0]
        close(jx.vmap(lambda x: jx.jvp(f(jx), (x,), (t,))[1])(x), jax.vmap(lambda x: jax.jvp(f(jax), (x,), (t,))[1])(x))
        close(jx.vmap(lambda t: jx.jvp(f(jx), (x[1],), (t,))[1])(x), jax.vmap(lambda t: jax.jvp(f(jax), (x[1],), (t,))[1])(x))
        ct = rand(3, *np.shape(f(jax)(x[0])))
        close(jx.vmap(lambda c: jx.vjp(f(jx), x[0])[1](c)[0])(ct), jax.vmap(lambda c: jax.vjp(f(jax), x[0])[1](c)[0])(ct))
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


# ------------------------------------------------------------ a small CNN trained 3 steps

def _cnn(lib):
    L = lib.lax

    def apply(params, x):
        w1, b1, w2, b2, wd, bd = params
        dn = ("NHWC", "HWIO", "NHWC")
        h = lib.nn.relu(L.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn) + b1)
        h = L.reduce_window(h, -lib.numpy.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = lib.nn.relu(L.conv_general_dilated(h, w2, (1, 1), "VALID", dimension_numbers=dn) + b2)
        h = L.reduce_window(h, -lib.numpy.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")
        h = h.reshape(h.shape[0], -1)
        return lib.nn.log_softmax(h @ wd + bd)
    return apply


def test_small_cnn_three_training_steps_equal_jax():
    x = rand(8, 12, 12, 3)
    labels = np.eye(5, dtype=np.float32)[RNG.integers(0, 5, 8)]
    params0 = [rand(3, 3, 3, 6) * 0.3, rand(6) * 0.1, rand(3, 3, 6, 8) * 0.2, rand(8) * 0.1,
               rand(8 * 2 * 2, 5) * 0.2, rand(5) * 0.1]
    results = []
    for lib in (jx, jax):
        apply = _cnn(lib)
        loss = lambda p: -(apply(p, x) * labels).sum(-1).mean()
        step = lib.jit(lambda p: [w - 0.1 * g for w, g in zip(p, lib.grad(loss)(p))])
        params, losses = list(params0), []
        for _ in range(3):
            losses.append(float(loss(params)))
            params = step(params)
        results.append((losses, params))
    (l_mine, p_mine), (l_ref, p_ref) = results
    np.testing.assert_allclose(l_mine, l_ref, rtol=1e-4, atol=1e-4)
    for a, b in zip(p_mine, p_ref):
        close(a, b)


# ------------------------------------------------------------ stax and optimizers

def _stax_program(stax, optimizers, lib, opt_name, opt_args):
    """JAX's MNIST-classifier example on synthetic data: the same code for both libraries."""
    init_random_params, predict = stax.serial(
        stax.Conv(6, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), (2, 2)),
        stax.Conv(8, (3, 3), (1, 1), "VALID"), stax.Elu, stax.BatchNorm(),
        stax.FanOut(2), stax.parallel(stax.AvgPool((2, 2), padding="SAME"), stax.SumPool((2, 2), padding="SAME")),
        stax.FanInSum, stax.Flatten, stax.Dense(16), stax.Gelu, stax.Dropout(0.9), stax.Dense(4), stax.LogSoftmax)
    images = np.asarray(np.random.default_rng(0).standard_normal((6, 10, 10, 1)), np.float32)
    labels = np.eye(4, dtype=np.float32)[np.arange(6) % 4]
    rng = lib.random.PRNGKey(0)
    # init under jit: one compilation instead of one per eager random op (the values are the same)
    params = lib.jit(lambda key: init_random_params(key, (-1, 10, 10, 1))[1])(rng)

    def loss(params, batch, key):
        inputs, targets = batch
        return -lib.numpy.mean(lib.numpy.sum(predict(params, inputs, rng=key) * targets, axis=1))
    opt_init, opt_update, get_params = getattr(optimizers, opt_name)(*opt_args)

    def update(i, opt_state, key):
        return opt_update(i, lib.grad(loss)(get_params(opt_state), (images, labels), key), opt_state)
    if opt_name != "sm3":      # sm3 keeps the parameter's shape in its state: not jittable, in JAX too
        update = lib.jit(update)
    opt_state = opt_init(params)
    keys = lib.random.split(lib.random.PRNGKey(1), 3)
    for i in range(3):
        opt_state = update(i, opt_state, keys[i])
    unpacked = optimizers.unpack_optimizer_state(opt_state)
    opt_state = optimizers.pack_optimizer_state(unpacked)
    return float(lib.jit(loss)(get_params(opt_state), (images, labels), keys[0])), lib.tree.leaves(get_params(opt_state))


OPTIMIZERS = [("sgd", (0.1,)), ("momentum", (0.05, 0.9)), ("nesterov", (0.05, 0.9)), ("adagrad", (0.05,)),
              ("rmsprop", (0.01,)), ("rmsprop_momentum", (0.01,)), ("adam", (1e-2,)), ("adamax", (1e-2,)),
              ("sm3", (0.05,))]


@pytest.mark.parametrize("opt_name,opt_args", [OPTIMIZERS[0], OPTIMIZERS[6]])
def test_stax_optimizers_program_equals_jax(opt_name, opt_args):
    from jax.example_libraries import optimizers as jopt, stax as jstax
    from jaxprc.example_libraries import optimizers, stax
    mine = _stax_program(stax, optimizers, jx, opt_name, opt_args)
    ref = _stax_program(jstax, jopt, jax, opt_name, opt_args)
    np.testing.assert_allclose(mine[0], ref[0], rtol=1e-4, atol=1e-4)
    for a, b in zip(mine[1], ref[1]):
        close(a, b)


@pytest.mark.parametrize("opt_name,opt_args", OPTIMIZERS)
def test_optimizers_on_a_pytree_equal_jax(opt_name, opt_args):
    from jax.example_libraries import optimizers as jopt
    from jaxprc.example_libraries import optimizers
    params = {"w": rand(3, 2), "b": [rand(2), np.float32(0.5)]}
    target = rand(3, 2)
    results = []
    for lib, opt in ((jx, optimizers), (jax, jopt)):
        init, update, get_params = getattr(opt, opt_name)(*opt_args)
        loss = lambda p: ((p["w"] * p["b"][0] - target) ** 2).sum() + p["b"][1] ** 4
        state = init(params)
        for i in range(4):
            state = update(i, lib.grad(loss)(get_params(state)), state)
        results.append(lib.tree.leaves(get_params(state)))
    for a, b in zip(*results):
        close(a, b, 1e-5)


def test_stax_remaining_layers_and_schedules():
    from jax.example_libraries import optimizers as jopt, stax as jstax
    from jaxprc.example_libraries import optimizers, stax

    def layers(S):
        return S.serial(S.ConvTranspose(3, (3, 3), (2, 2), "SAME"), S.Tanh, S.Sigmoid, S.Softplus, S.LeakyRelu,
                        S.Selu, S.Exp, S.Identity, S.FanOut(2), S.parallel(S.Identity, S.Identity),
                        S.FanInConcat(-1), S.shape_dependent(lambda shape: S.Dense(shape[-1])), S.Softmax)
    x = rand(2, 4, 4, 2)
    results = []
    for S, lib in ((stax, jx), (jstax, jax)):
        init, apply = layers(S)
        shape, params = init(lib.random.PRNGKey(3), x.shape)
        results.append((tuple(int(d) for d in shape), lib.jit(apply)(params, x)))
    assert results[0][0] == results[1][0]
    close(results[0][1], results[1][1])
    x1 = rand(2, 5, 3)
    outs = []
    for S, lib in ((stax, jx), (jstax, jax)):
        init, apply = S.Conv1DTranspose(4, (3,), (2,), "VALID")
        outs.append(apply(init(lib.random.PRNGKey(5), x1.shape)[1], x1))
    close(*outs)
    for name, args in [("constant", (0.1,)), ("exponential_decay", (0.1, 10, 0.5)),
                       ("inverse_time_decay", (0.1, 10, 0.5)), ("inverse_time_decay", (0.1, 10, 0.5, True)),
                       ("polynomial_decay", (0.1, 10, 0.01, 2.0)), ("piecewise_constant", ([3, 6], [0.1, 0.05, 0.01]))]:
        for i in (0, 4, 7, 12):
            np.testing.assert_allclose(np.asarray(getattr(optimizers, name)(*args)(i)),
                                       np.asarray(getattr(jopt, name)(*args)(i)), rtol=1e-6)
    tree_ = {"a": rand(3), "b": [rand(2, 2)]}
    close(optimizers.l2_norm(tree_), jopt.l2_norm(tree_))
    for a, b in zip(jx.tree.leaves(optimizers.clip_grads(tree_, 0.5)), jax.tree.leaves(jopt.clip_grads(tree_, 0.5))):
        close(a, b)


# ------------------------------------------------------------ numpy, scipy and image

@pytest.mark.parametrize("n1,n2", [(5, 3), (3, 5), (4, 4), (1, 3)])
def test_convolve_correlate_and_signal(n1, n2):
    import jax.scipy.signal as jsig
    import jaxprc.scipy.signal as sig
    x, y = rand(n1), rand(n2)
    yc = (y + 1j * rand(n2)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        close(jnp.convolve(x, y, mode), jjnp.convolve(x, y, mode))
        close(jnp.correlate(x, yc, mode), jjnp.correlate(x, yc, mode))
        close(sig.convolve(x, y, mode), jsig.convolve(x, y, mode))
        close(sig.correlate(x, y, mode), jsig.correlate(x, y, mode))
        close(sig.fftconvolve(x, y, mode), jsig.fftconvolve(x, y, mode))
    xi = np.arange(n1, dtype=np.int32)
    close(jnp.convolve(xi, xi, precision="highest"), jjnp.convolve(xi, xi, precision="highest"))
    close(jnp.convolve(xi, xi, preferred_element_type=np.int32), jjnp.convolve(xi, xi, preferred_element_type=np.int32))
    a, b = rand(n1 + 1, n1), rand(n2, n2 + 1)
    if (n1 + 1 - n2) * (n1 - n2 - 1) >= 0:
        for mode in ("full", "same", "valid"):
            close(sig.convolve2d(a, b, mode), jsig.convolve2d(a, b, mode))
            close(sig.correlate2d(a, b, mode), jsig.correlate2d(a, b, mode))
            close(sig.correlate2d(b, a.astype(np.complex64), mode), jsig.correlate2d(b, a.astype(np.complex64), mode))
    grad = lambda lib, m: lib.grad(lambda u, v: (m.convolve(u, v) ** 2).sum(), argnums=(0, 1))(x, y)
    for g1, g2 in zip(grad(jx, jnp), grad(jax, jjnp)):
        close(g1, g2)
    m1, m2 = rand(3, 6), rand(3, 2)
    close(sig.fftconvolve(m1, m2, "same", axes=1), jsig.fftconvolve(m1, m2, "same", axes=1))


def test_map_coordinates():
    import jax.scipy.ndimage as jnd
    import jaxprc.scipy.ndimage as nd
    x = rand(5, 6)
    coords = [RNG.uniform(-2, 7, (4, 3)).astype(np.float32), RNG.uniform(-2, 8, (4, 3)).astype(np.float32)]
    coords[0][0, 0], coords[1][0, 0] = 1.5, 2.0     # exactly on a half and on a node
    cases = [(order, mode) for order in (0, 1) for mode in ("constant", "nearest", "wrap", "mirror", "reflect")]

    def run(lib, m):
        values = lib.jit(lambda x: [m.map_coordinates(x, coords, o, md, cval=0.5) for o, md in cases])(x)
        loss = lambda x, c: sum((m.map_coordinates(x, [c, coords[1]], o, md) ** 2).sum() for o, md in cases)
        return values, lib.jit(lib.grad(loss, argnums=(0, 1)))(x, coords[0])
    (v1, g1), (v2, g2) = run(jx, nd), run(jax, jnd)
    for a, b in zip(v1, v2):
        close(a, b, 1e-5)
    for a, b in zip(g1, g2):
        close(a, b)
    xi = (x * 10).astype(np.int32)
    close(nd.map_coordinates(xi, coords, 1), jnd.map_coordinates(xi, coords, 1))


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"])
def test_image_resize_and_scale_and_translate(method):
    import jax.image as jimage
    import jaxprc.image as image
    x = rand(2, 7, 6, 3)
    for shape, antialias in [((2, 11, 4, 3), True), ((2, 3, 13, 3), False)]:
        f = lambda lib, m: lib.jit(lambda x: m.resize(x, shape, method, antialias))
        close(f(jx, image)(x), f(jax, jimage)(x))
        if method != "nearest":
            ct = rand(*shape)
            g = lambda lib, m: lib.jit(lib.grad(lambda x: (m.resize(x, shape, method, antialias) * ct).sum()))(x)
            close(g(jx, image), g(jax, jimage))
    if method == "nearest":
        return
    s, t = np.array([1.3, 0.8], np.float32), np.array([0.4, -0.7], np.float32)
    f = lambda m: lambda s, t: m.scale_and_translate(x, (2, 9, 5, 3), (1, 2), s, t, method)
    close(jx.jit(f(image))(s, t), f(jimage)(s, t))
    g = lambda lib, m: lib.jit(lib.grad(lambda s, t: (f(m)(s, t) ** 2).sum(), argnums=(0, 1)))(s, t)
    for a, b in zip(g(jx, image), g(jax, jimage)):
        close(a, b, 1e-3)
    assert image.ResizeMethod.from_string("bilinear") == image.ResizeMethod.LINEAR


def test_detrend():
    import jax.scipy.signal as jsig
    import jaxprc.scipy.signal as sig
    x = rand(4, 9) + np.arange(9, dtype=np.float32)
    cases = [dict(), dict(type="constant"), dict(bp=[3, 5]), dict(axis=0), dict(bp=[1, 8]), dict(bp=4, axis=-1)]
    xc = (x + 1j * x[::-1]).astype(np.complex64)
    run = lambda lib, m: lib.jit(lambda x, xc, r: [m.detrend(x, **kw) for kw in cases] + [m.detrend(xc, bp=[2]),
                                                                                         m.detrend(r)])(
        x, xc, np.arange(6))
    for a, b in zip(run(jx, sig), run(jax, jsig)):
        close(a, b)


def test_fft_methods_of_signal():
    import jax.scipy.signal as jsig
    import jaxprc.scipy.signal as sig
    x, y = rand(2, 6), (rand(2, 3) + 1j * rand(2, 3)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        close(sig.convolve(x, y, mode, method="fft"), jsig.convolve(x, y, mode, method="fft"))
        close(sig.correlate(x, y, mode, method="fft"), jsig.correlate(x, y, mode, method="fft"))


def test_spectral_analysis_of_signal():
    import jax.scipy.signal as jsig
    import jaxprc.scipy.signal as sig
    x, y = rand(2, 30), rand(2, 30)
    for a, b in zip(sig.welch(x, nperseg=12, average="median"), jsig.welch(x, nperseg=12, average="median")):
        close(a, b)
    for a, b in zip(sig.csd(x, y, nperseg=10, nfft=12), jsig.csd(x, y, nperseg=10, nfft=12)):
        close(a, b)
    Z = sig.stft(x, nperseg=8)
    for a, b in zip(Z, jsig.stft(x, nperseg=8)):
        close(a, b)
    for a, b in zip(sig.istft(Z[2], nperseg=8), jsig.istft(np.asarray(Z[2]), nperseg=8)):
        close(a, b)
