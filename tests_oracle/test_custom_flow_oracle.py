"""Custom rules, control flow and batching together, against JAX (issue 32): a batched
custom_vjp inside scan, callback order under vmap and in control flow, forwarded outputs of
cond/while/scan under vmap (values, dtypes, weak types), optimize_remat's primal value,
collectives over vmap axes, complex odeint."""
import jax
import jax.experimental.ode
import numpy as np
import pytest

import jaxprc
import jaxprc.experimental.ode


def leaves_of(out):
    """(values, dtypes, weak types) of a result's leaves, for comparison across libraries."""
    leaves = jax.tree_util.tree_leaves(out)
    return ([np.asarray(x).tolist() for x in leaves], [np.asarray(x).dtype.name for x in leaves],
            [bool(getattr(x, "weak_type", False)) for x in leaves])


def assert_same(case):
    (ours, o_dtypes, o_weak), (theirs, t_dtypes, t_weak) = leaves_of(case(jaxprc)), leaves_of(case(jax))
    np.testing.assert_allclose(np.concatenate([np.ravel(x) for x in ours]) if ours else [],
                               np.concatenate([np.ravel(x) for x in theirs]) if theirs else [], rtol=2e-5,
                               atol=1e-6)
    assert (o_dtypes, o_weak) == (t_dtypes, t_weak)


def scan_over_custom_vjp(lib):
    @lib.custom_vjp
    def mul(x, coeff):
        return x * coeff
    mul.defvjp(lambda x, c: (mul(x, c), (x, c)), lambda r, g: (g * r[1], (r[0] * g).sum()))

    def f(x, coeff):
        return lib.lax.scan(lambda c, _: (mul(c, coeff), None), x, None, length=3)[0]
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2) / 5
    out, pullback = lib.vjp(lib.vmap(f, (0, None)), xs, np.float32(1.2))
    return out, pullback(np.ones((3, 2), np.float32))


def forwarded_by_cond(lib):
    f = lambda p, x, y: lib.lax.cond(p, lambda x, y: (x, y + 1), lambda x, y: (x, y - 1), x, y)  # noqa: E731
    return lib.vmap(f, (0, None, 0), (None, 0))(np.array([True, False]), np.float32(3), np.arange(2.0))


def forwarded_by_switch(lib):
    branches = [lambda x, y: (x, y), lambda x, y: (x, 2 * y)]
    f = lambda i, x, y: lib.lax.switch(i, branches, x, y)  # noqa: E731
    return lib.jit(lib.vmap(f, (0, None, 0), (None, 0)))(np.array([1, 0]), np.float32(3), np.arange(2.0))


def read_only_while_carry(lib):
    f = lambda s, y: lib.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0], c[1] + c[0]), (s, y))  # noqa: E731
    return lib.vmap(f, (None, 0), (None, 0))(np.float32(1), np.array([0.0, 1.5], np.float32))


def forwarded_by_scan(lib):
    f = lambda a, xs: lib.lax.scan(lambda c, x: ((c[0], c[1] + c[0] * x), x), (a, 0.0), xs)  # noqa: E731
    return lib.jit(f)(np.float32(2), np.arange(3.0, dtype=np.float32))


def optimize_remat_primal(lib):
    @lib.custom_vjp
    def f(x):
        return lib.numpy.tan(x)
    f.defvjp(lambda x: (lib.numpy.sin(x), (x,)), lambda r, g: (lib.numpy.cos(r[0]) * g,), optimize_remat=True)
    return (lib.value_and_grad(lambda x: lib.remat(f)(x) ** 2)(3.2),
            lib.jit(lib.value_and_grad(lambda x: f(x) ** 2))(3.2))


def collectives_over_vmap_axis(lib):
    lax = lib.lax
    xs = np.arange(18.0, dtype=np.float32).reshape(3, 6)
    return (lib.vmap(lambda x: lax.psum_scatter(x.reshape(3, 2), "i"), axis_name="i")(xs),
            lib.vmap(lambda x: lax.psum_scatter(x, "i", tiled=True), axis_name="i")(xs),
            lib.vmap(lambda x: lax.while_loop(lambda c: c < lax.axis_index("i"), lambda c: c + 1, 0),
                     axis_name="i")(xs),
            lib.vmap(lib.grad(lambda v: (lax.psum_scatter(v.reshape(3, 2), "i") ** 2).sum()), axis_name="i")(xs))


def complex_odeint(lib):
    odeint = lib.experimental.ode.odeint
    ts = np.array([0.0, 0.5, 1.0], np.float32)
    a = np.complex64(0.1 - 1j)
    ys = odeint(lambda y, t, a: a * y, np.array([1.0, 0.5j], np.complex64), ts, a)
    g = lib.grad(lambda a: lib.numpy.real(odeint(lambda y, t, a: a * y, np.ones(1, np.complex64), ts, a)[-1, 0]))(a)
    return ys, g


CASES = {f.__name__: f for f in (scan_over_custom_vjp, forwarded_by_cond, forwarded_by_switch, read_only_while_carry,
                                 forwarded_by_scan, optimize_remat_primal, collectives_over_vmap_axis,
                                 complex_odeint)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_types_match_jax(name):
    assert_same(CASES[name])


def callback_order(lib, jit: bool):
    seen = []
    f = lib.vmap(lib.vmap(lambda x: lib.debug.callback(lambda v: seen.append(float(v)), x)))
    (lib.jit(f) if jit else f)(np.arange(4.0, dtype=np.float32).reshape(2, 2))
    lib.effects_barrier()
    return seen


def ordered_in_control_flow(lib):
    lax, seen = lib.lax, []

    def log(tag, *xs):
        lib.debug.callback(lambda *v: seen.append((tag, *[float(np.asarray(u)) for u in v])), *xs, ordered=True)

    def f(x):
        def cond_fun(c):
            log("cond", c)
            return c < 2

        def body_fun(c):
            log("body", c)
            return c + 1
        c = lax.while_loop(cond_fun, body_fun, x)
        c = lax.switch(c, [lambda v: v, lambda v: v, lambda v: (log("switch", v), v * 3)[1]], c)
        return lax.scan(lambda c, t: (log("scan", t) or c + t, None), c, np.arange(2.0, dtype=np.float32))[0]
    out = f(0)
    lib.jit(f)(0)
    lib.effects_barrier()
    return out, seen


def test_vmapped_callbacks_run_in_jax_order_eagerly():
    assert callback_order(jaxprc, jit=False) == callback_order(jax, jit=False)
    assert sorted(callback_order(jaxprc, jit=True)) == sorted(callback_order(jax, jit=True))


def test_ordered_callbacks_in_control_flow_as_jax_eager_and_jit():
    (ours, our_seen), (theirs, their_seen) = ordered_in_control_flow(jaxprc), ordered_in_control_flow(jax)
    assert float(ours) == float(theirs) and our_seen == their_seen


def error_of(case, lib):
    try:
        case(lib)
    except Exception as e:  # noqa: BLE001 -- its type and first sentence are compared
        return type(e).__name__ if not isinstance(e, TypeError) else "TypeError", str(e).split(". ")[0]
    return None


def mixed_dtypes(lib):
    return lib.lax.add(lib.numpy.int32(1), lib.numpy.float32(2))


def closure_convert_wrong_structure(lib):
    _, pullback = lib.vjp(lambda x, z: z * x, 2.0, 3.0)
    pure, consts = lib.closure_convert(pullback, 2.0)
    return pure(1.0, consts)


@pytest.mark.parametrize("case", [mixed_dtypes, closure_convert_wrong_structure], ids=lambda c: c.__name__)
def test_error_type_and_first_sentence_match_jax(case):
    assert error_of(case, jaxprc) == error_of(case, jax)


def none_for_a_subtree(lib):
    @lib.custom_vjp
    def f(x):
        return x["a"] * x["b"][0]
    f.defvjp(lambda x: (f(x), x), lambda r, g: ({"a": g * r["b"][0], "b": None},))
    return lib.grad(f)({"a": np.float32(2), "b": (np.float32(3),)})


def test_bwd_none_for_a_subtree_as_jax():
    assert_same(none_for_a_subtree)


def linearized_switch_operands(lib):
    jnp, lax = lib.numpy, lib.lax
    branches = [lambda x: jnp.sin(x) * jnp.cos(x), lambda x: jnp.exp(x) * x, lambda x: x ** 3]

    def tangent_map(x):
        return lib.linearize(lambda x: lax.switch(x.astype(int) % 3, branches, x), x)[1](x)
    jaxpr = lib.make_jaxpr(tangent_map)(1.0)
    return [len(e.invars) for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]


def test_switch_residuals_merge_across_branches_as_jax():
    # residuals of equal types share operands (one branch runs): as many as JAX passes
    assert linearized_switch_operands(jaxprc) == linearized_switch_operands(jax)


def all_to_all_over_two_vmap_axes(lib):
    outs = []
    for axes in (("i", "j"), ("j", "i")):
        for split, concat, tiled in ((0, 0, False), (0, 0, True), (0, 1, False), (1, 0, False)):
            shape = [2, 3, 6, 2] if (split, concat) == (0, 1) else [2, 3, 2, 6] if split == 1 else [2, 3, 12 if tiled else 6]
            x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
            f = lambda v: lib.lax.all_to_all(v, axes, split, concat, tiled=tiled)  # noqa: E731
            outs.append(lib.vmap(lib.vmap(f, axis_name="j"), axis_name="i")(x))
    return outs


def test_all_to_all_over_two_vmap_axes_as_jax():
    assert_same(all_to_all_over_two_vmap_axes)


def rule_patterns(lib):
    """What symbolic-zeros rules see when vmap comes first: the tangents (SymbolicZero or not)
    of a custom_jvp rule, the perturbation flags of a custom_vjp fwd; per transformation."""
    from collections import Counter
    seen = Counter()

    @lib.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen[("jvp", type(tx).__name__ == "SymbolicZero", type(ty).__name__ == "SymbolicZero")] += 1
        tx = lib.numpy.zeros_like(x) if type(tx).__name__ == "SymbolicZero" else tx
        ty = lib.numpy.zeros_like(y) if type(ty).__name__ == "SymbolicZero" else ty
        return f(x, y), tx * y + x * ty
    f.defjvp(f_jvp, symbolic_zeros=True)

    @lib.custom_vjp
    def g(x, y):
        return x * y

    def g_fwd(x, y):
        seen[("fwd", x.perturbed, y.perturbed)] += 1
        return g(x.value, y.value), (x.value, y.value)
    g.defvjp(g_fwd, lambda res, ct: (ct * res[1], ct * res[0]), symbolic_zeros=True)
    xs = lib.numpy.arange(3.0, dtype=np.float32)
    runs = {
        "jvp of vmap": lambda: lib.jvp(lib.vmap(lambda x: f(x, 2.0)), (xs,), (xs,)),
        "grad of vmap": lambda: lib.grad(lambda x: lib.vmap(lambda x: f(x, 2.0))(x).sum())(xs),
        "jit grad of vmap": lambda: lib.jit(lib.grad(lambda y: lib.vmap(lambda x: f(x, y))(xs).sum()))(2.0),
        "vjp grad of vmap": lambda: lib.grad(lambda x: lib.vmap(lambda x: g(x, 2.0))(x).sum())(xs),
        "vjp jit grad of vmap": lambda: lib.jit(lib.grad(lambda y: lib.vmap(lambda x: g(x, y))(xs).sum()))(2.0),
    }
    out = {}
    for name, run in runs.items():
        seen.clear()
        out[name] = ([np.asarray(v) for v in jax.tree_util.tree_leaves(run())], dict(seen))
    return out


def test_symbolic_zeros_rules_under_vmap_see_what_jax_passes():
    ours, theirs = rule_patterns(jaxprc), rule_patterns(jax)
    for name in theirs:
        (o_vals, o_seen), (t_vals, t_seen) = ours[name], theirs[name]
        for o, t in zip(o_vals, t_vals):
            np.testing.assert_allclose(o, t, rtol=1e-6)
        # the pattern JAX's rule sees, ours sees as often; ours may run once more, when the custom
        # function is bound (with every input perturbed: see docs/guides/differences-from-jax.md)
        extra = {k: n - t_seen.get(k, 0) for k, n in o_seen.items() if n != t_seen.get(k, 0)}
        assert all(o_seen.get(k) == n for k, n in t_seen.items()), (name, o_seen, t_seen)
        assert sum(extra.values()) <= 1 and set(extra) <= {("jvp", False, False), ("fwd", True, True)}, \
            (name, o_seen, t_seen)


def integer_output_tangent(lib, tangent):
    """A custom_jvp rule's tangent for an integer output: JAX wants float0, and says so."""
    @lib.custom_jvp
    def k(x, n):
        return x * n, n * 2

    @k.defjvp
    def k_jvp(primals, tangents):
        (x, n), (tx, tn) = primals, tangents
        return k(x, n), (tx * n, tangent(lib, n, tn))
    float0 = np.zeros((), lib.dtypes.float0)
    return lib.jvp(k, (2.0, 3), (1.0, float0))[1][0], lib.jit(lib.grad(lambda x: k(x, 3)[0]))(2.0)


@pytest.mark.parametrize("tangent", [lambda lib, n, tn: tn, lambda lib, n, tn: lib.numpy.zeros_like(n),
                                     lambda lib, n, tn: lib.numpy.float32(0)],
                         ids=["float0", "int32", "float32"])
def test_integer_output_tangents_checked_as_jax(tangent):
    def run(lib):
        try:
            return [float(v) for v in integer_output_tangent(lib, tangent)]
        except TypeError as e:
            return str(e)
    assert run(jaxprc) == run(jax)


def jvp_rule_error(lib, rule, staged):
    """The TypeError of a JVP rule returning the wrong thing, applied eagerly or inside a scan."""
    @lib.custom_jvp
    def f(x):
        return x
    f.defjvp(rule)
    x = lib.numpy.float32(1.0)
    apply = (lambda x: lib.lax.scan(lambda c, _: (f(c), None), x, None, length=1)[0]) if staged else f
    try:
        lib.jvp(apply, (x,), (x,))
    except TypeError as e:
        return str(e)


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "in scan"])
@pytest.mark.parametrize("rule", [lambda p, t: ((p[0], p[0]), (t[0], t[0])),          # primal tree
                                  lambda p, t: (p[0] * np.ones(3, np.float32), t[0]),  # primal shape
                                  lambda p, t: (p[0], t[0].reshape(1)),                # tangent shape
                                  lambda p, t: (p[0], [t[0]])],                        # tangent tree
                         ids=["primal tree", "primal shape", "tangent shape", "tangent tree"])
def test_jvp_rule_output_errors_as_jax(rule, staged):
    ours, theirs = jvp_rule_error(jaxprc, rule, staged), jvp_rule_error(jax, rule, staged)
    staged_theirs = jvp_rule_error(jax, rule, True)
    # JAX's eager jvp does not compare the rule's primal output with the function's (it may then
    # fail on the tangent, or not at all); jaxprc stages every rule, so reports as JAX's staged jvp
    assert ours == theirs or (not staged and ours == staged_theirs
                              and "first element represents the primal output" in ours)


def symbolic_zero_outputs(lib):
    """A rule returning its SymbolicZero tangent: the next rule sees a SymbolicZero, not zeros."""
    @lib.custom_jvp
    def second(x, y):
        return y

    def second_jvp(primals, tangents):
        if type(tangents[1]).__name__ != "SymbolicZero":
            raise AssertionError("instantiated")
        return primals[1], tangents[1]
    second.defjvp(second_jvp, symbolic_zeros=True)
    g = lambda x: second(x, second(x, lib.numpy.float32(1.0)))  # noqa: E731
    xs = lib.numpy.ones(3)
    x = lib.numpy.float32(2.0)
    return lib.jvp(g, (x,), (x,)), lib.jvp(lib.vmap(g), (xs,), (xs,)), \
        lib.jit(lib.grad(lambda x: lib.vmap(g)(x).sum()))(xs)


def test_symbolic_zero_outputs_of_rules_as_jax():
    assert_same(symbolic_zero_outputs)


def test_bwd_symbolic_zero_of_the_wrong_type_as_jax():
    def run(lib):
        @lib.custom_vjp
        def f(x, y, z):
            return x, y, z
        f.defvjp(lambda x, y, z: (f(x.value, y.value, z.value), None),
                 lambda _, gs: (gs[1], gs[0], gs[2]), symbolic_zeros=True)     # swapped
        try:
            lib.grad(lambda x, y, z: f(x, y, z)[2].sum())(np.ones(1, np.float32), np.ones(2, np.float32),
                                                          np.ones(3, np.float32))
        except ValueError as e:
            return str(e)
    assert run(jaxprc) == run(jax) is not None


def bwd_zeros_under_vmap(lib):
    """A symbolic-zeros bwd under vmap gets SymbolicZero for an unused output's cotangent, and a
    bwd may give a plain leaf for a one-leaf custom pytree argument."""
    seen = []

    @lib.custom_vjp
    def f(x, y):
        return x, y

    def fwd(x, y):
        return f(x.value, y.value), None

    def bwd(_, g):
        seen.append([type(t).__name__ == "SymbolicZero" for t in g])
        return g
    f.defvjp(fwd, bwd, symbolic_zeros=True)
    xs = lib.numpy.arange(3.0)
    grads = (lib.grad(lambda x, y: lib.vmap(f)(x, y)[0].sum())(xs, xs),
             lib.jit(lib.grad(lambda x, y: lib.vmap(f)(x, y)[1].sum(), argnums=(0, 1)))(xs, xs))

    class Box:
        def __init__(self, x):
            self.x = x
    lib.tree_util.register_pytree_node(Box, lambda b: ((b.x,), None), lambda _, xs: Box(xs[0]))

    @lib.custom_vjp
    def scaled(box, y):
        return box.x * y
    scaled.defvjp(lambda box, y: (scaled(box, y), (box.x, y)), lambda r, g: (r[1] * g, r[0] * g))
    box_grad = lib.grad(scaled)(Box(np.float32(2.0)), np.float32(3.0)).x
    return grads, box_grad, np.array(seen)


def test_bwd_zeros_under_vmap_and_one_leaf_nodes_as_jax():
    assert_same(bwd_zeros_under_vmap)
