"""checkpoint's API as JAX's: print_saved_residuals, save_any_names_but_these, prevent_cse per
argument, optimization barriers only where differentiation left a recomputation, one trace per
signature, the options JAX has removed or refuses, and policies applied inside cond and scan."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies as cp, print_saved_residuals


def _printed(capsys, fun, *args):
    print_saved_residuals(fun, *args)
    return capsys.readouterr().out.splitlines()


def _three_dots(x):
    for _ in range(3):
        x = jnp.sin(jnp.dot(x, x))
    return x


def test_print_saved_residuals_says_where_each_residual_comes_from(capsys):
    here = __file__
    lines = _printed(capsys, checkpoint(_three_dots, policy=cp.checkpoint_dots), jnp.ones((3, 3)))
    assert lines[0] == "f32[3,3] from the argument x"
    assert len(lines) == 4 and all(line.startswith(f"f32[3,3] output of dot_general from {here}:") and
                                   line.endswith(" (_three_dots)") for line in lines[1:])
    assert _printed(capsys, checkpoint(lambda x, y: jnp.sin(x) * y), 1.0, 2.0) == [
        "f32[] from the argument x", "f32[] from the argument y"]
    c = np.arange(3.0, dtype=np.float32)
    lines = _printed(capsys, lambda x: (jnp.sin(x[0]) * x[1], jnp.cos(c * x[1])), (1.0, 2.0))
    assert lines[:2] == ["f32[3] from a constant", "f32[] from the argument x[1]"] and len(lines) == 5
    assert [line.split(" from ")[0] for line in lines[2:]] == ["f32[] output of sin", "f32[] output of cos",
                                                               "f32[3] output of neg"]
    lines = _printed(capsys, lambda x, *rest: jnp.sin(x) * rest[0], 1.0, 3.0)
    assert lines[0] == "f32[] from the argument rest[0]" and len(lines) == 3


def test_save_any_names_but_these_saves_the_other_names_only(capsys):
    def g(x):
        y = checkpoint_name(jnp.sin(x), "a")
        z = checkpoint_name(jnp.cos(y), "b")
        return jnp.sin(z) * x
    f = checkpoint(g, policy=cp.save_any_names_but_these("a"))
    lines = _printed(capsys, f, 1.0)
    assert lines[0] == "f32[] from the argument x" and lines[1].startswith("f32[] named 'b' from ")
    assert len(lines) == 2
    np.testing.assert_allclose(float(jx.grad(f)(0.3)), float(jx.grad(g)(0.3)), rtol=1e-6)


def _barrier_operands(text: str) -> list[int]:
    return [line.split("=")[1].count("%") for line in text.splitlines() if "optimization_barrier" in line]


def test_barriers_only_where_a_recomputation_is_fenced_off():
    f = lambda x, y: jnp.sin(x) * y
    assert _barrier_operands(jx.jit(checkpoint(f)).lower(1.0, 2.0).as_text()) == []
    assert _barrier_operands(jx.jit(jx.grad(checkpoint(f))).lower(1.0, 2.0).as_text()) != []
    assert _barrier_operands(jx.jit(jx.grad(checkpoint(f, prevent_cse=False))).lower(1.0, 2.0).as_text()) == []
    # per argument: only the first operand is fenced
    jaxpr = jx.make_jaxpr(checkpoint(f, prevent_cse=(True, False)))(1.0, 2.0)
    assert jaxpr.jaxpr.eqns[0].params["prevent_cse"] == (True, False)
    f_vmap = jx.vmap(checkpoint(f, prevent_cse=(True, False)))
    np.testing.assert_allclose(np.asarray(f_vmap(jnp.ones(2), jnp.ones(2))), np.sin(1.0) * np.ones(2), rtol=1e-6)
    grads = jx.grad(checkpoint(lambda x, y: jnp.sin(x) * y, prevent_cse=(False,)), argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose([float(g) for g in grads], [2 * np.cos(0.5), np.sin(0.5)], rtol=1e-6)


def test_prevent_cse_must_be_bools():
    with pytest.raises(TypeError, match="prevent_cse must be a bool or tuple of bools, got type"):
        checkpoint(lambda d: d["a"], prevent_cse={"a": True})({"a": 1.0})


def test_traced_once_per_signature():
    traces = []

    def g(x, n=1):
        traces.append(1)
        return jnp.sin(x) * n
    f = checkpoint(g)
    for _ in range(4):
        f(1.0)
    for _ in range(3):
        jx.grad(f)(1.0)
    assert len(traces) == 1
    f(jnp.ones(2))               # another signature
    assert len(traces) == 2
    traces.clear()
    h = checkpoint(g, static_argnums=(1,))
    for n in (2, 2, 3, 2):
        assert float(h(1.0, n)) == pytest.approx(np.sin(1.0) * n, rel=1e-6)
    assert len(traces) == 2
    traces.clear()
    k = checkpoint(g, static_argnames="n")
    assert float(k(1.0, n=4)) == pytest.approx(np.sin(1.0) * 4, rel=1e-6) and float(k(1.0, n=4)) and len(traces) == 1


def test_a_closure_over_a_tracer_is_traced_per_call():
    def outer(x):
        return checkpoint(lambda y: jnp.sin(y) * x)(x)
    assert float(jx.grad(outer)(0.5)) == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5), rel=1e-6)
    assert float(jx.jit(jx.grad(outer))(0.7)) == pytest.approx(np.cos(0.7) * 0.7 + np.sin(0.7), rel=1e-6)


def test_remat_with_a_policy_and_the_removed_concrete_option():
    f = lambda x, y: jnp.sin(x) * y
    assert float(jx.grad(jx.remat(f, policy=cp.nothing_saveable))(1.0, 2.0)) == pytest.approx(2 * np.cos(1.0))
    with pytest.raises(NotImplementedError, match="The `concrete` option to `jax.checkpoint` was deprecated"):
        jx.remat(f, concrete=True)


_W = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
_X = np.array([0.3, -0.2, 0.5], np.float32)


def _cond_of_dots(x, w):
    return jnp.sin(jx.lax.cond(x.sum() > 0, lambda v: jnp.sin(jnp.sin(v @ w) @ w), lambda v: jnp.cos(v * 2.0),
                               x)).sum()


def _switch_of_dots(i, x, w):
    return jx.lax.switch(i, [lambda v: jnp.sin(v @ w), lambda v: jnp.cos(v) @ w @ w, lambda v: v], x).sum()


def test_a_policy_applies_inside_a_cond_the_checkpoint_recomputes(capsys):
    # the dots of the branch taken are saved (the cond's extra outputs), the sines recomputed
    lines = _printed(capsys, checkpoint(_cond_of_dots, policy=cp.checkpoint_dots), _X, _W)
    assert lines[:2] == ["f32[3] from the argument x", "f32[3,3] from the argument w"]
    assert [line.split(" from ")[0] for line in lines[2:]] == ["f32[3] output of cond"] * 2
    # switch's branches save different numbers of dots: one slot each, zeros in the others
    lines = _printed(capsys, checkpoint(_switch_of_dots, policy=cp.checkpoint_dots), 1, _X, _W)
    assert [line.split(" from ")[0] for line in lines[3:]] == ["f32[3] output of cond"]
    for x in (_X, -_X):
        for a, b in zip(jx.grad(_cond_of_dots, (0, 1))(x, _W),
                        jx.grad(checkpoint(_cond_of_dots, policy=cp.checkpoint_dots), (0, 1))(x, _W)):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6)
    grad_remat = jx.jit(jx.grad(checkpoint(_switch_of_dots, policy=cp.checkpoint_dots), (1, 2)))
    for i in range(3):
        for a, b in zip(jx.grad(_switch_of_dots, (1, 2))(i, _X, _W), grad_remat(i, _X, _W)):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-6)
    # no policy: nothing inside is saved
    assert len(_printed(capsys, checkpoint(_cond_of_dots), _X, _W)) == 2


def _scan_of_dots(x, w, ws):
    def body(c, wi):
        h = jnp.sin(c[0] @ wi) + jnp.cos(c[1] @ w)
        return (h, jnp.tanh(h @ w)), jnp.sin(h) @ wi
    (a, b), ys = jx.lax.scan(body, (x, x * 2), ws)
    return (a * b).sum() + ys.sum()


def test_a_policy_applies_inside_a_scan_the_checkpoint_recomputes(capsys):
    ws = np.stack([_W, _W.T, -_W])
    # each iteration's three dots are saved, stacked as extra outputs of the forward scan
    lines = _printed(capsys, checkpoint(_scan_of_dots, policy=cp.checkpoint_dots), _X, _W, ws)
    assert [line.split(" from ")[0] for line in lines[3:]] == ["f32[3,3] output of scan"] * 3
    for a, b in zip(jx.grad(_scan_of_dots, (0, 1, 2))(_X, _W, ws),
                    jx.jit(jx.grad(checkpoint(_scan_of_dots, policy=cp.checkpoint_dots), (0, 1, 2)))(_X, _W, ws)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
