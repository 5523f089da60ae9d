"""checkify against JAX: the same programs give the same ``err.get()`` strings and outputs,
eagerly, under jit, vmap, grad and in control flow."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify as jck

import jaxprc
import jaxprc.numpy as xnp
from jaxprc.experimental import checkify as xck

JAX = types.SimpleNamespace(jx=jax, jnp=jnp, lax=jax.lax, ck=jck)
OURS = types.SimpleNamespace(jx=jaxprc, jnp=xnp, lax=jaxprc.lax, ck=xck)

F = np.float32


def _user(m, x):
    m.ck.check(x > 0, "{x} needs to be positive, {}", x * 2, x=x)
    return 1 / x


def _two(m, x):
    m.ck.check(x > 0, "first {}", x)
    m.ck.check(x > 1, "second")
    return m.jnp.sin(x)


def _index(m, x, i):
    return x[i], m.lax.dynamic_slice(x, (i,), (2,)), x.at[i].add(1.0)


def _div(m, x, y):
    return x // y


def _nan(m, x):
    return m.jnp.log(x) + m.jnp.sqrt(x - 1.0)


def _cond(m, x):
    return m.lax.cond(x > 0, lambda v: m.jnp.sin(v) / v, lambda v: m.jnp.log(v), x)


def _scan(m, xs):
    def body(c, x):
        m.ck.check(x < 2.5, "element {} too big", x)
        return c + x, m.jnp.log(c)
    return m.lax.scan(body, 0.0, xs)


def _while(m, x):
    def body(c):
        m.ck.check(c < 3, "c reached {}", c)
        return c + 1
    return m.lax.while_loop(lambda c: c < 5, body, x)


def _nested(m, x):
    y = m.jx.jit(lambda v: m.lax.cond(v > 0, lambda u: m.jx.jit(lambda w: _two(m, w))(u), lambda u: u, v))(x)
    return m.lax.fori_loop(0, 3, lambda i, c: c + m.jnp.log(c - 2.0), y)


def _grad(m, x):
    def f(v):
        m.ck.check(v > -1, "v was {}", v)
        return m.jnp.sin(v) * v
    return m.jx.grad(f)(x)


CASES = [  # (name, program, errors, argument tuples: one jitted function runs them all)
    ("user", _user, "user_checks", [(F(3.0),), (F(-3.0),)]),
    ("first_wins", _two, "user_checks", [(F(-0.5),), (F(0.5),), (F(2.0),)]),
    ("index", _index, "index_checks", [(np.arange(3, dtype=F), np.int32(i)) for i in (5, -7, 1)]),
    ("div", _div, "div_checks", [(np.arange(3, dtype=np.int32), np.array([1, 0, 2], np.int32))]),
    ("nan", _nan, "nan_checks", [(np.array([2.0, 0.5], F),)]),
    ("float_checks", _nan, "float_checks", [(np.array([-2.0], F),)]),
    ("cond_nan", _cond, "nan_checks", [(F(-1.0),)]),
    ("cond_div", _cond, "float_checks", [(F(0.0),), (F(2.0),)]),
    ("scan", _scan, "all_checks", [(np.arange(4, dtype=F),)]),
    ("while", _while, "user_checks", [(np.int32(0),), (np.int32(3),), (np.int32(5),)]),
    ("nested", _nested, "all_checks", [(F(0.5),), (F(2.5),)]),
    ("nested_user_only", _nested, "nan_checks", [(F(0.5),)]),
    ("grad", _grad, "user_checks", [(F(-2.0),)]),
    ("grad_nan", _grad, "nan_checks", [(F(np.inf),)]),
]


def _results(m, prog, errors, arg_sets, wrap):
    """(err.get(), output leaves) per argument tuple, from one checkified (and wrapped) function."""
    f = wrap(m, m.ck.checkify(lambda *a: prog(m, *a), errors=getattr(m.ck, errors)))
    leaves = jax.tree_util.tree_leaves if m is JAX else jaxprc.tree_util.tree_leaves
    out = []
    for args in arg_sets:
        err, res = f(*map(m.jnp.asarray, args))
        out.append((err.get(), [np.asarray(o) for o in leaves(res)]))
    return out


def _same(prog, errors, args, wrap, more=()):
    """Same messages and outputs from JAX and jaxprc on ``args`` (and each tuple of ``more``)."""
    arg_sets = [args, *more]
    for (got, got_out), (want, want_out) in zip(_results(OURS, prog, errors, arg_sets, wrap),
                                                _results(JAX, prog, errors, arg_sets, wrap)):
        assert got == want
        assert len(got_out) == len(want_out)
        for g, w in zip(got_out, want_out):
            np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("name,prog,errors,arg_sets", CASES, ids=[c[0] for c in CASES])
def test_jit_of_checkify(name, prog, errors, arg_sets):
    _same(prog, errors, arg_sets[0], lambda m, f: m.jx.jit(f), arg_sets[1:])


@pytest.mark.parametrize("name", ["user", "div", "cond_nan", "scan"])
def test_eager_checkify(name):
    _, prog, errors, arg_sets = next(c for c in CASES if c[0] == name)
    _same(prog, errors, arg_sets[-1], lambda m, f: f)


def test_checkify_of_jit():
    _same(lambda m, x: m.jx.jit(lambda v: _two(m, v))(x), "user_checks", (F(0.5),), lambda m, f: f)


def test_vmap_of_checkify_reports_each_failing_index():
    xs = np.array([1.0, -2.0, 3.0, -4.0], F)
    _same(_user, "user_checks", (xs,), lambda m, f: m.jx.jit(m.jx.vmap(f)))
    _same(_nan, "nan_checks", (np.array([[2.0], [-1.0], [0.5]], F),), lambda m, f: m.jx.jit(m.jx.vmap(f)))
    _same(_scan, "user_checks", (np.array([[0.0, 1.0], [3.0, 4.0]], F),), lambda m, f: m.jx.jit(m.jx.vmap(f)))


def test_checkify_of_vmap_reports_the_last_failure():
    xs = np.array([1.0, -2.0, 3.0, -4.0], F)
    _same(lambda m, x: m.jx.vmap(lambda v: _user(m, v))(x), "user_checks", (xs,), lambda m, f: m.jx.jit(f))


def test_eager_check_and_check_error_raise_jax_messages():
    # JAX's eager check raises these messages too (checked by hand: run from pytest, JAX's impl
    # trips over a missing traceback before raising)
    with pytest.raises(xck.JaxRuntimeError, match=r"^-1.0 needs to be positive, -2.0 \(`check` failed\)$"):
        _user(OURS, xnp.float32(-1.0))
    err, _ = xck.checkify(lambda x: _two(OURS, x))(xnp.float32(0.5))
    with pytest.raises(xck.JaxRuntimeError, match=r"^second \(`check` failed\)$"):
        xck.check_error(err)
    for m in (JAX, OURS):
        err, _ = m.ck.checkify(lambda x: _two(m, x))(m.jnp.float32(0.5))
        again, _ = m.ck.checkify(m.ck.check_error)(err)
        assert again.get() == "second (`check` failed)"


def test_check_under_jit_is_not_functionalized():
    msgs = []
    for m in (JAX, OURS):
        with pytest.raises(ValueError) as e:
            m.jx.jit(lambda x: _user(m, x))(F(1.0))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "not functionalized" in msgs[0]


def test_public_names_match():
    names = lambda mod: {n for n in dir(mod) if not n.startswith("_")}  # noqa: E731
    assert names(jck) <= names(xck)


def _indexing(m, x, i, j):
    return (x[i, j], x[:, j], m.lax.dynamic_slice(x, (i, j), (2, 2)), x[m.jnp.array([0, i])],
            x.at[i, j].set(0.0))


@pytest.mark.parametrize("x64", [False, pytest.param(True, marks=pytest.mark.x64)])
def test_multi_axis_indexing_payloads(x64):
    x = np.arange(12.0, dtype=F).reshape(3, 4)
    arg_sets = [(x, np.int32(i), np.int32(j)) for i, j in [(1, 7), (5, 1), (-9, 0), (2, 3), (1, 2)]]
    _same(_indexing, "index_checks", arg_sets[0], lambda m, f: m.jx.jit(f), arg_sets[1:])


def test_array_payloads_format_specs_and_more_nan_sources():
    fmt = lambda m, x: m.ck.check(m.jnp.all(x > 0), "bad {} {:.2f} {x} {t}", x, x[0], x=x[1:],  # noqa: E731
                                  t={"a": [x[0], None], "b": (x,)})
    _same(fmt, "all_checks", (np.array([1.0, -2.0, 3.0], F),), lambda m, f: m.jx.jit(f))
    ops = lambda m, x: m.jnp.sum(x / x) + m.jnp.dot(x, x) + m.jnp.cumsum(m.jnp.exp(x * 800)) - m.jnp.inf  # noqa: E731
    xs = [(np.array(x, F),) for x in ([0.0, 1.0], [1.0, 1.0], [1.0, 2.0])]
    _same(ops, "all_checks", xs[0], lambda m, f: m.jx.jit(f), xs[1:])


def _index_in_control_flow(m, x, i):
    lax, jnp = m.lax, m.jnp
    a = lax.cond(i > 1, lambda: x[i, jnp.array([0, i])], lambda: x[jnp.array([i, 0]), i])
    c, ys = lax.scan(lambda c, k: (c + x[k, i], x[i, k]), 0.0, jnp.arange(3) + i)
    w = lax.while_loop(lambda c: x[c, 0] < 5, lambda c: c + 1, i)
    return a, c, ys, w


def test_index_checks_in_branches_loop_bodies_and_loop_conds():
    x = np.arange(12.0, dtype=F).reshape(3, 4)
    arg_sets = [(x, np.int32(i)) for i in (0, 1, 2, 3, -1)]
    _same(_index_in_control_flow, "all_checks", arg_sets[0], lambda m, f: m.jx.jit(f), arg_sets[1:])


def test_derivatives_of_checkified_functions():
    def grads(m):
        body = lambda c, x: ([m.ck.check(x < 2.5, "big {}", x), c + m.jnp.sin(x) * c + x][1],  # noqa: E731
                             m.jnp.log(c + 1))
        prog = m.ck.checkify(lambda xs: m.lax.scan(body, 1.0, xs), errors=m.ck.all_checks)
        loop = m.ck.checkify(lambda x: m.lax.fori_loop(0, 3, lambda i, c: c * x, x))
        return (m.jx.jit(m.jx.grad(lambda xs: prog(xs)[1][1].sum()))(m.jnp.arange(4.0)),
                m.jx.jit(m.jx.jacfwd(lambda x: loop(x)[1]))(m.jnp.float32(3.0)),
                m.jx.vmap(m.jx.grad(lambda x: loop(x)[1]))(m.jnp.array([1.0, 2.0])))
    for got, want in zip(grads(OURS), grads(JAX)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_custom_jvp_rules_survive_checkify():
    def run(m):
        @m.jx.custom_jvp
        def f(x):
            m.ck.check(x > 0, "f got {}", x)
            return m.jnp.sin(x)
        f.defjvp(lambda p, t: (f(p[0]), t[0] * 2))
        g = m.ck.checkify(lambda x: f(x) * x, errors=m.ck.all_checks)
        (err, _), (_, t) = m.jx.jvp(g, (F(2),), (F(1),))
        return (g(F(-1))[0].get(), err.get(), float(t), float(m.jx.grad(lambda x: g(x)[1])(F(1.5))),
                np.asarray(m.jx.vmap(m.jx.grad(lambda x: g(x)[1]))(m.jnp.array([1.5, 0.5]))).tolist())
    got, want = run(OURS), run(JAX)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2:4], want[2:4], rtol=1e-6)
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)


def test_custom_vjp_rules_survive_checkify():
    def run(m):
        @m.jx.custom_vjp
        def f(x, y):
            m.ck.check(x > 0, "f got {}", x)
            return m.jnp.sin(x) * y
        f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, ct: (3 * ct * r[1], ct * r[0]))
        g = m.ck.checkify(lambda x, y: f(x, y) * x, errors=m.ck.all_checks)
        return (g(F(-1), F(2))[0].get(), [float(d) for d in m.jx.grad(lambda x, y: g(x, y)[1], (0, 1))(F(1.5), F(2))],
                np.asarray(m.jx.vmap(m.jx.grad(lambda x: g(x, F(2))[1]))(m.jnp.array([1.5, 0.5]))).tolist())
    got, want = run(OURS), run(JAX)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1] + got[2], want[1] + want[2], rtol=1e-6)
