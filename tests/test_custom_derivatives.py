"""custom_jvp / custom_vjp: every example and stated result of the two seed documents
(custom-derivatives-design.md, custom-vjp-nondiff-argnums-update-guide.md), compositions,
Python flexibility, errors, and the text round trip of programs holding custom rules."""
from functools import partial

import re

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import ir, lax
from jaxprc.custom_derivatives import SymbolicZero
from jaxprc.ir.dtypes import float0

from roundtrip import assert_round_trip


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------------ the seeds' f: 2x with a rule saying 3

@jx.custom_vjp
def two_x_vjp(x):
    return 2. * x


two_x_vjp.defvjp(lambda x: (two_x_vjp(x), x), lambda x, g: (3. * g,))


@jx.custom_jvp
def two_x_jvp(x):
    return 2. * x


@two_x_jvp.defjvp
def _two_x_jvp_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return two_x_jvp(x), 3. * t


@jx.custom_vjp
def two_x_literal(x):
    return 2. * x


# the seed's f_vjp word for word: its backward pass returns 3. * x, ignoring the cotangent
two_x_literal.defvjp(lambda x: (two_x_literal(x), x), lambda x, g: (3. * x,))


@pytest.mark.parametrize("f", [two_x_vjp, two_x_jvp, two_x_literal],
                         ids=["custom_vjp", "custom_jvp", "custom_vjp_literal"])
def test_vmap_keeps_the_custom_rule(f):
    """The design doc's problem: grad(f)(1.) == 3., vmap(grad(f)) and grad-of-vmap both 3s."""
    assert float(jx.grad(f)(1.)) == 3.
    close(jx.vmap(jx.grad(f))(np.ones(4, np.float32)), [3.] * 4)
    close(jx.grad(lambda x: jx.vmap(f)(x).sum())(np.ones(4, np.float32)), [3.] * 4)
    close(f(1.), 2.)                       # evaluation ignores the rule
    close(jx.jit(jx.vmap(f))(np.ones(2, np.float32)), [2., 2.])


def test_vmap_semantics_are_defined_by_calls_to_f():
    """jvp(vmap(f))(xs) == jvp(lambda xs: stack([f(x) for x in xs])): the rule is used in both."""
    xs, ts = np.array([0.5, 1., 2.], np.float32), np.array([1., 2., 3.], np.float32)
    for f in (two_x_jvp, sin_jvp):
        batched = jx.jvp(jx.vmap(f), (xs,), (ts,))
        stacked = jx.jvp(lambda xs: jnp.stack([f(xs[i]) for i in range(3)]), (xs,), (ts,))
        close(batched[0], stacked[0]), close(batched[1], stacked[1])


def test_solution_equations_hold_in_the_ir():
    """vmap(custom_jvp_call(f, f_jvp)) == custom_jvp_call(vmap(f), vmap(f_jvp)), and
    jvp(custom_jvp_call(f, f_jvp)) == f_jvp: the rule's 3, never f's derivative 2."""
    xs = np.ones(4, np.float32)
    for f, name in ((two_x_jvp, "custom_jvp_call_jaxpr"), (two_x_vjp, "custom_vjp_call_jaxpr")):
        (node,) = jx.make_jaxpr(jx.vmap(f))(xs).eqns
        assert node.primitive.name == name
        assert [a.str_short() for a in node.params["fun_jaxpr"].in_avals] == ["f32[4]"]
    (node,) = jx.make_jaxpr(jx.vmap(two_x_jvp))(xs).eqns
    rule = node.params["jvp_jaxpr_thunk"]()
    assert [a.str_short() for a in rule.in_avals] == ["f32[4]", "f32[4]"]
    close(jx.jaxpr_as_fun(rule)(xs, xs)[1], 3. * xs)
    jvp_program = jx.make_jaxpr(lambda x, t: jx.jvp(two_x_jvp, (x,), (t,)))(1., 1.)
    tangent_eqns = [e for e in jvp_program.eqns if e.primitive.name == "mul"]
    assert [float(e.invars[0].val) for e in tangent_eqns] == [3.]


def test_jit_and_nested_jit_keep_the_rule():
    for f in (two_x_vjp, two_x_jvp):
        assert float(jx.jit(jx.grad(f))(1.)) == 3.
        assert float(jx.grad(jx.jit(f))(1.)) == 3.
        assert float(jx.grad(lambda x: jx.jit(lambda y: jx.jit(f)(y))(x))(1.)) == 3.


# --------------------------------------------------------------- API section of the design

@jx.custom_jvp
def sin_jvp(x):
    return jnp.sin(x)


def sin_jvp_rule(primals, tangents):
    x, = primals
    t, = tangents
    return sin_jvp(x), jnp.cos(x) * t


sin_jvp.defjvp(sin_jvp_rule)


@jx.custom_vjp
def sin_vjp(x):
    return jnp.sin(x)


def sin_fwd(x):
    return sin_vjp(x), jnp.cos(x)


def sin_bwd(cos_x, g):
    return (cos_x * g,)


sin_vjp.defvjp(sin_fwd, sin_bwd)


def test_design_api_examples():
    x = 0.7
    close(jx.grad(sin_jvp)(x), np.cos(x))
    y, t = jx.jvp(sin_jvp, (x,), (2.,))
    close(y, np.sin(x)), close(t, 2 * np.cos(x))
    close(jx.grad(sin_vjp)(x), np.cos(x))
    out, f_vjp = jx.vjp(sin_vjp, x)
    close(out, np.sin(x)), close(f_vjp(1.)[0], np.cos(x))


def test_higher_order_uses_the_rule_when_the_rule_calls_f():
    """'for the rule to apply to higher-order differentiation, one must call f in f_jvp'."""
    @jx.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2. * jnp.cos(x) * t          # a deliberately different rule
    x = 0.4
    close(jx.grad(f)(x), 2 * np.cos(x))
    close(jx.grad(jx.grad(f))(x), -2 * np.sin(x))
    close(jx.grad(jx.grad(jx.grad(f)))(x), -2 * np.cos(x))
    close(jx.jit(jx.grad(jx.grad(f)))(x), -2 * np.sin(x))


# ------------------------------------------------------------- Python flexibility

@jx.custom_vjp
def relu_branchy(x):
    if x > 0:            # the design doc's custom_transforms example, which used to fail
        return x
    else:
        return 0.


def _relu_branchy_fwd(x):
    return relu_branchy(x), x


def _relu_branchy_bwd(x, g):
    if x > 0:
        return (g,)
    return (0. * g,)


relu_branchy.defvjp(_relu_branchy_fwd, _relu_branchy_bwd)


def test_python_control_flow_in_f_and_rules_under_grad():
    assert float(jx.grad(relu_branchy)(1.)) == 1.
    assert float(jx.grad(relu_branchy)(-1.)) == 0.


def test_python_control_flow_in_f_and_rules_under_jvp_and_grad():
    @jx.custom_jvp
    def f(x):
        return x ** 2 if x > 0 else -x

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        slope = 10. if x > 0 else -10.          # branches on the primal value
        return f(x), slope * t
    assert float(jx.jvp(f, (2.,), (1.,))[1]) == 10.
    assert float(jx.jvp(f, (-2.,), (1.,))[1]) == -10.
    assert float(jx.grad(f)(2.)) == 10.
    assert float(jx.grad(f)(-2.)) == -10.
    with pytest.raises(jx.ConcretizationTypeError):
        jx.jit(jx.grad(f))(2.)


def test_print_in_bwd_sees_numbers(capsys):
    """The NaN-debugging workflow: bwd runs as Python on concrete values outside jit."""
    @jx.custom_vjp
    def f(x):
        return jnp.log(x)

    def bwd(x, g):
        print("bwd residual", np.asarray(x).tolist(), "cotangent", np.asarray(g).tolist())
        return (g / x,)
    f.defvjp(lambda x: (f(x), x), bwd)
    close(jx.grad(f)(4.), 0.25)
    assert "bwd residual 4.0 cotangent 1.0" in capsys.readouterr().out
    _, f_vjp = jx.vjp(f, 2.)
    close(f_vjp(3.)[0], 1.5)
    assert "bwd residual 2.0 cotangent 3.0" in capsys.readouterr().out

    @jx.custom_vjp
    def g(x):
        return jnp.log(x)

    def traced_bwd(x, ct):
        print("under jit bwd sees", type(x).__name__)
        return (ct / x,)
    g.defvjp(lambda x: (g(x), x), traced_bwd)
    close(jx.jit(jx.grad(g))(4.), 0.25)        # under jit bwd is traced
    assert "under jit bwd sees Tracer" in capsys.readouterr().out


# ------------------------------------------------------- update guide: clip_gradient

def test_clip_gradient_new_way_under_any_transformation():
    @jx.custom_vjp   # no nondiff_argnums!
    def clip_gradient(lo, hi, x):
        return x     # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)    # save lo and hi values as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))   # return None for lo and hi
    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    f = lambda x, lo, hi: clip_gradient(lo, hi, 3. * x)
    close(jx.grad(f)(1., -0.5, 0.5), 1.5)
    close(jx.grad(f)(1., -5., 5.), 3.)
    close(jx.jit(jx.grad(f))(1., -0.5, 0.5), 1.5)          # lo, hi are tracers: fine
    close(jx.vmap(jx.grad(f), (None, 0, None))(1., np.array([-2., -0.5], np.float32), 0.5),
          [1.5, 1.5])
    close(jx.grad(f, argnums=(0, 1))(1., -0.5, 0.5)[1], 0.)   # None: no cotangent
    # jacrev maps vjp_fun over cotangents: bwd then runs on traced cotangents
    close(jx.jacrev(lambda x: f(x, -0.5, 0.5))(np.array([1., 2.], np.float32)), np.eye(2) * 1.5)


def test_clip_gradient_old_way_works_on_constants_and_fails_loudly_on_tracers():
    @partial(jx.custom_vjp, nondiff_argnums=(0, 1))
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, None  # no residual values to save

    def clip_gradient_bwd(lo, hi, _, g):
        return (jnp.clip(g, lo, hi),)
    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    close(jx.grad(lambda x: clip_gradient(-0.5, 0.5, 3. * x))(1.), 1.5)
    for transformed in (jx.jit(lambda x, lo: clip_gradient(lo, 0.5, x)),
                        jx.vmap(lambda x, lo: clip_gradient(lo, 0.5, x)),
                        jx.grad(lambda x, lo: clip_gradient(lo, 0.5, x), argnums=1)):
        with pytest.raises(TypeError, match="nondiff_argnums") as e:
            transformed(np.ones(2, np.float32), np.full(2, -0.5, np.float32))
        assert "return None for them from bwd" in str(e.value)


def test_skip_app():
    @partial(jx.custom_vjp, nondiff_argnums=(0,))
    def skip_app(f, x):
        return f(x)

    def skip_app_fwd(f, x):
        return skip_app(f, x), None

    def skip_app_bwd(f, _, g):
        return (g,)
    skip_app.defvjp(skip_app_fwd, skip_app_bwd)
    close(skip_app(jnp.sin, 1.), np.sin(1.))
    close(jx.grad(lambda x: skip_app(jnp.sin, x))(1.), 1.)          # the rule skips f's derivative
    close(jx.jit(jx.grad(lambda x: skip_app(jnp.sin, x)))(1.), 1.)
    close(jx.vmap(jx.grad(lambda x: skip_app(jnp.exp, x)))(np.ones(3, np.float32)), [1.] * 3)


def test_custom_jvp_nondiff_argnums_accept_tracers():
    @partial(jx.custom_jvp, nondiff_argnums=(0,))
    def scale(k, x):
        return k * x

    @scale.defjvp
    def scale_jvp(k, primals, tangents):
        (x,), (t,) = primals, tangents
        return scale(k, x), 10. * k * t
    close(jx.jit(jx.grad(lambda x, k: scale(k, x)))(1., 2.), 20.)
    close(jx.grad(lambda x: scale(3., x))(1.), 30.)
    close(jx.grad(lambda k: scale(k, 1.))(2.), 0.)       # non-differentiable: zero, as in JAX
    close(jx.vmap(lambda k, x: scale(k, x))(np.arange(3., dtype=np.float32), np.ones(3, np.float32)),
          np.arange(3.))


def test_integer_regular_arguments_of_custom_vjp_just_work():
    """The update guide: array-like non-differentiable arguments passed as regular arguments
    and residuals, integers included, work under autodiff; bwd returns None for them."""
    @jx.custom_vjp
    def scale(x, n):
        return x * n, n + 1

    scale.defvjp(lambda x, n: (scale(x, n), n), lambda n, g: (g[0] * n * 2., None))
    close(jx.grad(lambda x: scale(x, 3)[0])(1.), 6.)
    close(jx.jit(jx.grad(lambda x, n: scale(x, n)[0]))(1., 3), 6.)
    close(jx.vmap(jx.grad(lambda x, n: scale(x, n)[0]))(np.ones(2, np.float32), np.array([1, 2])), [2., 4.])
    g_n = jx.grad(lambda x, n: scale(x, n)[0], argnums=1, allow_int=True)(1., 3)
    assert np.asarray(g_n).dtype == float0


# ------------------------------------------------------------------- closures

def test_closure_over_tracers_of_outer_jit_and_vmap():
    def g(x, y):
        @jx.custom_jvp
        def f(x):
            return x * y

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), 5. * y * t
        return jx.grad(f)(x) + f(x)
    close(jx.jit(g)(1., 2.), 10. + 2.)
    close(jx.vmap(g)(np.ones(3, np.float32), np.arange(3., dtype=np.float32)), 5 * np.arange(3.) + np.arange(3.))
    # not differentiated: vmap of a custom function closing over the vmapped value
    def h(x, y):
        @jx.custom_vjp
        def f(x):
            return x * y
        f.defvjp(lambda x: (f(x), None), lambda _, g: (7. * g,))
        return f(x)
    close(jx.vmap(h)(np.ones(3, np.float32), np.arange(3., dtype=np.float32)), np.arange(3.))


def test_closure_over_a_zero_tangent_value_of_the_differentiated_trace():
    def g(x):
        c = jnp.ones(()) * 2.       # computed inside grad's trace, independent of x
        @jx.custom_jvp
        def f(x):
            return x * c

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), 4. * c * t
        return f(x)
    close(jx.grad(g)(1.), 8.)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_differentiating_with_respect_to_a_closed_over_value_is_an_error(kind):
    def g(x):
        if kind == "custom_jvp":
            @jx.custom_jvp
            def f(y):
                return x * y
            f.defjvp(lambda p, t: (f(*p), t[0]))
        else:
            @jx.custom_vjp
            def f(y):
                return x * y
            f.defvjp(lambda y: (f(y), None), lambda _, g: (g,))
        return f(3.)
    with pytest.raises(jx.errors.UnexpectedTracerError) as e:     # JAX's type (a TypeError)
        jx.grad(g)(1.)
    assert (f"Detected differentiation of a {kind} function with respect to a closed-over value. "
            "That isn't supported because") in str(e.value)
    assert f"Try passing the closed-over value into the {kind} function as an argument" in str(e.value)


# ------------------------------------------------------------------- errors

def test_jvp_of_custom_vjp_is_an_error():
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"):
        jx.jvp(sin_vjp, (1.,), (1.,))
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"):
        jx.jit(lambda x: jx.jvp(sin_vjp, (x,), (x,))[1])(1.)


def test_wrong_rule_outputs_say_expected_and_got():
    @jx.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), jnp.ones(3)))
    with pytest.raises(TypeError, match=re.escape("Custom JVP rule must produce primal and tangent outputs with corresponding shapes and dtypes. Expected float32[] (tangent type of float32[]) but got float32[3].")):
        jx.grad(f)(1.)

    @jx.custom_jvp
    def g(x):
        return jnp.sin(x)
    g.defjvp(lambda p, t: ((g(p[0]),), (t[0],)))
    with pytest.raises(TypeError, match=re.escape("the JVP rule output's first element had container/pytree "
                                                  "structure:\n    (float32[],)\nwhile the custom_jvp-decorated "
                                                  "function g had output container/pytree structure:\n    float32[].")):
        jx.grad(g)(1.)

    @jx.custom_vjp
    def h(x, y):
        return x * y
    h.defvjp(lambda x, y: (h(x, y), None), lambda _, g: (g,))
    with pytest.raises(TypeError, match="tuple of length equal to the number of arguments"):
        jx.grad(h)(1., 2.)

    @jx.custom_vjp
    def k(x):
        return x
    k.defvjp(lambda x: (k(x), None), lambda _, g: (jnp.ones(2),))
    with pytest.raises(ValueError, match=re.escape("at output[0] the bwd rule produced an output of type float32[2] corresponding to an input of type float32[], so the shapes do not match")):
        jx.grad(k)(1.)

    @jx.custom_vjp
    def wrong_dtype(x):
        return x
    wrong_dtype.defvjp(lambda x: (wrong_dtype(x), None), lambda _, g: (g.astype(np.float16),))
    with pytest.raises(TypeError, match=re.escape("at output[0] the bwd rule produced an output of type float16[] corresponding to an input of type float32[], so the dtypes do not match")):
        jx.grad(wrong_dtype)(1.)

    @jx.custom_jvp
    def wrong_tangent_dtype(x):
        return jnp.sin(x)
    wrong_tangent_dtype.defjvp(lambda p, t: (wrong_tangent_dtype(p[0]), t[0].astype(np.float16)))
    with pytest.raises(TypeError, match=re.escape("Expected float32[] (tangent type of float32[]) but got float16[].")):
        jx.jvp(wrong_tangent_dtype, (1.,), (1.,))

    @jx.custom_vjp
    def m(x):
        return x
    m.defvjp(lambda x: x, lambda _, g: (g,))
    with pytest.raises(TypeError, match="must produce a pair"):
        jx.grad(m)(1.)


def test_missing_rule_is_an_error():
    f = jx.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined"):
        f(1.)


# ---------------------------------------------------------------- bells and whistles

def test_kwargs_methods_partial_and_pytrees():
    @jx.custom_jvp
    def f(x, y=2.):
        return {"sum": x["a"] * y + x["b"]}

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), {"sum": tx["a"] * 100. + tx["b"] * 10. + ty}
    x = {"a": 1., "b": 2.}
    g = jx.grad(lambda x: f(x, y=3.)["sum"])(x)
    close(g["a"], 100.), close(g["b"], 10.)
    close(jx.grad(lambda y: f(x, y=y)["sum"])(3.), 1.)

    class Model:
        def __init__(self, k):
            self.k = k

        @partial(jx.custom_vjp, nondiff_argnums=(0,))
        def apply(self, x):
            return self.k * x
    Model.apply.defvjp(lambda self, x: (self.apply(x), None), lambda self, _, g: (self.k * 7. * g,))
    close(jx.grad(Model(2.).apply)(1.), 14.)
    close(jx.grad(partial(Model.apply, Model(3.)))(1.), 21.)


def test_pytree_residuals_and_bwd_none():
    @jx.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def fwd(x, y):
        return f(x, y), {"cos": jnp.cos(x), "y": y, "nothing": None}

    def bwd(res, g):
        return (res["cos"] * res["y"] * g, None)
    f.defvjp(fwd, bwd)
    gx, gy = jx.grad(f, argnums=(0, 1))(0.5, 2.)
    close(gx, np.cos(0.5) * 2), close(gy, 0.)


def test_defjvps():
    @jx.custom_jvp
    def f(x, y):
        return x * y
    f.defjvps(lambda tx, ans, x, y: 10. * tx, None)
    close(jx.grad(f)(1., 2.), 10.)
    close(jx.grad(f, argnums=1)(1., 2.), 0.)


def test_symbolic_zeros():
    seen = []

    @jx.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((type(tx) is SymbolicZero, type(ty) is SymbolicZero))
        out = 0.
        if type(tx) is not SymbolicZero:
            out = out + tx * y
        if type(ty) is not SymbolicZero:
            out = out + x * ty
        return f(x, y), out
    f.defjvp(f_jvp, symbolic_zeros=True)
    close(jx.grad(f)(2., 3.), 3.)
    assert (False, True) in seen
    close(jx.grad(f, argnums=1)(2., 3.), 2.)
    assert (True, False) in seen


def test_integer_arguments_get_no_tangent():
    @jx.custom_jvp
    def f(x, n):
        return x * n

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, n), (tx, tn) = primals, tangents
        assert np.asarray(tn).dtype == float0
        return f(x, n), tx * n * 2.
    close(jx.grad(f)(1., 3), 6.)


# ---------------------------------------------------------------- control flow

def test_custom_functions_inside_scan_cond_while_and_fori_bodies():
    def scanned(x):
        def body(c, _):
            return two_x_vjp(c) + two_x_jvp(c), None
        return lax.scan(body, x, None, length=3)[0]
    close(jx.grad(scanned)(1.), 6. ** 3)            # (3 + 3)^3 by the rules
    close(jx.jit(jx.grad(scanned))(1.), 6. ** 3)
    close(jx.grad(lambda x: lax.cond(x > 0, two_x_vjp, two_x_jvp, x))(1.), 3.)
    close(jx.grad(lambda x: lax.fori_loop(0, 2, lambda i, c: two_x_jvp(c), x))(1.), 9.)
    close(jx.jvp(lambda x: lax.while_loop(lambda c: c < 10., two_x_jvp, x), (1.,), (1.,))[1], 3. ** 4)   # 1, 2, 4, 8, 16
    close(jx.vmap(jx.grad(scanned))(np.ones(2, np.float32)), [6. ** 3] * 2)


# ----------------------------------------------------------------- text round trip

@jx.custom_jvp
def _rt_f(x):
    return jnp.sin(x)


@_rt_f.defjvp
def _rt_f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _rt_f(x), 2. * jnp.cos(x) * t       # recursive rule


@jx.custom_vjp
def _rt_g(x):
    return 2. * x


_rt_g.defvjp(lambda x: (_rt_g(x), x), lambda x, ct: (3. * ct * x,))


def _rt_program(x):
    return jnp.sum(_rt_f(x) * _rt_g(x))


def test_text_round_trip_and_transform_the_parsed_copy():
    x = np.arange(1., 4., dtype=np.float32)
    cj = jx.make_jaxpr(_rt_program)(x)
    text = str(cj)
    assert "@_rt_f_jvp = " in text and "jvp_jaxpr_thunk=@_rt_f_jvp" in text
    parsed = ir.parse(text)
    assert str(parsed) == text
    fn = lambda x: jx.jaxpr_as_fun(parsed)(x)[0]
    close(jx.grad(fn)(x), jx.grad(_rt_program)(x))
    close(jx.jit(jx.grad(fn))(x), jx.grad(_rt_program)(x))
    with pytest.raises(TypeError, match="forward-mode autodiff"):      # _rt_g is a custom_vjp
        jx.jvp(fn, (x,), (x,))
    jvp_only = lambda x: jnp.sum(_rt_f(x) ** 2)
    parsed_jvp_only = ir.parse(str(jx.make_jaxpr(jvp_only)(x)))
    close(jx.jvp(lambda x: jx.jaxpr_as_fun(parsed_jvp_only)(x)[0], (x,), (x,)), jx.jvp(jvp_only, (x,), (x,)))
    xs = np.stack([x, 2 * x])
    close(jx.vmap(fn)(xs), jx.vmap(_rt_program)(xs))
    close(jx.grad(lambda xs: jx.vmap(fn)(xs).sum())(xs), jx.grad(lambda xs: jx.vmap(_rt_program)(xs).sum())(xs))
    close(jx.grad(jx.grad(lambda x: fn(x * np.ones(3, np.float32))))(0.5),
          jx.grad(jx.grad(lambda x: _rt_program(x * np.ones(3, np.float32))))(0.5))
    # a grad program (custom_lin transposed away) and a vmapped one print and parse back too
    vm = jx.make_jaxpr(jx.vmap(_rt_program))(xs)
    assert str(ir.parse(str(vm))) == str(vm)
    close(jx.jaxpr_as_fun(ir.parse(str(vm)))(xs)[0], jx.vmap(_rt_program)(xs))
    close(jx.grad(lambda xs: jx.jaxpr_as_fun(ir.parse(str(vm)))(xs)[0].sum())(xs),
          jx.grad(lambda xs: jx.vmap(_rt_program)(xs).sum())(xs))


def test_dce_prunes_unused_outputs_of_custom_nodes():
    from jaxprc.passes.dce import dce

    @jx.custom_jvp
    def two(x):
        return jnp.sin(x), jnp.cos(x)

    @two.defjvp
    def two_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return two(x), (5. * t, 7. * t)
    cj = jx.make_jaxpr(lambda x: two(x)[1])(1.)
    pruned = dce(cj)
    node = [e for e in pruned.eqns if e.primitive.name == "custom_jvp_call_jaxpr"][0]
    assert len(node.outvars) == 1
    assert "sin" not in str(node.params["fun_jaxpr"])
    close(jx.grad(lambda x: jx.jaxpr_as_fun(pruned)(x)[0])(1.), 7.)
    unused = dce(jx.make_jaxpr(lambda x: (two(x), x)[1])(1.))
    assert not unused.eqns


def test_dce_prunes_unused_outputs_of_custom_vjp_nodes():
    """fun and fwd lose the unused output (residuals stay); bwd gets a zero cotangent for it."""
    from jaxprc.passes.dce import dce
    seen = []

    @jx.custom_vjp
    def two(x):
        return jnp.sin(x), jnp.cos(x)

    def bwd(x, cts):
        seen.append(cts)
        return (5. * cts[0] + 7. * cts[1],)
    two.defvjp(lambda x: (two(x), x), bwd)
    pruned = dce(jx.make_jaxpr(lambda x: two(x)[1])(1.))
    node = [e for e in pruned.eqns if e.primitive.name == "custom_vjp_call_jaxpr"][0]
    assert len(node.outvars) == 1
    assert "sin" not in str(node.params["fun_jaxpr"])
    assert "sin" not in str(node.params["fwd_jaxpr_thunk"]())
    run = jx.jaxpr_as_fun(pruned)
    close(run(1.)[0], np.cos(1.))
    close(jx.grad(lambda x: run(x)[0])(1.), 7.)
    assert float(seen[-1][0]) == 0. and float(seen[-1][1]) == 1.    # bwd ran on values
    close(jx.jit(jx.grad(lambda x: run(x)[0]))(1.), 7.)            # and traced
    close(jx.vmap(jx.grad(lambda x: run(x)[0]))(np.ones(3, np.float32)), [7.] * 3)
    assert not dce(jx.make_jaxpr(lambda x: (two(x), x)[1])(1.)).eqns


def test_vmap_of_a_linearized_custom_vjp_call():
    """custom_lin batches: the batched linear map transposes to the per-example cotangents."""
    from jaxprc.passes import linearize_jaxpr, transpose_jaxpr
    from jaxprc.passes.vmap import vmap_jaxpr
    f = lambda x, y: two_x_vjp(x) * y
    _, lin, _, n_res = linearize_jaxpr(jx.make_jaxpr(f)(1., 2.), [True, True])
    assert any(e.primitive.name == "custom_lin" for e in lin.eqns)
    batched = vmap_jaxpr(lin, in_axes=0, axis_size=3)
    assert any(e.primitive.name == "custom_lin" for e in batched.eqns)
    ct_program, _ = transpose_jaxpr(batched, [False] * n_res + [True, True])
    res = [np.full((3,) + a.shape, 1., a.dtype) for a in lin.in_avals[:n_res]]
    cts = jx.jaxpr_as_fun(ct_program)(*res, np.array([1., 2., 3.], np.float32))
    per_example = [jx.jaxpr_as_fun(transpose_jaxpr(lin, [False] * n_res + [True, True])[0])(
        *[np.ones(a.shape, a.dtype) for a in lin.in_avals[:n_res]], np.float32(c)) for c in (1., 2., 3.)]
    for k in range(2):
        close(cts[k], [p[k] for p in per_example])


# ------------------------------------------------------------------ library users

def test_library_functions_defined_with_custom_rules():
    from jaxprc import nn
    from jaxprc.scipy.special import expit, logit
    assert float(jx.grad(nn.relu)(0.)) == 0. and float(jx.grad(nn.relu)(2.)) == 1.
    assert isinstance(nn.relu, jx.custom_jvp)      # softplus is logaddexp(x, 0), whose rule it uses (as in JAX)
    close(jx.grad(nn.softplus)(200.), 1.), close(nn.softplus(200.), 200.)
    close(jx.grad(nn.softplus)(0.), 0.5)
    close(jx.grad(expit)(0.), 0.25), close(expit(-200.), 0.)
    close(jx.grad(expit)(3.), np.exp(-3.) / (1 + np.exp(-3.)) ** 2)
    close(jx.grad(logit)(0.2), 1 / (0.2 * 0.8)), close(logit(expit(1.5)), 1.5)
    assert isinstance(nn.relu6, jx.custom_jvp)
    assert [float(jx.grad(nn.relu6)(x)) for x in (-1., 0., 3., 6., 7.)] == [0., 0., 1., 0., 0.]
    close(jx.grad(jnp.linalg.norm)(np.array([3., 4.], np.float32)), [0.6, 0.8])
    close(jx.jacfwd(lambda x: jnp.linalg.norm(x, axis=1))(np.array([[3., 4.], [1., 0.]], np.float32)),
          [[[0.6, 0.8], [0., 0.]], [[0., 0.], [1., 0.]]])


def test_odeint_exponential_decay_against_closed_form():
    from jaxprc.experimental.ode import odeint
    t = np.array([0., 0.5, 1.0], np.float32)
    f = lambda y, t, k: -k * y
    ys = odeint(f, 2., t, 0.7)
    close(ys, 2. * np.exp(-0.7 * t), 1e-4)
    g_y0, g_t, g_k = jx.grad(lambda y0, t, k: odeint(f, y0, t, k)[-1], argnums=(0, 1, 2))(2., t, 0.7)
    close(g_y0, np.exp(-0.7), 1e-4)
    close(g_k, -1.0 * 2. * np.exp(-0.7), 1e-4)
    close(g_t, [0.7 * 2. * np.exp(-0.7), 0., -0.7 * 2. * np.exp(-0.7)], 1e-4)   # moving t0 or t2
    # pytree state and a closed-over value
    scale = jnp.ones(()) * 0.5
    out = odeint(lambda s, t: {"a": -s["a"] * scale, "b": s["a"]}, {"a": 1., "b": 0.}, t)
    close(out["a"], np.exp(-0.5 * t), 1e-4)
    close(out["b"], (1 - np.exp(-0.5 * t)) / 0.5, 1e-4)


def test_pass_outputs_with_custom_nodes_verify():
    from jaxprc.ir.verify import verify
    from jaxprc.passes import run_pipeline
    xs = np.ones((2, 3), np.float32)
    for prog in (jx.make_jaxpr(_rt_program)(xs[0]), jx.make_jaxpr(jx.vmap(_rt_program))(xs)):
        verify(prog)
        for pipeline in ("dce", "dce,cse"):
            verify(run_pipeline(prog, pipeline))
    only_jvp = jx.make_jaxpr(lambda x: _rt_f(x).sum())(xs[0])
    for pipeline in ("jvp", "jvp,dce", "linearize"):
        verify(run_pipeline(only_jvp, pipeline))
    verify(jx.make_jaxpr(jx.grad(lambda x: jx.vmap(_rt_program)(x).sum()))(xs))


def test_linearized_program_with_custom_lin_round_trips_and_transposes():
    """custom_lin's bwd prints as a named definition; parsed back, transposition runs its jaxpr."""
    from jaxprc.passes.partial_eval import linearize_jaxpr
    from jaxprc.passes.transpose import transpose_jaxpr
    x = np.arange(1., 4., dtype=np.float32)
    known, lin, _, n_res = linearize_jaxpr(jx.make_jaxpr(_rt_program)(x), [True])
    text = str(lin)
    assert "custom_lin[" in text and "bwd=@" in text
    parsed = ir.parse(text)
    assert str(parsed) == text
    res = jx.jaxpr_as_fun(known)(x)[1:]
    for program in (lin, parsed):
        ct, _ = transpose_jaxpr(program, [False] * n_res + [True])
        close(jx.jaxpr_as_fun(ct)(*res, np.float32(1.))[0], jx.grad(_rt_program)(x))


# ---------------------------------------- library rules in the text form, recursion, defaults

def _parsed_fn(cj):
    back = assert_round_trip(cj)
    return lambda *args: jx.jaxpr_as_fun(back)(*args)


def test_sinc_program_prints_its_recursive_rule_once_and_round_trips():
    """sinc's series term at 0 is a custom_jvp whose rule calls itself with the order k + 1."""
    x = np.float32(0.)
    cj = jx.make_jaxpr(jnp.sinc)(x)
    assert str(cj).count("@_sinc_maclaurin_rule = ") == 1
    fn = _parsed_fn(cj)
    close(fn(x), 1.)
    close(jx.grad(lambda x: fn(x)[0])(x), 0.)
    close(jx.grad(jx.grad(lambda x: fn(x)[0]))(x), -np.pi ** 2 / 3)
    close(jx.grad(jx.grad(jx.grad(jx.grad(lambda x: fn(x)[0]))))(x), np.pi ** 4 / 5)
    close(jx.grad(lambda x: fn(x)[0])(np.float32(0.5)), -4 / np.pi)


def test_recursive_rule_with_pytree_and_traced_nondiff_arguments():
    @partial(jx.custom_jvp, nondiff_argnums=(1, 2))
    def scaled(x, axes, s):
        return jnp.sum(x * s, axis=axes)

    @scaled.defjvp
    def scaled_jvp(axes, s, primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled(x, tuple(axes), s), scaled(t, axes, s) * 2.   # rebuilt tuple, same values

    x = np.ones((2, 3), np.float32)
    f = lambda x, s: scaled(x, (1,), s).sum()
    assert str(jx.make_jaxpr(f)(x, 3.)).count("@scaled_jvp = ") == 1
    close(jx.grad(f)(x, 3.), np.full((2, 3), 6.))
    close(jx.jit(jx.grad(f))(x, 3.), np.full((2, 3), 6.))
    close(jx.grad(lambda x: _parsed_fn(jx.make_jaxpr(f)(x, 3.))(x, 3.)[0])(x), np.full((2, 3), 6.))


def test_odeint_program_round_trips_and_its_parsed_copy_differentiates_twice():
    from jaxprc.experimental.ode import odeint
    ts = np.array([0., 1.], np.float32)
    decay = lambda y, t, k: -k * y
    cj = jx.make_jaxpr(lambda y0, k: odeint(decay, y0, ts, k)[-1].sum())(np.ones(2, np.float32), 1.)
    assert "= unprinted" in str(cj)      # the adjoint's adjoint's ... rules are nested without end
    fn = _parsed_fn(cj)
    g_y0, g_k = jx.grad(lambda y0, k: fn(y0, k)[0], (0, 1))(np.ones(2, np.float32), 1.)
    close(g_y0, np.full(2, np.exp(-1.)), 1e-4), close(g_k, -2 * np.exp(-1.), 1e-4)
    close(jx.grad(jx.grad(lambda k: fn(np.ones(2, np.float32), k)[0]))(1.), 2 * np.exp(-1.), 1e-4)


def test_a_rule_deeper_than_the_text_form_says_so_when_needed():
    @jx.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), g(x) * t          # a rule referring to a deeper rule

    @jx.custom_jvp
    def g(x):
        return jnp.cos(x)
    g.defjvp(lambda p, t: (g(p[0]), -jnp.sin(p[0]) * t[0]))
    text = ir.pp_jaxpr(jx.make_jaxpr(f)(1.), max_definition_depth=1)
    assert "@f_jvp = {" in text and "@_lambda_ = unprinted" in text
    parsed = ir.parse(text)
    assert ir.pp_jaxpr(parsed, max_definition_depth=1) == text
    fn = lambda x: jx.jaxpr_as_fun(parsed)(x)[0]
    close(jx.grad(fn)(1.), np.cos(1.))
    with pytest.raises(ir.RuleNotPrinted, match="was not printed"):
        jx.grad(jx.grad(fn))(1.)


def test_rules_see_positional_defaults_and_keyword_only_defaults_stay_out():
    @jx.custom_jvp
    def f(x, y=2.):
        return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), tx * y + ty * x
    assert float(jx.grad(f)(3.)) == 2. and float(jx.grad(f)(3., 4.)) == 4.
    assert float(jx.grad(lambda x: f(x, y=5.))(3.)) == 5.

    @jx.custom_vjp
    def g(x, *, scale=3.):
        return x * scale
    g.defvjp(lambda x: (g(x), None), lambda _, ct: (ct * 3.,))
    assert float(jx.grad(g)(1.)) == 3.
    with pytest.raises(TypeError, match="(?s)could not be resolved to positional-only arguments.*could not be resolved to positions: scale"):
        jx.grad(lambda x: g(x, scale=2.))(1.)


def test_jvp_rule_tangent_of_an_integer_output_must_be_float0():
    @jx.custom_jvp
    def k(x, n):
        return x * n, n * 2

    @k.defjvp
    def k_jvp(primals, tangents):
        (x, n), (tx, tn) = primals, tangents
        return k(x, n), (tx * n, jnp.zeros_like(n))     # JAX wants a float0 tangent here
    with pytest.raises(TypeError, match=re.escape("primal int32[] with tangent int32[], expecting tangent "
                                                  "float0[]")):
        jx.grad(lambda x: k(x, 3)[0])(2.0)
    k.defjvp(lambda p, t: (k(*p), (t[0] * p[1], t[1])))
    assert float(jx.grad(lambda x: k(x, 3)[0])(2.0)) == 3.0


def test_bwd_symbolic_zero_must_have_the_input_type():
    @jx.custom_vjp
    def f(x, y):
        return x, y
    f.defvjp(lambda x, y: (f(x.value, y.value), None), lambda _, gs: (gs[1], gs[0]), symbolic_zeros=True)
    with pytest.raises(ValueError, match=re.escape("at output[0] the SymbolicZero had shape/dtype float32[2] "
                                                  "while the corresponding input had shape/dtype float32[1]")):
        jx.grad(lambda x, y: f(x, y)[0].sum())(jnp.ones(1), jnp.ones(2))
