"""Issue 20's remaining custom-derivative items against JAX 0.10.2: symbolic zeros stay symbolic
under vmap (a SymbolicZero of the per-example type reaches the rule), bwd may return None for some
leaves of a pytree argument, and the error texts users match: a fwd that returns no pair, a bwd
whose output is not a tuple, a traced scan length or unroll (ConcretizationTypeError)."""
import jax
import jax.lax as jlax
import jax.numpy as jjnp
import numpy as np
import pytest

import jaxprc
import jaxprc.lax as xlax
import jaxprc.numpy as xjnp

LIBS = {"jax": (jax, jjnp, jlax), "jaxprc": (jaxprc, xjnp, xlax)}


def _symbolic_zero_under_vmap(api, jnp, lax):
    seen = set()

    @api.custom_jvp
    def f(x, y):
        return x * y

    def rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        if type(ty).__name__ == "SymbolicZero":
            seen.add((tuple(ty.shape), str(ty.dtype)))
            ty = jnp.zeros(ty.shape, ty.dtype)
        return f(x, y), tx * y + x * ty
    f.defjvp(rule, symbolic_zeros=True)
    xs, ys = jnp.arange(3.0), jnp.arange(3.0) + 1
    outs = (api.vmap(lambda x, y: api.jvp(lambda x: f(x, y), (x,), (jnp.ones_like(x),)))(xs, ys),
            api.vmap(api.grad(f), (0, None))(xs, 2.0))
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(outs)], sorted(seen)


def _partial_none_cotangents(api, jnp, lax):
    @api.custom_vjp
    def f(d):
        return d["a"] * d["b"]
    f.defvjp(lambda d: (f(d), d), lambda d, g: ({"a": g * d["b"], "b": None},))
    g = api.grad(f)({"a": 2.0, "b": 3.0})
    return [np.asarray(g["a"]), np.asarray(g["b"])]


def _weak_types_through_rules(api, jnp, lax):
    """Gradients through custom rules keep the weak type of a Python-scalar input, and eager bwd
    sees its cotangent as an array of that type."""
    seen = []

    @api.custom_vjp
    def f(x):
        return x * 2

    def bwd(r, g):
        seen.append((type(g).__name__ != "ndarray", bool(g.weak_type)))
        return (g * 2,)
    f.defvjp(lambda x: (f(x), None), bwd)

    @api.custom_jvp
    def h(x):
        return x * 2
    h.defjvp(lambda p, t: (h(p[0]), t[0] * 2))

    @api.custom_vjp
    def k(d):
        return d["a"] * d["b"]
    k.defvjp(lambda d: (k(d), d), lambda d, g: ({"a": g * d["b"], "b": None},))
    grads = [api.grad(f)(2.0), api.grad(h)(2.0), *api.grad(k)({"a": 2.0, "b": 3.0}).values()]
    return [bool(g.weak_type) for g in grads], seen


@pytest.mark.parametrize("program", [_symbolic_zero_under_vmap, _partial_none_cotangents,
                                     _weak_types_through_rules],
                         ids=lambda p: p.__name__.strip("_"))
def test_same_results(program):
    theirs, ours = (program(*LIBS[k]) for k in ("jax", "jaxprc"))
    assert repr(ours) == repr(theirs)


def _fwd_not_a_pair(api, jnp, lax):
    @api.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: x, lambda r, g: (g,))
    api.grad(f)(1.0)


def _bwd_not_a_tuple(api, jnp, lax):
    @api.custom_vjp
    def f(x):
        return x
    f.defvjp(lambda x: (x, None), lambda r, g: g)
    api.grad(f)(1.0)


def _traced_scan_length(api, jnp, lax):
    api.jit(lambda n: lax.scan(lambda c, x: (c, c), 0.0, None, length=n))(3)


def _traced_scan_unroll(api, jnp, lax):
    api.jit(lambda n: lax.scan(lambda c, x: (c + x, c), 0.0, jnp.ones(3), unroll=n))(1)


@pytest.mark.parametrize("program", [_fwd_not_a_pair, _bwd_not_a_tuple, _traced_scan_length,
                                     _traced_scan_unroll], ids=lambda p: p.__name__.strip("_"))
def test_error_types_and_texts(program):
    errors = {}
    for name, libs in LIBS.items():
        with pytest.raises(Exception) as info:
            program(*libs)
        errors[name] = info.value
    theirs, ours = errors["jax"], errors["jaxprc"]
    assert type(ours).__name__ == type(theirs).__name__
    assert isinstance(ours, TypeError) == isinstance(theirs, TypeError)
    if "scan" in program.__name__:          # JAX's first two lines; then each says where
        assert str(ours).split("\n")[:2] == str(theirs).split("\n")[:2]
    else:                                   # up to the offending value (each prints its own way)
        assert str(ours).split(" produced ")[0] == str(theirs).split(" produced ")[0]
