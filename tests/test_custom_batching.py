"""jaxprc.custom_batching (custom_vmap, sequential_vmap) and custom_derivatives.linear_call:
vmap against loops, the rule actually called, jvp/grad against finite differences, transposition
identities, text round trips and the verifier on the passes' outputs."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.custom_batching import custom_vmap, sequential_vmap
from jaxprc.custom_derivatives import linear_call
from jaxprc.ir import ParseError, parse, program_callbacks, verify
from jaxprc.lax.custom_batching import CustomVmapRuleUnavailableError
from jaxprc.lax.linear_call import LinearCallResidualError
from jaxprc.passes.jvp import jvp as jvp_pass, jvp_jaxpr
from jaxprc.passes.vmap import vmap_jaxpr

from roundtrip import assert_round_trip

F32 = np.float32
XS = np.linspace(-1.0, 1.5, 3, dtype=F32)
YS = np.linspace(0.5, 2.0, 3, dtype=F32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def make_sin_mul(calls):
    """sin(x) * y whose vmap rule (cos(x) * y, recognisably different) records its calls."""
    @custom_vmap
    def f(x, y):
        return jnp.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        calls.append((axis_size, list(in_batched)))
        return jnp.cos(xs) * ys, in_batched[0] or in_batched[1]
    return f


def round_trip(cj):
    """Text round trip of a program holding custom_vmap rules: unbound it is a program of its
    own; bound by name it equals the original."""
    text = str(cj)
    assert_round_trip(parse(text))
    back = parse(text, callbacks=program_callbacks(cj))
    assert back == cj
    return back


# ------------------------------------------------------------------ custom_vmap

def test_vmap_calls_the_rule_with_batch_axes_first():
    calls = []
    f = make_sin_mul(calls)
    close(f(F32(1.0), F32(2.0)), np.sin(1.0) * 2.0)          # unbatched: the function
    assert calls == []
    close(jx.vmap(f)(XS, YS), np.cos(XS) * YS)
    assert calls == [(3, [True, True])]
    close(jx.vmap(f, in_axes=(0, None))(XS, F32(2.0)), np.cos(XS) * 2.0)
    assert calls[-1] == (3, [True, False])
    m = np.stack([XS, YS])                                       # batch axis 1, moved to the front
    close(jx.vmap(f, in_axes=(1, None))(m, F32(2.0)), np.cos(m.T) * 2.0)
    assert calls[-1] == (3, [True, False])
    close(jx.jit(jx.vmap(f))(XS, YS), np.cos(XS) * YS)
    close(jx.vmap(jx.jit(f))(XS, YS), np.cos(XS) * YS)


def test_pytrees_unbatched_outputs_and_nested_vmap():
    @custom_vmap
    def f(d, c):
        return {"s": d["a"] * c, "k": c}

    @f.def_vmap
    def rule(axis_size, in_batched, d, c):
        assert in_batched[0] == {"a": True} and isinstance(in_batched, list)
        return {"s": d["a"] * c + 100, "k": c}, {"s": True, "k": in_batched[1]}
    out = jx.vmap(f, in_axes=({"a": 0}, None))({"a": XS}, F32(2.0))
    close(out["s"], XS * 2 + 100)
    close(out["k"], [2.0] * 3)                                   # unbatched output broadcast
    m = np.arange(6, dtype=F32).reshape(2, 3)
    out = jx.vmap(jx.vmap(f, in_axes=({"a": 0}, None)), in_axes=({"a": 0}, None))({"a": m}, F32(3.0))
    close(out["s"], m * 3 + 100)                                 # inner rule; its result batched normally
    out = jx.vmap(lambda a: f({"a": a}, c=F32(1.0)))(XS)         # keyword arguments resolve to positions
    close(out["s"], XS + 100)


def test_sequential_vmap_loops_and_matches_the_loop():
    def body(x, y):
        return jnp.sum(x) * y + 1.0
    f = sequential_vmap(body)
    xs = np.arange(6, dtype=F32).reshape(3, 2)
    close(jx.vmap(f, in_axes=(0, None))(xs, F32(2.0)), [body(x, 2.0) for x in xs])
    close(jx.vmap(f, in_axes=(None, 0))(xs[0], YS), [body(xs[0], y) for y in YS])
    cj = jx.make_jaxpr(jx.vmap(f))(xs, YS)
    assert any(e.primitive.name == "scan" for e in cj.eqns)       # a loop, not batched ops
    close(jx.jit(jx.vmap(jx.vmap(f)))(np.ones((2, 3, 4), F32), np.ones((2, 3), F32)), np.full((2, 3), 5.0))


def test_jvp_differentiates_the_function_and_vmap_of_jvp_the_rule():
    calls = []
    f = make_sin_mul(calls)
    p, t = jx.jvp(f, (F32(0.7), F32(2.0)), (F32(1.0), F32(0.5)))
    close(p, np.sin(0.7) * 2.0)
    close(t, np.cos(0.7) * 2.0 + np.sin(0.7) * 0.5)
    assert calls == []
    # vmap of jvp: the rule's function, cos(x) * y, differentiated
    ts = np.array([1.0, 0.0, 2.0], F32)
    p, t = jx.vmap(lambda x, y, tx: jx.jvp(f, (x, y), (tx, F32(0.0))))(XS, YS, ts)
    close(p, np.cos(XS) * YS)
    close(t, -np.sin(XS) * YS * ts)
    assert calls[-1] == (3, [True, True])
    # tangents unbatched: the rule sees nothing batched and vmap maps what it returns (as JAX)
    p, t = jx.vmap(lambda x: jx.jvp(f, (x, F32(2.0)), (F32(1.0), F32(0.0))))(XS)
    close(p, np.cos(XS) * 2.0)
    close(t, -np.sin(XS) * 2.0)
    assert calls[-1] == (3, [False, False])
    # jvp of vmap: the rule's result differentiated
    p, t = jx.jvp(jx.vmap(f), (XS, YS), (np.ones(3, F32), np.zeros(3, F32)))
    close(t, -np.sin(XS) * YS)


def test_second_order_forward_mode_under_vmap_uses_the_rule_twice_differentiated():
    @custom_vmap
    def f(x, y):
        return jnp.sin(x) * y

    @f.def_vmap
    def rule(n, b, x, y):
        return jnp.cos(x) * y ** 2, b[0] or b[1]
    close(jx.vmap(jx.jacfwd(jx.jacfwd(f)))(XS, YS), -np.cos(XS) * YS ** 2)
    # both levels' tangents batched with the primals: one rule call sees everything batched
    _, tt = jx.vmap(lambda x, y: jx.jvp(lambda x: jx.jvp(f, (x, y), (x, y))[1], (x,), (y,)))(XS, YS)
    d1 = lambda x, y: -np.sin(x) * y ** 2 * x + np.cos(x) * 2 * y * y      # d/dt of rule(x+t x, y+t y)
    close(tt, (d1(XS + 1e-3 * YS, YS) - d1(XS - 1e-3 * YS, YS)) / 2e-3, tol=2e-3)


def test_jvp_matches_finite_differences_and_grad_is_refused():
    f = sequential_vmap(lambda x: jnp.tanh(x) * x)
    x, eps = F32(0.3), 1e-3
    _, t = jx.jvp(f, (x,), (F32(1.0),))
    close(t, (np.tanh(x + eps) * (x + eps) - np.tanh(x - eps) * (x - eps)) / (2 * eps), tol=1e-3)
    _, ts = jx.vmap(lambda x: jx.jvp(f, (x,), (x,)))(XS)
    close(ts, (np.tanh(XS) + XS / np.cosh(XS) ** 2) * XS, tol=1e-5)
    with pytest.raises(ValueError, match="Linearization failed to produce known values"):
        jx.grad(f)(x)


def test_a_batched_primal_with_a_mutually_batched_one_is_not_batched_twice():
    """An integer argument (no tangent) and a float one batched with its tangent: the rule sees
    both batched (JAX's rule would see the integer unbatched and return a doubly batched result)."""
    @custom_vmap
    def k(i, x):
        return x * i

    @k.def_vmap
    def rule(axis_size, in_batched, i, x):
        return x * i, in_batched[0] or in_batched[1]
    i = np.arange(3, dtype=np.int32)
    p, t = jx.vmap(lambda i, x: jx.jvp(lambda x: k(i, x), (x,), (x,)))(i, XS)
    close(p, XS * i)
    close(t, XS * i)


def test_stacked_custom_vjp_and_custom_jvp():
    @jx.custom_vjp
    @custom_vmap
    def f(x, y):
        return jnp.sin(x) * y

    @f.def_vmap                          # def* attributes reach the wrapped custom_vmap
    def f_vmap_rule(axis_size, in_batched, xs, ys):
        return jnp.cos(xs) * ys, True
    f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(x), y)),
             lambda res, g: (res[0] * g * res[2], res[1] * g))
    close(jx.vmap(f)(np.zeros(3, F32), np.ones(3, F32)), np.ones(3))
    close(jx.grad(f)(F32(0.0), F32(1.0)), 1.0)
    close(jx.vmap(jx.grad(f))(XS, YS), np.cos(XS) * YS)

    @jx.custom_jvp
    @custom_vmap
    def h(x):
        return x ** 2
    h.def_vmap(lambda n, b, x: (x ** 3, True))
    h.defjvp(lambda p, t: (h(p[0]), 10 * t[0]))
    close(jx.vmap(h)(XS), XS ** 3)
    close(jx.vmap(jx.grad(h))(XS), [10.0] * 3)


def test_rule_may_use_values_its_function_closes_over():
    def g(w, x):
        @custom_vmap
        def f(x):
            return x * w

        @f.def_vmap
        def rule(n, b, x):
            return x * w + 1, b[0]
        return f(x)
    close(jx.vmap(g, in_axes=(None, 0))(F32(2.0), XS), XS * 2 + 1)
    close(jx.jit(jx.vmap(g, in_axes=(None, 0)))(F32(2.0), XS), XS * 2 + 1)
    with pytest.raises(ValueError, match="closes over a value that vmap batches"):
        jx.vmap(g)(YS, XS)


def _rule_error(rule_output):
    f = custom_vmap(lambda x: x * 2.0)
    f.def_vmap(lambda n, b, x: rule_output(x))
    return lambda: jx.vmap(f)(XS)


@pytest.mark.parametrize("output, error, match", [
    (lambda x: x, TypeError, r"must return a pair"),
    (lambda x: (x, x), TypeError, r"out_batched must be a pytree of bools"),
    (lambda x: ((x, x), True), ValueError, r"do not match.\nOutput values: PyTreeDef\(\(\*, \*\)\)"),
    (lambda x: (x, (True,)), ValueError, r"output value and output batching specification"),
    (lambda x: ((x, x), (True, True)), ValueError, r"does not match that of original custom-vmapped"),
    (lambda x: (x[:2], True), ValueError, r"for function <lambda>: output 0 has shape \(2,\), expected \(3,\)"),
    (lambda x: (x, False), ValueError, r"expected \(\) \(the function's output shape \(\), unbatched\)"),
    (lambda x: (x.astype(np.int32), True), TypeError, r"dtype int32, expected float32"),
])
def test_rule_errors_name_the_rule(output, error, match):
    with pytest.raises(error, match=match):
        _rule_error(output)()


def test_missing_rule_and_unresolvable_arguments():
    f = custom_vmap(lambda x: x)
    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap function <lambda>"):
        f(1.0)
    f.def_vmap(lambda n, b, x: (x, True))
    with pytest.raises(TypeError, match="could not be resolved to positional-only arguments"):
        f(1.0, 2.0)


def test_text_round_trip_and_verified_pass_outputs():
    calls = []
    f = make_sin_mul(calls)
    cj = jx.make_jaxpr(lambda x, y: jx.jvp(f, (x, y), (y, x)))(F32(1.0), F32(2.0))
    assert "custom_vmap_call" in str(cj) and 'VmapRule(name="rule", num_consts=0, jvps=((0, 2, 1),))' in str(cj)
    back = round_trip(cj)
    batched = vmap_jaxpr(back, in_axes=0, axis_size=3)
    verify(batched)
    close(jx.jaxpr_as_fun(batched)(XS, YS)[0], np.cos(XS) * YS)
    verify(jvp_pass(cj))
    # unbound: it runs (the function), and vmap asks for the rule by name
    unbound = parse(str(cj))
    close(jx.jit(jx.jaxpr_as_fun(unbound))(F32(1.0), F32(2.0))[0], np.sin(1.0) * 2.0)
    with pytest.raises(CustomVmapRuleUnavailableError, match="callbacks=\\{'rule': fn\\}"):
        vmap_jaxpr(unbound, in_axes=0, axis_size=3)
    bad = str(cj).replace("jvps=((0, 2, 1),)", "jvps=((0, 1, 1),)")
    with pytest.raises(ParseError, match=r"jvps \(\(0, 1, 1\),\) do not describe the 4 operands"):
        parse(bad)


# ------------------------------------------------------------------ linear_call

def _div(r, x):
    return x / r


def _div_t(r, ct):
    return 2.0 * ct / r        # deliberately not fun's transpose: the tests see which one ran


def div_add(x, denom):
    return x + linear_call(_div, _div_t, denom, x)


def test_linear_call_value_jvp_and_custom_transpose():
    close(div_add(F32(9.0), F32(3.0)), 12.0)
    close(jx.jit(div_add)(F32(9.0), F32(3.0)), 12.0)
    _, t = jx.jvp(lambda x: div_add(x, F32(3.0)), (F32(9.0),), (F32(1.0),))
    close(t, 1.0 + 1.0 / 3.0)                                    # forward mode: fun on the tangent
    close(jx.grad(div_add)(F32(9.0), F32(3.0)), 1.0 + 2.0 / 3.0)  # reverse: the custom transpose
    tr = jx.linear_transpose(lambda x: linear_call(_div, _div_t, F32(3.0), x), F32(1.0))
    close(tr(F32(18.0))[0], 12.0)
    trtr = jx.linear_transpose(lambda y: tr(y)[0], F32(1.0))       # transposing back gives fun
    close(trtr(F32(18.0))[0], 6.0)


def test_linear_call_transposition_identity_and_pytrees():
    a = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]], F32)

    def fun(m, lin):
        return {"y": m @ lin[0] + lin[1]}

    def fun_t(m, ct):
        return (m.T @ ct["y"], jnp.sum(ct["y"]))
    f = lambda v, s: linear_call(fun, fun_t, a, (v, s))["y"]
    v, s, ct = np.array([0.3, -0.7], F32), F32(0.25), np.array([1.0, 2.0, -1.0], F32)
    _, jvp_out = jx.jvp(f, (v, s), (v, s))
    _, vjp_fn = jx.vjp(f, v, s)
    cv, cs = vjp_fn(ct)
    close(np.dot(ct, jvp_out), np.dot(cv, v) + cs * s)           # <ct, J t> == <J^T ct, t>


def test_linear_call_vmap_matches_the_loop_and_keeps_the_transpose():
    ys, ds = XS, YS + 1.0
    close(jx.vmap(div_add)(ys, ds), [div_add(y, d) for y, d in zip(ys, ds)])
    close(jx.vmap(div_add, in_axes=(0, None))(ys, F32(3.0)), ys + ys / 3.0)
    close(jx.vmap(jx.grad(div_add))(ys, ds), 1.0 + 2.0 / ds)
    close(jx.grad(lambda x: jnp.sum(jx.vmap(div_add, in_axes=(None, 0))(x, ds)))(F32(1.0)), np.sum(1.0 + 2.0 / ds))
    close(jx.vmap(jx.vmap(div_add))(np.ones((2, 3), F32), np.full((2, 3), 2.0, F32)), np.full((2, 3), 1.5))


def test_linear_call_closures_text_and_verifier():
    def outer(w, x):
        return linear_call(lambda r, x: x * w, lambda r, ct: ct * w * 10.0, (), x)
    close(jx.grad(outer, 1)(F32(2.0), F32(1.0)), 20.0)
    close(jx.vmap(jx.grad(outer, 1))(XS, np.ones(3, F32)), XS * 10.0)
    for cj in (jx.make_jaxpr(div_add)(F32(9.0), F32(3.0)), jx.make_jaxpr(jx.grad(outer, 1))(F32(2.0), F32(1.0)),
               jx.make_jaxpr(jx.vmap(jx.grad(div_add)))(XS, YS)):
        assert "linear_call" in str(cj)
        assert_round_trip(cj)
    cj = jx.make_jaxpr(div_add)(F32(9.0), F32(3.0))
    verify(vmap_jaxpr(cj, in_axes=0, axis_size=3))
    verify(jvp_jaxpr(cj, [True, False], instantiate=True)[0])


def test_linear_call_errors():
    with pytest.raises(LinearCallResidualError, match="with respect to residual_args"):
        jx.grad(div_add, 1)(F32(9.0), F32(3.0))
    with pytest.raises(LinearCallResidualError, match="differentiation with respect to residual_args"):
        jx.jvp(div_add, (F32(9.0), F32(3.0)), (F32(1.0), F32(1.0)))
    bad_tree = lambda x: linear_call(_div, lambda r, ct: (ct, ct), F32(3.0), x)
    with pytest.raises(TypeError, match="transpose output pytree structure must match"):
        jx.linear_transpose(bad_tree, F32(1.0))(F32(1.0))
    bad_type = lambda x: linear_call(_div, lambda r, ct: jnp.ones(3), F32(3.0), x)
    with pytest.raises(ValueError, match=r"Expected cotangent type float32\[\] but got float32\[3\]"):
        jx.grad(bad_type)(F32(1.0))
    close(bad_type(F32(3.0)), 1.0)                   # forward use never traces the transpose's result
