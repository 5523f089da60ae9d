"""Serialized Exported artifacts move between JAX and jaxprc in both directions: JAX's bytes are
deserialized and called (and differentiated through their vjp) in jaxprc, jaxprc's bytes in JAX,
with values, avals and pytrees compared with the same function run by the other library."""
import collections

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import export as jexport

import jaxprc
import jaxprc.numpy as xjnp
from jaxprc import export as xexport

Pair = collections.namedtuple("Pair", "mask count")
jexport.register_namedtuple_serialization(Pair, serialized_name="interchange.Pair")
xexport.register_namedtuple_serialization(Pair, serialized_name="interchange.Pair")


def model(np_):
    """A pytree function with float, int and bool arguments and results."""
    def f(d, p):
        s = np_.sin(d["x"]) * p.count.astype(np.float32) + np_.where(p.mask, d["w"], 0.0)
        return {"s": s, "n": (d["x"] > 0).astype(np.int32) + p.count, "t": (s.sum(), p.mask)}
    return f


ARGS = ({"x": np.array([0.5, -2.0, 3.0], np.float32), "w": np.array([1.0, 2.0, -1.0], np.float32)},
        Pair(np.array([True, False, True]), np.array([1, 2, 3], np.int32)))


def _loss(call):
    return lambda d: call(d, ARGS[1])["t"][0]


def _assert_same(got, want):
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert str(got_tree) == str(want_tree)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=2e-6)


_CACHE = {}


def _serialized(lib):
    if lib not in _CACHE:
        mod, np_, jit = (jexport, jjnp, jax.jit) if lib == "jax" else (xexport, xjnp, jaxprc.jit)
        _CACHE[lib] = mod.export(jit(model(np_)))(*ARGS).serialize(vjp_order=1)
    return _CACHE[lib]


def test_jax_artifact_runs_in_jaxprc():
    exp = xexport.deserialize(_serialized("jax"))
    want = jax.jit(model(jjnp))(*ARGS)
    _assert_same(exp.call(*ARGS), want)
    _assert_same(jaxprc.jit(exp.call)(*ARGS), want)
    assert exp.fun_name == "f" and exp.platforms == ("cpu",)
    theirs = jexport.deserialize(_serialized("jax"))
    for ours, their in ((exp.in_avals, theirs.in_avals), (exp.out_avals, theirs.out_avals)):
        assert [(a.shape, a.dtype) for a in ours] == [(a.shape, a.dtype) for a in their]


def test_jax_artifact_vjp_in_jaxprc():
    exp = xexport.deserialize(_serialized("jax"))
    want = jax.grad(_loss(model(jjnp)))(ARGS[0])
    _assert_same(jaxprc.grad(_loss(exp.call))(ARGS[0]), want)
    _assert_same(jaxprc.jit(jaxprc.grad(_loss(exp.call)))(ARGS[0]), want)


def test_jaxprc_artifact_runs_in_jax():
    exp = jexport.deserialize(_serialized("jaxprc"))
    want = jax.jit(model(jjnp))(*ARGS)
    _assert_same(exp.call(*ARGS), want)
    theirs = jexport.export(jax.jit(model(jjnp)))(*ARGS)
    assert exp.in_avals == theirs.in_avals and exp.out_avals == theirs.out_avals
    assert exp.in_tree == theirs.in_tree and exp.out_tree == theirs.out_tree
    assert exp.calling_convention_version == theirs.calling_convention_version
    assert exp.nr_devices == 1 and exp.platforms == theirs.platforms


def test_jaxprc_artifact_vjp_in_jax():
    exp = jexport.deserialize(_serialized("jaxprc"))
    want = jax.grad(_loss(model(jjnp)))(ARGS[0])
    _assert_same(jax.grad(_loss(exp.call))(ARGS[0]), want)
    vjp, theirs = exp.vjp(), jexport.export(jax.jit(model(jjnp)))(*ARGS).vjp()
    assert vjp.in_avals == theirs.in_avals and vjp.out_avals == theirs.out_avals


def test_symbolic_batch_from_jax():
    """JAX's module with a dynamic batch dimension (and its constraint, kept only in the module's
    shape assertions) runs in jaxprc at several sizes; a size breaking the constraint fails."""
    def f(x, y):
        return jjnp.tanh(x @ y) * x.shape[0], jjnp.sum(x, axis=0)
    b, = jexport.symbolic_shape("b", constraints=["b >= 2"])
    exported = jexport.export(jax.jit(f))(jax.ShapeDtypeStruct((b, 4), np.float32),
                                          jax.ShapeDtypeStruct((4, 3), np.float32))
    exp = xexport.deserialize(exported.serialize(vjp_order=1))
    assert str(exp.in_avals[0].shape) == "(b, 4)" and exp.uses_global_constants
    rng = np.random.default_rng(0)
    y = rng.normal(size=(4, 3)).astype(np.float32)
    for n in (2, 5):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        _assert_same(exp.call(x, y), exported.call(x, y))
        _assert_same(jaxprc.grad(lambda x: exp.call(x, y)[0].sum())(x),
                     jax.grad(lambda x: exported.call(x, y)[0].sum())(x))
    with pytest.raises(ValueError, match=r"refinement of a called module failed: Input shapes do not match the symbolic "
                       r"shape constraint b >= 2\. Expected 'b - 2' to be greater or equal to 0, but found -1\."):
        exp.call(np.ones((1, 4), np.float32), y)


def test_second_order_both_ways():
    x = np.array([0.3, 1.2], np.float32)
    want = jax.grad(lambda x: jax.grad(lambda y: jjnp.sin(y).sum())(x).sum())(x)
    for blob, grad, call in ((jexport.export(jax.jit(jjnp.sin))(x).serialize(vjp_order=2), jaxprc.grad, xexport),
                             (xexport.export(jaxprc.jit(xjnp.sin))(x).serialize(vjp_order=2), jax.grad, jexport)):
        exp = call.deserialize(blob)
        np.testing.assert_allclose(grad(lambda x: grad(lambda y: exp.call(y).sum())(x).sum())(x), want, rtol=1e-6)


def test_symbolic_batch_from_jaxprc():
    """jaxprc's polymorphic program, serialized as one dynamic module, runs in JAX at several sizes
    (JAX refines it), differentiates there through its vjp, and checks its constraint."""
    def f(np_):
        def model(x, w, bias):
            h = np_.tanh(x @ w + bias)
            return h * x.shape[0], np_.mean(h, axis=0), np_.arange(x.shape[0]) * 2
        return model
    b, = xexport.symbolic_shape("b", constraints=["b >= 2"])
    specs = (jaxprc.ShapeDtypeStruct((b, 4), np.float32), jaxprc.ShapeDtypeStruct((4, 3), np.float32),
             jaxprc.ShapeDtypeStruct((3,), np.float32))
    exp = jexport.deserialize(xexport.export(jaxprc.jit(f(xjnp)))(*specs).serialize(vjp_order=1))
    assert str(exp.in_avals[0].shape) == "(b, 4)" and str(exp.out_avals[2].shape) == "(b,)"
    rng = np.random.default_rng(2)
    w, bias = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    for n in (2, 6):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        _assert_same(exp.call(x, w, bias), f(jjnp)(x, w, bias))
        _assert_same(jax.jit(exp.call)(x, w, bias), f(jjnp)(x, w, bias))
        loss = lambda call: lambda x: call(x, w, bias)[1].sum()
        np.testing.assert_allclose(jax.grad(loss(exp.call))(x), jax.grad(loss(f(jjnp)))(x), rtol=1e-5)
    with pytest.raises(ValueError, match="Error refining shapes") as info:     # JAX's words, then ours
        exp.call(np.ones((1, 4), np.float32), w, bias)
    assert "Input shapes do not match the symbolic shape constraint b >= 2" in str(info.value.__cause__)


def test_multi_platform_artifacts_both_ways():
    """Artifacts for ("cpu", "cuda"), lowered by each library on a machine without a GPU: the
    other one calls them on cpu (the module's platform-index argument picks the cpu lowering)."""
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    theirs = jexport.export(jax.jit(jjnp.tanh), platforms=("cpu", "cuda"))(x).serialize()
    ours = xexport.export(jaxprc.jit(xjnp.tanh), platforms=("cpu", "cuda"))(x).serialize()
    for exp in (xexport.deserialize(theirs), jexport.deserialize(ours)):
        assert exp.platforms == ("cpu", "cuda")
        np.testing.assert_allclose(exp.call(x), np.tanh(x), rtol=1e-6)
