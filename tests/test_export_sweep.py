"""Dynamic lowering of every primitive family: a representative op of each, on an argument with a
symbolic batch ``b``, is exported (one dynamic StableHLO module), serialized, read back, and run at
two sizes, where it must give the values of the static program at that size. All the ops are one
program, so the sweep compiles one module per size. Where JAX refuses a symbolic size (an FFT or
an associative scan along it) jaxprc refuses with JAX's error."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import export, lax, random

_EYE = np.eye(3, dtype=np.float32)


def _spd(x):
    """A batch of symmetric positive definite 3x3 matrices, one per row of x."""
    return x[:, :, None] * x[:, None, :] + 3 * _EYE


# family -> a function of x: f32[b, 3]
OPS = {
    "elementwise": lambda x: jnp.sin(x) * 2 + jnp.exp(-x) + jnp.where(x > 0, x, 0.0) + jnp.clip(x, -1, 1),
    "integer": lambda x: ((x * 10).astype(jnp.int32) % 3, (x > 0).astype(jnp.int32).sum(0)),
    "reductions": lambda x: (x.sum(0), x.max(1), jnp.prod(x, 0), jnp.var(x, 0), jaxprc.nn.logsumexp(x, axis=0)),
    "argmax": lambda x: (jnp.argmax(x, axis=0), jnp.argmin(x, axis=1)),
    "cumulative": lambda x: (jnp.cumsum(x, axis=0), lax.cummax(x, axis=0, reverse=True),
                             lax.cumlogsumexp(x, axis=0), jnp.cumprod(x, axis=1)),
    "sort": lambda x: (jnp.sort(x, axis=0), jnp.argsort(x, axis=1), lax.sort((x[:, 0], x[:, 1]), num_keys=1)[1]),
    "slicing": lambda x: (x[1:, ::2], x[:-1], x[::-2], x[-2::-1, 1]),
    "gather": lambda x: (x[jnp.array([0, 0]), :], x[:, jnp.array([2, 0])],
                         jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)),
    "scatter": lambda x: (x.at[0].set(5.0), x.at[:, 1].add(1.0), x.at[jnp.array([0, 1, 0])].add(1.0)),
    "dynamic_slice": lambda x: (lax.dynamic_slice_in_dim(x, 1, 2, axis=1), lax.dynamic_slice_in_dim(x, 1, 1, axis=0),
                                lax.dynamic_update_slice(jnp.zeros((x.shape[0] + 2, 3)), x, (1, 0))),
    "concatenate_pad": lambda x: (jnp.concatenate([x, x * 2], axis=0), jnp.pad(x, ((1, 2), (0, 1)))),
    "reshape_transpose": lambda x: (x.reshape(-1, 1), x.T, jnp.broadcast_to(x[:, None, :], (x.shape[0], 2, 3))),
    "dot_general": lambda x: (x @ jnp.ones((3, 2)), x.T @ x, jaxprc.vmap(lambda r: r @ r)(x)),
    "conv": lambda x: lax.conv_general_dilated(x[None, None], jnp.ones((1, 1, 2, 2)), (1, 1), "SAME")[0, 0],
    "windowed": lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 1), (1, 1), "VALID"),
    "control_flow": lambda x: (lax.cond(x.sum() > 0, lambda y: y * 2, lambda y: -y, x),
                               lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i], jnp.zeros(3)),
                               lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(3), x)[1]),
    "calls": lambda x: (jaxprc.jit(lambda y: y * y.shape[0])(x), jaxprc.checkpoint(lambda y: jnp.sin(y) * 2)(x),
                        jaxprc.nn.gelu(x), jaxprc.grad(lambda y: jnp.sum(jnp.tanh(y) ** 2))(x)),
    "rng": lambda x: (random.uniform(random.key(0), x.shape), random.normal(random.key(1), x.shape)),
    "iota": lambda x: x + jnp.arange(x.shape[0])[:, None],
    "top_k": lambda x: (lax.top_k(x, 2), lax.top_k(x.T, 1)),
    "fft": lambda x: jnp.fft.rfft(x, axis=1).real,
    "numpy_helpers": lambda x: (jnp.diag(x[:, 0]) @ x, jnp.eye(x.shape[0]) @ x, jnp.median(x, axis=0),
                                jnp.split(x, [1], axis=0)[1], jnp.roll(x, 1, axis=0)),
    "numpy_on_b": lambda x: (jnp.where(x > 0, x, x.shape[0] * 0.5), jnp.trace(x), jnp.pad(x, ((1, 2), (0, 0)), mode="edge"),
                             jnp.cov(x.T), jnp.zeros(x.shape[0])),
    "linalg": lambda x: (jnp.linalg.cholesky(_spd(x)), jnp.abs(jnp.linalg.qr(_spd(x))[1]), jnp.linalg.eigh(_spd(x))[0],
                         jnp.linalg.svd(_spd(x), compute_uv=False), jnp.linalg.solve(_spd(x), x[..., None])),
}


def _all(x):
    return {name: op(x) for name, op in OPS.items()}


@pytest.fixture(scope="module")
def exported():
    b, = export.symbolic_shape("b")
    exp = export.export(jaxprc.jit(_all))(jaxprc.ShapeDtypeStruct((b, 3), np.float32))
    return export.deserialize(exp.serialize())


@pytest.mark.parametrize("n", [2, 5])
def test_every_family_runs_at_each_size_as_the_static_program(exported, n):
    x = np.random.default_rng(n).normal(size=(n, 3)).astype(np.float32)
    got, want = exported.call(x), jaxprc.jit(_all)(x)
    for name in OPS:
        got_leaves, want_leaves = jaxprc.tree_util.tree_leaves(got[name]), jaxprc.tree_util.tree_leaves(want[name])
        assert len(got_leaves) == len(want_leaves), name
        for g, w in zip(got_leaves, want_leaves):
            assert g.shape == w.shape and g.dtype == w.dtype, name
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=name)


def test_fft_along_a_symbolic_axis_is_refused_as_jax_refuses_it():
    """As in JAX it traces (and runs specialised to a size) but does not lower with a symbolic length."""
    b, = export.symbolic_shape("b")
    f = lambda x: jnp.fft.fft(x, axis=0).real             # noqa: E731
    poly = jaxprc.make_jaxpr(f)(jaxprc.ShapeDtypeStruct((b, 3), np.float32))
    assert jaxprc.ir.parse(str(poly)) == poly
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(jaxprc.jaxpr_as_fun(poly)(x)[0], np.fft.fft(x, axis=0).real, atol=1e-4)
    with pytest.raises(NotImplementedError, match="Shape polymorphism for FFT with non-constant fft_length is "
                                                  "not implemented for TPU and GPU"):
        export.export(jaxprc.jit(f))(jaxprc.ShapeDtypeStruct((b, 3), np.float32))


def test_associative_scan_along_a_symbolic_axis_is_refused_as_jax_refuses_it():
    b, = export.symbolic_shape("b")
    with pytest.raises(NotImplementedError, match="associative scan over axis of non-constant size: b"):
        jaxprc.make_jaxpr(lambda x: lax.associative_scan(lax.add, x, axis=0))(
            jaxprc.ShapeDtypeStruct((b, 3), np.float32))
