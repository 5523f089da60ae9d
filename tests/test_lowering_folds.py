"""Smaller StableHLO without changing values: one constant per distinct value and type per block,
broadcasts of broadcasts and of splat constants folded, and scan residuals that are xs slices
read from the xs instead of being stacked again."""
import re

import numpy as np

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax


def _text(f, *args):
    return jaxprc.jit(f).lower(*args).as_text()


def _constants_per_block(text):
    """The constant ops (value and type) of each block, blocks told apart by indentation and order."""
    blocks, stack = [], []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] > indent:
            blocks.append(stack.pop()[1])
        if not stack or stack[-1][0] < indent:
            stack.append((indent, []))
        m = re.search(r"stablehlo\.constant (.*)$", line)
        if m:
            stack[-1][1].append(m.group(1))
    return blocks + [b for _, b in stack]


def _assert_no_repeated_constants(text):
    for consts in _constants_per_block(text):
        assert len(consts) == len(set(consts)), f"a constant is emitted twice in one block:\n{text}"


X = np.linspace(-1.5, 2.0, 12, dtype=np.float32).reshape(3, 4)


def test_equal_constants_are_emitted_once_per_block():
    def f(x):
        a = x * 2.0 + 2.0
        b = jnp.where(x > 0.0, a, 2.0) - 0.0
        return a * b + jnp.float32(-0.0) + x.astype(jnp.int32) * 2 + 2
    text = _text(f, X)
    _assert_no_repeated_constants(text)
    a = X * 2 + 2
    want = a * (np.where(X > 0, a, 2) - 0) + X.astype(np.int32) * 2 + 2
    np.testing.assert_allclose(jaxprc.jit(f)(X), want, rtol=1e-6)
    np.testing.assert_allclose(f(X), want, rtol=1e-6)


def test_loop_bodies_get_their_own_constants():
    def f(x):
        def body(i, c):
            return c * 0.5 + jnp.float32(i) * 0.5 + 1.0
        return lax.fori_loop(0, 5, body, x * 0.5 + 1.0)
    text = _text(f, X)
    _assert_no_repeated_constants(text)
    want = X * 0.5 + 1.0
    for i in range(5):
        want = want * 0.5 + i * 0.5 + 1.0
    np.testing.assert_allclose(jaxprc.jit(f)(X), want, rtol=1e-6)


def test_signed_zero_and_nan_constants_stay_distinct():
    f = lambda x: (x * jnp.float32(0.0), x * jnp.float32(-0.0), jnp.maximum(x, jnp.nan), x - jnp.nan)
    x = np.array([1.0, -1.0, 2.0], np.float32)
    pos, neg, nan1, nan2 = jaxprc.jit(f)(x)
    np.testing.assert_array_equal(np.signbit(pos), [False, True, False])
    np.testing.assert_array_equal(np.signbit(neg), [True, False, True])
    assert np.isnan(nan1).all() and np.isnan(nan2).all()


def test_broadcast_of_broadcast_is_one_broadcast():
    def f(v):
        return jnp.broadcast_to(jnp.broadcast_to(v[:, None], (3, 4))[None], (2, 3, 4))
    v = np.arange(3, dtype=np.float32)
    text = _text(f, v)
    assert text.count("stablehlo.broadcast_in_dim") == 1, text
    np.testing.assert_array_equal(jaxprc.jit(f)(v), np.broadcast_to(v[None, :, None], (2, 3, 4)))


def test_a_broadcast_used_twice_is_kept():
    def f(v):
        b = jnp.broadcast_to(v[:, None], (3, 4))
        return b, jnp.broadcast_to(b, (2, 3, 4)) * 2.0
    v = np.arange(3, dtype=np.float32)
    b, c = jaxprc.jit(f)(v)
    np.testing.assert_array_equal(b, np.broadcast_to(v[:, None], (3, 4)))
    np.testing.assert_array_equal(c, 2 * np.broadcast_to(v[None, :, None], (2, 3, 4)))


def test_broadcast_of_a_scalar_constant_is_a_splat_constant():
    f = lambda x: x + lax.broadcast_in_dim(np.float32(1.5), (3, 4), ()) * lax.full((3, 4), 2, jnp.int32)
    text = _text(f, X)
    assert "broadcast_in_dim" not in text, text
    np.testing.assert_array_equal(jaxprc.jit(f)(X), X + 3.0)


def test_vmap_chain_has_no_broadcasts():
    def chain(x):
        for _ in range(3):
            x = jnp.tanh(x) * jnp.cos(x) + x + 1.0
        return x
    text = _text(jaxprc.vmap(chain), X)
    assert "broadcast_in_dim" not in text, text
    np.testing.assert_allclose(jaxprc.jit(jaxprc.vmap(chain))(X), chain(X), rtol=1e-6)


def _scan_loss(reverse):
    def loss(w, xs):
        def step(c, x):
            c = jnp.sin(c * x) + w * x
            return c, c * x
        c, ys = lax.scan(step, jnp.float32(0.5), xs, reverse=reverse)
        return c + jnp.sum(ys)
    return loss


def _numeric_grad(f, w, xs, eps=1e-3):
    f64 = lambda w, xs: float(f(np.float32(w), xs.astype(np.float32)))
    gw = (f64(w + eps, xs) - f64(w - eps, xs)) / (2 * eps)
    gx = np.array([(f64(w, xs + eps * e) - f64(w, xs - eps * e)) / (2 * eps) for e in np.eye(len(xs))])
    return gw, gx


def test_scan_residuals_that_are_xs_are_not_stacked_again():
    w, xs = np.float32(0.3), np.linspace(-1, 1, 7).astype(np.float32)
    for reverse in (False, True):
        loss = _scan_loss(reverse)
        g = jaxprc.grad(loss, argnums=(0, 1))
        cj = jaxprc.make_jaxpr(g)(w, xs)
        scans = [e for e in cj.jaxpr.eqns if e.primitive.name == "scan"]
        xs_var = cj.jaxpr.invars[1]
        assert any(xs_var in e.invars for e in scans[1:]), f"xs not read by the backward scan:\n{cj}"
        stacked = [v for v in scans[0].outvars if v.aval.shape == xs.shape]
        assert len(stacked) == 3, cj          # ys, c before the step, cos(c * x): not x
        want = _numeric_grad(loss, w, xs)
        for got in (g(w, xs), jaxprc.jit(g)(w, xs)):
            np.testing.assert_allclose(got[0], want[0], rtol=2e-3, atol=2e-3)
            np.testing.assert_allclose(got[1], want[1], rtol=2e-3, atol=2e-3)


def test_broadcast_of_a_complex_constant():
    f = lambda x: x + jnp.broadcast_to(jnp.complex64(1 + 2j), (3,))
    x = np.ones(3, np.complex64)
    np.testing.assert_array_equal(jaxprc.jit(f)(x), x + (1 + 2j))
