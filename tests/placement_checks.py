"""Checks of placement as JAX 0.10 has it over 8 CPU devices: device= and out_sharding= on array
creation, committed versus uncommitted arrays, jit(device=), auto_axes/explicit_axes, lax.full's
and full_like's placement, and the specs a mesh's axis types refuse; run by test_placement.py in a
process of its own."""
import sys
import warnings

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.sharding import AxisType, NamedSharding, PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402

warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
d = jx.devices()
explicit = jx.make_mesh((2, 4), ("x", "y"))
auto = jx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
X = np.arange(32, dtype=np.float32).reshape(8, 4)


def on(i, value=np.ones(4, np.float32)):
    return jx.device_put(value, d[i])


def where(x):
    return sorted(dev.id for dev in x.devices()), x.committed


@check
def creation_takes_a_device_or_a_sharding():
    for make, want in ((lambda: jnp.array([1.0, 2.0], device=d[1]), [1.0, 2.0]),
                       (lambda: jnp.asarray(X, device=d[2]), X), (lambda: jnp.arange(8, device=d[3]), np.arange(8)),
                       (lambda: jnp.zeros(3, device=d[3]), np.zeros(3))):
        out = make()
        assert where(out)[1] and len(out.devices()) == 1, out.devices()
        np.testing.assert_array_equal(np.asarray(out), want)
    with jx.set_mesh(explicit):
        assert jx.typeof(jnp.array(X, out_sharding=P("x", "y"))).str_short() == "f32[8@x,4@y]"
        assert jx.typeof(jnp.arange(8, out_sharding=P("x"))).str_short() == "i32[8@x]"
        assert jx.typeof(jnp.asarray(X, out_sharding=P("x"))).str_short() == "f32[8,4]"   # a NumPy array as is, as JAX
    raises(ValueError, lambda: jnp.array([1.0], device=d[1], out_sharding=P("x")),
           "Only one of `device` or `out_sharding` can be set")


@check
def computation_follows_committed_data():
    assert where(jnp.ones(4) * 2) == ([0], False)
    assert where(jx.device_put(np.ones(3), d[0])) == ([0], True)           # device_put commits
    assert where(jx.device_put(jnp.ones(3), d[0])) == ([0], True)
    assert where(jx.device_put(jnp.ones(3))) == ([0], False)               # no device: placement unchanged
    assert where(jnp.ones(4) + on(2)) == ([2], True)
    assert where(on(1).reshape((2, 2))) == ([1], True)
    f = jx.jit(lambda a, b: a + b)
    assert where(f(1, 2)) == ([0], False) and where(f(1, on(2))) == ([2], True)
    raises(ValueError, lambda: on(0) + on(1),
           "Received incompatible devices for jitted computation. Got argument x of add with shape float32[4] and "
           "with device ids [0] on platform CPU and argument y of add with shape float32[4] and with device ids [1] "
           "on platform CPU")
    raises(ValueError, lambda: jx.jit(lambda x, ys: x + ys[0] + ys[1])(on(1), (on(1), on(2))),
           "with device ids [1] on platform CPU and argument ys[1] of computation_follows_committed_data.<locals>")
    on4 = jx.jit(lambda a, b: a + b, device=d[4])
    assert where(on4(1, 2)) == ([4], True) and where(on4(on(2), on(3))) == ([4], True)
    assert float(on4(1, 2)) == 3.0


@check
def full_and_full_like_placement():
    s = NamedSharding(auto, P("x"))
    assert jx.lax.full((8,), 1.0, sharding=s).sharding == s
    assert lax.full_like(lax.iota(np.float32, 8), 1, sharding=s).sharding == s
    x = on(1, np.ones((10, 10), np.float32))
    assert lax.full_like(x, 1).sharding == x.sharding and where(lax.full_like(x, 1.0, shape=())) == ([1], True)
    assert where(lax.full_like(jnp.ones(3), 2.0)) == ([0], False)


@check
def auto_and_explicit_axes():
    with jx.set_mesh(explicit):
        a = jx.device_put(X, P("x", "y"))
        inside = []

        def gram(v):
            inside.append(jx.typeof(v).str_short())
            return v @ v.T
        out = jx.jit(jx.sharding.auto_axes(gram, out_sharding=P("x", None)))(a)
        assert inside == ["f32[8,4]"] and jx.typeof(out).str_short() == "f32[8@x,8]", (inside, jx.typeof(out))
        np.testing.assert_allclose(np.asarray(out), X @ X.T)
        out = jx.sharding.auto_axes(lambda v: v + 1)(a, out_sharding=P(None, "y"))
        assert jx.typeof(out).str_short() == "f32[8,4@y]"
        raises(TypeError, lambda: jx.sharding.auto_axes(lambda v: v)(a), "Missing required keyword argument: "
               "'out_sharding'")
    with jx.set_mesh(auto):
        inside.clear()

        def total(v):
            inside.append(jx.typeof(v).str_short())
            return (v * 2).sum(0)
        out = jx.jit(jx.sharding.explicit_axes(total, in_sharding=P("x")))(X)
        assert inside == ["f32[8@x,4]"] and jx.typeof(out).str_short() == "f32[4]", (inside, jx.typeof(out))
        np.testing.assert_allclose(np.asarray(out), 2 * X.sum(0))
    raises(ValueError, lambda: jx.sharding.explicit_axes(lambda v: v, in_sharding=P("x"))(X),
           "Context mesh cannot be empty")


@check
def specs_the_axis_types_refuse():
    raises(ValueError, lambda: NamedSharding(auto, P(None, "y", unreduced={"x"})),
           "Unreduced axes can only refer to mesh axes that is of type `Explicit`")
    raises(ValueError, lambda: NamedSharding(auto, P(None, "y", reduced={"x"})), "Reduced axes can only refer")
    raises(ValueError, lambda: NamedSharding(explicit, P(P.UNCONSTRAINED, "y")),
           "cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`")
    loose = NamedSharding(auto, P(P.UNCONSTRAINED, "y"))
    raises(ValueError, lambda: jx.jit(lambda a: a * 2, out_shardings=loose)(X),
           "Unconstrained dims are not allowed when passed to out_shardings")
    out = jx.jit(lambda a: lax.with_sharding_constraint(a, loose))(X)      # XLA chooses dimension 0's layout
    np.testing.assert_array_equal(np.asarray(out), X)
    assert out.sharding.spec[1] == "y", out.sharding


if __name__ == "__main__":
    run()
