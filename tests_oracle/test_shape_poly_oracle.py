"""Symbolic shapes against JAX's jax.export: the text of dimension expressions, the decisions of
comparisons under constraints, the shapes functions trace to, and the values of a polymorphic
program at several concrete sizes (JAX's Exported.call against jaxprc's specialised program)."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import export as jexport

import jaxprc
import jaxprc.numpy as xjnp
from jaxprc.ir import shape_poly as sp

# expressions over b, h, formed by Python arithmetic on each library's dimensions
EXPRESSIONS = [
    lambda b, h: b + 1, lambda b, h: 2 * b + 1, lambda b, h: b * h + 2 * b - 3,
    lambda b, h: (b + 1) * (b - 1), lambda b, h: 3 - b, lambda b, h: b // 2, lambda b, h: b % 3,
    lambda b, h: (2 * b + 3) // 2, lambda b, h: (2 * b + 3) % 2, lambda b, h: (1 - b) // 2,
    lambda b, h: b * h * b + h, lambda b, h: (4 * b) // 4, lambda b, h: (b * h) // h,
]
PARSED = ["max(b, 4)", "min(b, h) + 1", "floordiv(b, 2)", "mod(b + 1, 3)"]

# (lhs, op, rhs, constraints): JAX's answer (True/False/inconclusive) is the oracle
COMPARISONS = [
    ("b", ">=", "1", ()), ("b", ">=", "2", ()), ("b", ">=", "2", ("b >= 2",)), ("b", "<", "h", ()),
    ("b + 1", ">", "b", ()), ("2*b", ">=", "b + 1", ()), ("mod(b, 3)", "<", "3", ()), ("floordiv(b, 2)", ">=", "0", ()),
    ("b", "<=", "10", ("b <= 10",)), ("b", "<", "10", ("b <= 10",)), ("h", ">", "b", ("h >= b + 3",)),
    ("b", "==", "2", ()), ("b*h", ">=", "1", ()), ("b - 1", "<", "0", ()),
    ("min(b, 5)", "<=", "b", ()), ("max(b, h)", ">=", "b", ()), ("min(b, 5)", ">=", "3", ()),
    ("max(b, 5) - min(b, 5)", ">=", "0", ()), ("min(b, h)", "<=", "h", ()),
]


def _decide(mod, lhs, op, rhs, constraints):
    scope = mod.SymbolicScope(constraints)
    a, c = mod.symbolic_shape(f"{lhs}, {rhs}", scope=scope)
    try:
        return {">=": lambda: a >= c, ">": lambda: a > c, "<": lambda: a < c, "<=": lambda: a <= c,
                "==": lambda: a == c}[op]()
    except mod.InconclusiveDimensionOperation if mod is sp else Exception as e:
        assert "inconclusive" in str(e).lower()
        return "inconclusive"


def test_expression_text_matches_jax():
    theirs, ours = jexport.symbolic_shape("b, h"), sp.symbolic_shape("b, h")
    for expr in EXPRESSIONS:
        assert str(expr(*ours)) == str(expr(*theirs))
    for text in PARSED:
        assert str(sp.symbolic_shape(text)[0]) == str(jexport.symbolic_shape(text)[0]), text


def test_comparisons_match_jax():
    for case in COMPARISONS:
        assert _decide(sp, *case) == _decide(jexport, *case), case


# name -> (function of a numpy module, argument shapes over b)
FUNCTIONS = {
    "mlp": (lambda m: lambda x, w: m.tanh(x @ w).sum(axis=1) / x.shape[0], [("b, 4"), ("4, 3")]),
    "reshape": (lambda m: lambda x, w: (x.reshape(-1, 2).T, x.reshape((x.shape[0], 2, 2))),
                ["b, 4", "4, 3"]),
    "slices": (lambda m: lambda x, w: (x[1:] * 2, x[1::2], x[-1], m.concatenate([x, x[:1]])),
               ["b, 4", "4, 3"]),
    "arange": (lambda m: lambda x, w: x * m.arange(x.shape[0], dtype=np.float32)[:, None]
               + m.arange(2, x.shape[0] + 2).sum(), ["b, 4", "4, 3"]),
    "cumsum_where": (lambda m: lambda x, w: m.where(m.cumsum(x, axis=0) > 0, x, -x) @ w, ["b, 4", "4, 3"]),
    "tile": (lambda m: lambda x, w: m.tile(x, (2, 1)).mean(axis=0), ["b, 4", "4, 3"]),
    "linspace": (lambda m: lambda x, w: (x * m.linspace(0., 1., x.shape[0])[:, None],
                                         m.linspace(-1., 1., x.shape[0], endpoint=False)), ["b, 4", "4, 3"]),
    "numpy_helpers": (lambda m: lambda x, w: (m.where(x > 0, x, x.shape[0] * 0.5), x / (x.shape[0] / 2), m.trace(x),
                                              m.pad(x, ((1, 2), (0, 0)), mode="edge"), m.pad(x, ((1, 1), (0, 0)), mode="reflect"),
                                              m.pad(x, ((2, 1), (0, 0)), mode="symmetric"), m.cov(x.T),
                                              m.zeros(x.shape[0]), m.unique(x, size=3, fill_value=0.), m.delete(x, 0, axis=0),
                                              m.triu_indices(x.shape[0]), m.tril_indices(x.shape[0], 1, 3)),
                      ["b, 4", "4, 3"]),
}


def _specs(mod_export, shape_cls, texts, constraints=("b >= 2",)):
    scope = mod_export.SymbolicScope(constraints)
    return [shape_cls(mod_export.symbolic_shape(t, scope=scope), np.float32) for t in texts]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_traced_shapes_and_values_match_jax(name):
    make, texts = FUNCTIONS[name]
    f_jax, f_ours = make(jjnp), make(xjnp)
    theirs = jax.eval_shape(f_jax, *_specs(jexport, jax.ShapeDtypeStruct, texts))
    poly = jaxprc.make_jaxpr(f_ours)(*_specs(sp, jaxprc.ShapeDtypeStruct, texts))
    their_avals = jax.tree_util.tree_leaves(theirs)
    assert [str(a.shape) for a in poly.out_avals] == [str(t.shape) for t in their_avals]
    assert [a.dtype for a in poly.out_avals] == [t.dtype for t in their_avals]
    exported = jexport.export(jax.jit(f_jax))(*_specs(jexport, jax.ShapeDtypeStruct, texts))
    run = jaxprc.jit(jaxprc.jaxpr_as_fun(jaxprc.ir.parse(str(poly))))
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    for n in (2, 3, 6):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        want = jax.tree_util.tree_leaves(exported.call(x, w))
        got = run(x, w)
        for g, v in zip(got, want):
            assert g.shape == v.shape and g.dtype == v.dtype
            np.testing.assert_allclose(g, v, rtol=2e-6, atol=2e-6)


def test_constraint_violation_is_refused_like_jax():
    f = lambda x: x * 2
    exported = jexport.export(jax.jit(f))(*_specs(jexport, jax.ShapeDtypeStruct, ["b, 4"]))
    with pytest.raises(ValueError):
        exported.call(np.ones((1, 4), np.float32))
    run = jaxprc.jaxpr_as_fun(jaxprc.make_jaxpr(f)(*_specs(sp, jaxprc.ShapeDtypeStruct, ["b, 4"])))
    with pytest.raises(ValueError, match="b >= 2"):
        run(np.ones((1, 4), np.float32))


# functions of x: f32[b] that JAX refuses when b has no constraint: (exception type, message words)
REFUSED = {
    "linspace": (lambda m: lambda x: m.linspace(0., 1., x.shape[0]),
                 "InconclusiveDimensionOperation", "comparison 'b' > '1' is inconclusive"),
    "convolve": (lambda m: lambda x: m.convolve(x, m.ones(3)), "TypeError", "cannot be interpreted as an integer"),
    "correlate_same": (lambda m: lambda x: m.correlate(m.ones(2), x, mode="same"),
                       "TypeError", "cannot be interpreted as an integer"),
    "logspace": (lambda m: lambda x: m.logspace(0., 1., x.shape[0]), "TypeError", "cannot be interpreted as an integer"),
    "len": (lambda m: lambda x: x * len(x), "TypeError", "cannot be interpreted as an integer"),
    "indices": (lambda m: lambda x: m.indices((x.shape[0], 2))[0], "TypeError", "cannot be interpreted as an integer"),
    "squeeze": (lambda m: lambda x: m.squeeze(x), "ValueError", "squeeze with axis=None is not supported"),
    "pad_reflect": (lambda m: lambda x: m.pad(x, 1, mode="reflect"), "ValueError",
                    "the axis size (= b) is larger than 1 and larger or equal than the padding length (= 1)"),
    "pad_wrap": (lambda m: lambda x: m.pad(x, 1, mode="wrap"), "InconclusiveDimensionOperation",
                 "comparison 'mod(1, b)' > '0' is inconclusive"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusals_match_jax(name):
    make, type_name, words = REFUSED[name]
    for lib, mod, m in ((jax, jexport, jjnp), (jaxprc, jaxprc.export, xjnp)):
        b, = mod.symbolic_shape("b")
        with pytest.raises(Exception) as info:
            mod.export(lib.jit(make(m)))(lib.ShapeDtypeStruct((b,), np.float32))
        assert type(info.value).__name__ == type_name and words in str(info.value), (lib.__name__, info.value)


def test_export_matches_jax_export():
    """The same pytree function exported by both: avals, trees and values at several sizes."""
    def model(m):
        return lambda d: {"y": m.tanh(d["x"] @ d["w"]) * d["x"].shape[0], "s": d["x"][1:].sum(axis=1)}
    args = {"x": np.ones((3, 4), np.float32), "w": np.ones((4, 2), np.float32)}
    shapes = {"x": "b, _", "w": None}
    theirs = jexport.export(jax.jit(model(jjnp)))(
        jexport.symbolic_args_specs(args, shapes, constraints=["b >= 2"]))
    ours = jaxprc.export.export(jaxprc.jit(model(xjnp)))(
        jaxprc.export.symbolic_args_specs(args, shapes, constraints=["b >= 2"]))
    assert [str(a.shape) for a in ours.in_avals] == [str(a.shape) for a in theirs.in_avals]
    assert [str(a.shape) for a in ours.out_avals] == [str(a.shape) for a in theirs.out_avals]
    assert [a.dtype for a in ours.out_avals] == [a.dtype for a in theirs.out_avals]
    assert str(ours.in_tree) == str(theirs.in_tree) and str(ours.out_tree) == str(theirs.out_tree)
    rng = np.random.default_rng(1)
    for n in (2, 7):
        d = {"x": rng.normal(size=(n, 4)).astype(np.float32), "w": rng.normal(size=(4, 2)).astype(np.float32)}
        want, got = theirs.call(d), ours.call(d)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=2e-6)


def _export_cases(m, lax, lib):
    """Functions of x: f32[b, 4] exercising control flow on the batch size, vmap and grad inside,
    custom derivative rules, and integer and boolean results (for ``m`` = jnp, ``lax``, ``lib``)."""
    @lib.custom_jvp
    def softplus(v):
        return m.log1p(m.exp(v))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] / (1 + m.exp(-p[0]))))

    @lib.custom_vjp
    def clip_grad(v):
        return v

    clip_grad.defvjp(lambda v: (v, None), lambda _, g: (m.clip(g, -0.1, 0.1),))

    def loss(v):
        return m.sum(m.tanh(v) ** 2) / v.shape[0]

    return {
        "loops_on_b": lambda x: (lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i] * i, m.zeros(4)),
                                 lax.scan(lambda c, r: (c * 0.5 + r, c.sum()), m.ones(4), x)[1]),
        "vmap_grad": lambda x: (lib.vmap(lib.grad(lambda r: m.sum(m.sin(r) * r)))(x), lib.grad(loss)(x)),
        "custom_rules": lambda x: (lib.grad(lambda v: m.sum(softplus(v)))(x),
                                   lib.grad(lambda v: m.sum(clip_grad(v) ** 2))(x)),
        "dtypes": lambda x: ((x > 0).sum(axis=0), m.argmax(x, axis=0), x > x.mean(), (x * 3).astype(np.int32)),
    }


@pytest.mark.parametrize("case", ["loops_on_b", "vmap_grad", "custom_rules", "dtypes"])
def test_export_cases_match_jax_both_ways(case):
    """Each case exported by both with a symbolic batch: the same avals, and at each size the same
    values from JAX's Exported, jaxprc's, and jaxprc's artifact called by JAX."""
    f_jax = _export_cases(jjnp, jax.lax, jax)[case]
    f_ours = _export_cases(xjnp, jaxprc.lax, jaxprc)[case]
    theirs = jexport.export(jax.jit(f_jax))(*_specs(jexport, jax.ShapeDtypeStruct, ["b, 4"]))
    ours = jaxprc.export.export(jaxprc.jit(f_ours))(*_specs(sp, jaxprc.ShapeDtypeStruct, ["b, 4"]))
    assert [(str(a.shape), a.dtype) for a in ours.out_avals] == [(str(a.shape), a.dtype) for a in theirs.out_avals]
    ours_in_jax = jexport.deserialize(ours.serialize())
    rng = np.random.default_rng(3)
    for n in (2, 5):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        want = jax.tree_util.tree_leaves(theirs.call(x))
        for got in (jax.tree_util.tree_leaves(ours.call(x)), jax.tree_util.tree_leaves(ours_in_jax.call(x))):
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
