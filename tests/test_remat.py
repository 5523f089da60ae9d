"""Rematerialization: jaxprc.checkpoint / remat, saving policies, checkpoint_name.

Oracles: the same function differentiated without checkpoint (remat must not change any
derivative), the residual count of the linearized program (the policy must change what is
saved), XLA's compiled memory statistics (the point of remat), and the text form.
"""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies as cp, remat
from jaxprc.ir.core import ShapedArray
from jaxprc.ir.equality import alpha_equivalent
from jaxprc.ir.parser import parse
from jaxprc.ir.tracing import trace_to_jaxpr
from jaxprc.ir.verify import verify
from jaxprc.passes.dce import dce
from jaxprc.passes.partial_eval import linearize_jaxpr
from jaxprc.tree_util import tree_leaves

f32 = np.float32
rng = np.random.RandomState(0)


def _custom_policy(prim, *avals, **params):
    """A Python policy with JAX's signature: save results of sin only."""
    return prim.name == "sin"


POLICIES = {
    "default": None,
    "everything": cp.everything_saveable,
    "nothing": cp.nothing_saveable,
    "dots": cp.dots_saveable,
    "checkpoint_dots": cp.checkpoint_dots,
    "dots_no_batch": cp.dots_with_no_batch_dims_saveable,
    "names": cp.save_only_these_names("hidden"),
    "all_but_names": cp.save_anything_except_these_names("hidden"),
    "python": _custom_policy,
}


def layer(p, x):
    W, b = p
    h = checkpoint_name(jnp.sin(x @ W + b), "hidden")
    return jnp.tanh(h * x)


def mlp(params, x, wrap=lambda f: f):
    for p in params:
        x = wrap(layer)(p, x)
    return jnp.sum(x ** 2)


PARAMS = [(rng.randn(6, 6).astype(f32) * 0.5, rng.randn(6).astype(f32)) for _ in range(3)]
X = rng.randn(4, 6).astype(f32)


def assert_trees_close(a, b, rtol=1e-6, atol=1e-6):
    la, lb = tree_leaves(a), tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def plain_mlp_grads():
    return jaxprc.grad(mlp, argnums=(0, 1))(PARAMS, X)


# ----------------------------------------------------------------- gradients

@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_mlp_gradients_equal_plain_for_every_policy(policy, plain_mlp_grads):
    wrap = lambda f: checkpoint(f, policy=POLICIES[policy])
    g = jaxprc.grad(lambda p, x: mlp(p, x, wrap), argnums=(0, 1))(PARAMS, X)
    assert_trees_close(g, plain_mlp_grads)


@pytest.mark.parametrize("policy", ["default", "dots", "everything"])
def test_mlp_gradients_under_jit(policy, plain_mlp_grads):
    wrap = lambda f: remat(f, policy=POLICIES[policy])
    g = jaxprc.jit(jaxprc.grad(lambda p, x: mlp(p, x, wrap), argnums=(0, 1)))(PARAMS, X)
    assert_trees_close(g, plain_mlp_grads)


def scan_loss(c0, xs, wrap):
    def body(c, x):
        return wrap(lambda c, x: (jnp.tanh(c * x + jnp.sin(c)), jnp.cos(c) * x))(c, x)
    c, ys = lax.scan(body, c0, xs)
    return jnp.sum(c) + jnp.sum(ys ** 2)


C0 = np.linspace(0.5, 1.0, 4).astype(f32)
XS = np.linspace(-1.0, 1.0, 20).astype(f32).reshape(5, 4)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_checkpoint_inside_scan_body(policy):
    wrap = lambda f: checkpoint(f, policy=POLICIES[policy], prevent_cse=False)
    expected = jaxprc.grad(lambda c, x: scan_loss(c, x, lambda f: f), argnums=(0, 1))(C0, XS)
    got = jaxprc.grad(lambda c, x: scan_loss(c, x, wrap), argnums=(0, 1))(C0, XS)
    assert_trees_close(got, expected)
    jitted = jaxprc.jit(jaxprc.grad(lambda c, x: scan_loss(c, x, wrap), argnums=(0, 1)))(C0, XS)
    assert_trees_close(jitted, expected)


def test_scan_inside_checkpoint():
    loss = lambda c, x: scan_loss(c, x, lambda f: f)
    expected = jaxprc.grad(loss, argnums=(0, 1))(C0, XS)
    assert_trees_close(jaxprc.grad(checkpoint(loss), argnums=(0, 1))(C0, XS), expected)


def test_custom_vjp_inside_checkpoint():
    if not hasattr(jaxprc, "custom_vjp"):
        pytest.skip("jaxprc.custom_vjp is not available")

    @jaxprc.custom_vjp
    def clipped_sin(x):
        return jnp.sin(x)
    clipped_sin.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)),
                       lambda cos_x, ct: (jnp.clip(ct * cos_x, -0.1, 0.1),))

    def f(x):
        return jnp.sum(clipped_sin(jnp.tanh(x) * 3.0) ** 2)
    u = 3.0 * np.tanh(XS)       # the custom rule is used: its clipping shows in the gradient
    expected = np.clip(2 * np.sin(u) * np.cos(u), -0.1, 0.1) * 3.0 * (1 - np.tanh(XS) ** 2)
    assert_trees_close(jaxprc.grad(f)(XS), expected, rtol=1e-5)
    for policy in POLICIES.values():
        assert_trees_close(jaxprc.grad(checkpoint(f, policy=policy))(XS), expected)
    assert_trees_close(jaxprc.jit(jaxprc.grad(checkpoint(f)))(XS), expected)


def test_nested_checkpoints():
    inner = checkpoint(lambda x: jnp.sin(jnp.exp(x) * x))
    outer = checkpoint(lambda x: jnp.sum(inner(x) * jnp.cos(x)), policy=cp.dots_saveable)
    expected = jaxprc.grad(lambda x: jnp.sum(jnp.sin(jnp.exp(x) * x) * jnp.cos(x)))(XS)
    assert_trees_close(jaxprc.grad(outer)(XS), expected)


def test_jvp_vmap_and_eager():
    f = lambda x: jnp.sum(jnp.sin(x) * x)
    cf = checkpoint(f)
    assert_trees_close(jaxprc.jvp(cf, (C0,), (C0,)), jaxprc.jvp(f, (C0,), (C0,)))
    assert_trees_close(jaxprc.vmap(jaxprc.grad(cf))(XS), jaxprc.vmap(jaxprc.grad(f))(XS))
    assert_trees_close(cf(C0), f(C0))                    # eager: the primitive runs on its own
    assert_trees_close(jaxprc.hessian(cf)(C0), jaxprc.hessian(f)(C0), rtol=1e-5)


def test_static_argnums_pytrees_and_kwargs():
    def f(x, n, scale=1.0):
        out = x["a"]
        for _ in range(n):                               # n must be a Python int
            out = jnp.sin(out) * x["b"]
        return {"y": out * scale}
    cf = checkpoint(f, static_argnums=(1,))
    x = {"a": C0, "b": C0 * 2}
    assert_trees_close(cf(x, 3, scale=2.0), f(x, 3, scale=2.0))
    g = lambda x: jnp.sum(cf(x, 2, scale=3.0)["y"])
    assert_trees_close(jaxprc.grad(g)(x), jaxprc.grad(lambda x: jnp.sum(f(x, 2, scale=3.0)["y"]))(x))
    eqns = jaxprc.make_jaxpr(lambda x: cf(x, 2))(x).eqns
    assert [e.primitive.name for e in eqns] == ["checkpoint"]


# --------------------------------------------------- the policy changes residuals

def _residual_count(policy) -> int:
    avals = [ShapedArray(a.shape, a.dtype) for p in PARAMS for a in p] + [ShapedArray(X.shape, X.dtype)]

    def flat(*leaves):
        params = [tuple(leaves[i:i + 2]) for i in range(0, len(PARAMS) * 2, 2)]
        return [mlp(params, leaves[-1], lambda f: checkpoint(f, policy=policy))]
    cj = trace_to_jaxpr(flat, avals)
    _, _, _, n_res = linearize_jaxpr(cj, [True] * len(avals))
    return n_res


def test_policy_changes_the_residuals():
    nothing = _residual_count(cp.nothing_saveable)
    assert _residual_count(None) == nothing
    dots = _residual_count(cp.dots_saveable)
    names = _residual_count(cp.save_only_these_names("hidden"))
    everything = _residual_count(cp.everything_saveable)
    plain = _residual_count(cp.everything_saveable)
    assert nothing < dots < everything, (nothing, dots, everything)
    assert nothing < names < everything, (nothing, names, everything)
    assert _residual_count(cp.save_only_these_names("no such name")) == nothing
    assert everything == plain


def test_recomputation_lives_in_the_backward_checkpoint():
    cf = checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))))
    cj = jaxprc.make_jaxpr(jaxprc.grad(cf))(C0)
    # forward: only the primal value is computed and discarded; the backward checkpoint
    # recomputes sin(x) from x itself (its only non-cotangent operand)
    (ckpt,) = [e for e in cj.eqns if e.primitive.name == "checkpoint"]
    assert ckpt.invars[0] is cj.jaxpr.invars[0]
    assert [e.primitive.name for e in ckpt.params["jaxpr"].eqns].count("sin") >= 1


def test_dce_prunes_checkpoint_outputs():
    cf = checkpoint(lambda x: (jnp.sin(x), jnp.exp(x)))
    cj = jaxprc.make_jaxpr(lambda x: cf(x)[0])(C0)
    (ckpt,) = dce(cj).eqns
    names = [e.primitive.name for e in ckpt.params["jaxpr"].eqns]
    assert names == ["sin"] and len(ckpt.outvars) == 1


# ------------------------------------------------------------ checkpoint_name

def test_checkpoint_name_is_an_identity_under_every_transformation():
    x = C0
    assert_trees_close(checkpoint_name(x, "a"), x)
    assert_trees_close(jaxprc.jit(lambda x: checkpoint_name(x * 2, "a"))(x), x * 2)
    assert_trees_close(jaxprc.grad(lambda x: jnp.sum(checkpoint_name(jnp.sin(x), "a")))(x), np.cos(x))
    assert_trees_close(jaxprc.vmap(lambda x: checkpoint_name(x, "a"))(XS), XS)
    t = jaxprc.linear_transpose(lambda v: checkpoint_name(v * 3.0, "a"), x)(np.ones(4, f32))
    assert_trees_close(t, (np.full(4, 3.0, f32),))
    with pytest.raises(TypeError, match="name must be a string"):
        checkpoint_name(x, 3)


def test_bad_policy_is_rejected():
    with pytest.raises(TypeError, match="policy must be None or a saving policy"):
        checkpoint(jnp.sin, policy="dots")
    with pytest.raises(TypeError, match="names must be strings"):
        cp.save_only_these_names(1)


# ------------------------------------------------------------------ text form

@pytest.mark.parametrize("policy", ["default", "dots", "names"])
def test_text_round_trip(policy):
    f = lambda x: jnp.sum(jnp.cos(checkpoint_name(jnp.sin(x), "hidden")) * x)
    for cj in (jaxprc.make_jaxpr(checkpoint(f, policy=POLICIES[policy]))(C0),
               jaxprc.make_jaxpr(jaxprc.grad(checkpoint(f, policy=POLICIES[policy])))(C0)):
        text = str(cj)
        back = parse(text)
        verify(back)
        assert str(back) == text and alpha_equivalent(back, cj)
    if POLICIES[policy] is not None:
        assert "CheckpointPolicy(" in text


# ------------------------------------------------------- the memory it saves

L, WIDTH, HIDDEN, BATCH = 32, 32, 128, 256


def block(p, x):
    """One layer of the MLP: a residual block with a 4x wider tanh hidden layer."""
    W1, b1, W2 = p
    return x + jnp.tanh(x @ W1 + b1) @ W2


def deep_loss(params, x, wrap):
    for p in params:
        x = wrap(block)(p, x)
    return jnp.sum(x ** 2)


@pytest.fixture(scope="module")
def deep_programs():
    r = np.random.RandomState(1)
    params = [(r.randn(WIDTH, HIDDEN).astype(f32) / 8, r.randn(HIDDEN).astype(f32) * 0.1,
               r.randn(HIDDEN, WIDTH).astype(f32) / 16) for _ in range(L)]
    x = r.randn(BATCH, WIDTH).astype(f32)
    out = {}
    for label, wrap in [("plain", lambda f: f),
                        ("remat", lambda f: checkpoint(f, policy=cp.nothing_saveable))]:
        g = jaxprc.jit(jaxprc.grad(lambda p, x: deep_loss(p, x, wrap), argnums=(0, 1)))
        lowered = g.lower(params, x)
        out[label] = (lowered.as_text(), lowered.compile().memory_analysis(), g(params, x))
    return out


def test_remat_lowers_behind_optimization_barriers(deep_programs):
    assert "optimization_barrier" not in deep_programs["plain"][0]
    assert deep_programs["remat"][0].count("stablehlo.optimization_barrier") == L


def test_remat_reduces_temp_memory_and_keeps_gradients(deep_programs):
    plain_stats, plain_grads = deep_programs["plain"][1:]
    remat_stats, remat_grads = deep_programs["remat"][1:]
    assert remat_stats.temp_size_in_bytes * 2 < plain_stats.temp_size_in_bytes, (
        remat_stats.temp_size_in_bytes, plain_stats.temp_size_in_bytes)
    assert_trees_close(remat_grads, plain_grads, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.float32])
def test_mixed_operand_types_under_jit(dtype):
    """The backward checkpoint's operands of every width and kind (floats, ints) are lowered."""
    x = np.linspace(-1, 1, 6).astype(jnp.dtype(dtype))
    n = np.arange(6, dtype=np.int32)
    f = lambda x, n: jnp.sum(jnp.sin(x * x) * n.astype(x.dtype))
    got = jaxprc.jit(jaxprc.grad(checkpoint(f)))(x, n)
    want = 2 * np.asarray(x, f32) * np.cos(np.asarray(x, f32) ** 2) * n
    np.testing.assert_allclose(np.asarray(got, f32), want, rtol=2e-2, atol=2e-2)
