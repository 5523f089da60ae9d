"""Shardings in types, jaxprc vs jax on 8 CPU devices (run by test_sharding_types_oracle.py in a
process of its own, so that both clients are created with 8 devices): for a handful of programs,
the result types (``typeof(...)`` with its sharding), values and layouts, and the errors."""
import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402
import jaxprc.numpy as xnp  # noqa: E402

X = np.arange(32, dtype=np.float32).reshape(8, 4) / 8
W = np.arange(16, dtype=np.float32).reshape(4, 4) / 4
JM, XM = jax.make_mesh((2, 4), ("x", "y")), jx.make_mesh((2, 4), ("x", "y"))


def on_both(value, *spec):
    return (jax.device_put(value, jax.sharding.NamedSharding(JM, jax.P(*spec))),
            jx.device_put(value, jx.sharding.NamedSharding(XM, jx.P(*spec))))


# name -> (jax program, jaxprc program, the operands as (value, spec)); np/jnp written once as `n`
PROGRAMS = {
    "elementwise": (lambda n, a: n.sin(a) * 2 + 1, [(X, ("x", "y"))]),
    "broadcast": (lambda n, a: a[:, None, :] * n.ones((8, 3, 4)), [(X, ("x", "y"))]),
    "broadcast_row": (lambda n, a, b: a + b, [(X, ("x", None)), (np.ones(4, np.float32), ("y",))]),
    "reductions": (lambda n, a: (a.sum(0), a.max(1), n.argmin(a, axis=0), a.sum()), [(X, ("x", "y"))]),
    "transpose": (lambda n, a: (a.T, n.transpose(a[None], (2, 0, 1))), [(X, ("x", "y"))]),
    "dot_free": (lambda n, a, b: a @ b, [(X, ("x", None)), (W, (None, "y"))]),
    "dot_one_side": (lambda n, a, b: (a @ b, b.T @ a.T), [(X, ("x", "y")), (W, (None, None))]),
    "einsum_batch": (lambda n, a, b: n.einsum("bij,bjk->bik", a, b),
                     [(np.stack([X, X]), ("x", None, None)), (np.stack([W, W]), (None, None, "y"))]),
    "reshape": (lambda n, a: (a.reshape(2, 4, 4), a.reshape(32)), [(X, ("x", None))]),
    "astype_where": (lambda n, a: n.where(a > 1, a.astype(n.int32), 0), [(X, ("x", "y"))]),
    "sort_cumsum": (lambda n, a: (n.sort(a, axis=1), n.cumsum(a, axis=1)), [(X, ("x", None))]),
    "concatenate": (lambda n, a: (n.concatenate([a, a], axis=1), n.concatenate([a, a], axis=0)), [(X, ("x", "y"))]),
    "softmax_relu": (lambda n, a: (jax if n is jnp else jx).nn.softmax(a, axis=1) + (jax if n is jnp else jx).nn.relu(a),
                     [(X, ("x", "y"))]),
}


def types_values_and_layouts():
    for name, (program, operands) in PROGRAMS.items():
        pairs = [on_both(v, *s) for v, s in operands]
        for jit_it in (False, True):
            jf, xf = (jax.jit(program, static_argnums=0), jx.jit(program, static_argnums=0)) if jit_it else (program, program)
            jouts = jax.tree.leaves(jf(jnp, *[p[0] for p in pairs]))
            xouts = jx.tree.leaves(xf(xnp, *[p[1] for p in pairs]))
            for k, (j, x) in enumerate(zip(jouts, xouts)):
                where = f"{name} result {k} (jit={jit_it})"
                assert repr(jx.typeof(x)) == repr(jax.typeof(j)), (where, jx.typeof(x), jax.typeof(j))
                assert repr(jx.typeof(x).sharding.spec) == repr(jax.typeof(j).sharding.spec), where
                np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-6, err_msg=where)
                if x.ndim:
                    assert repr(x.sharding.spec) == repr(j.sharding.spec), (where, x.sharding, j.sharding)
        # the jaxprs print alike (jaxprc adds the `mesh` line its parser reads)
        jtext = str(jax.make_jaxpr(program, static_argnums=0)(jnp, *[p[0] for p in pairs]))
        xtext = str(jx.make_jaxpr(program, static_argnums=0)(xnp, *[p[1] for p in pairs]))
        assert xtext.startswith("mesh x=2, y=4\n"), xtext
        jbinders = jtext.split(". let")[0]
        assert xtext.split("\n", 1)[1].split(". let")[0] == jbinders, (name, jtext, xtext)


def outputs_with_out_sharding():
    (ja, xa), (jb, xb) = on_both(X, "x", "y"), on_both(W, "y", None)
    j = jnp.dot(ja, jb, out_sharding=jax.sharding.NamedSharding(JM, jax.P("x", None)))
    x = xnp.dot(xa, xb, out_sharding=jx.sharding.NamedSharding(XM, jx.P("x", None)))
    assert repr(jx.typeof(x)) == repr(jax.typeof(j)) and repr(x.sharding.spec) == repr(j.sharding.spec)
    np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-6)
    j = jnp.einsum("ij,jk->ik", ja, jb, out_sharding=jax.sharding.NamedSharding(JM, jax.P("x", None)))
    x = xnp.einsum("ij,jk->ik", xa, xb, out_sharding=jx.sharding.NamedSharding(XM, jx.P("x", None)))
    assert repr(jx.typeof(x)) == repr(jax.typeof(j)) and repr(x.sharding.spec) == repr(j.sharding.spec)
    np.testing.assert_allclose(np.asarray(x), np.asarray(j), rtol=1e-6)
    (jc, xc) = on_both(X, None, "y")
    j = jnp.reshape(jc, (32,), out_sharding=jax.sharding.NamedSharding(JM, jax.P("y")))
    x = xnp.reshape(xc, (32,), out_sharding=jx.sharding.NamedSharding(XM, jx.P("y")))
    assert repr(jx.typeof(x)) == repr(jax.typeof(j))
    j = jax.sharding.reshard(ja, jax.sharding.NamedSharding(JM, jax.P("y", "x")))
    x = jx.sharding.reshard(xa, jx.sharding.NamedSharding(XM, jx.P("y", "x")))
    assert repr(jx.typeof(x)) == repr(jax.typeof(j)) and repr(x.sharding) == repr(j.sharding)


def same_errors():
    cases = [
        ("incompatible", lambda n, a, b: a + b, [(X, ("x", "y")), (X, ("y", "x"))]),
        ("ambiguous", lambda n, a, b: a @ b, [(X, ("x", "y")), (W, ("y", None))]),
        ("illegal", lambda n, a, b: a @ b, [(X, ("x", None)), (W, (None, "x"))]),
        ("reshape", lambda n, a: a.reshape(32), [(X, (None, "y"))]),
        ("cumsum", lambda n, a: n.cumsum(a, axis=1), [(X, ("x", "y"))]),
        ("sort", lambda n, a: n.sort(a, axis=1), [(X, ("x", "y"))]),
    ]
    for name, program, operands in cases:
        pairs = [on_both(v, *s) for v, s in operands]
        messages = []
        for n, side in ((jnp, 0), (xnp, 1)):
            try:
                program(n, *[p[side] for p in pairs])
            except Exception as e:   # noqa: BLE001  (the two libraries' errors are compared)
                messages.append((type(e).__name__, str(e).replace("float32[", "f32[")))
            else:
                messages.append(None)
        assert messages[0] is not None and messages[0] == messages[1], (name, messages)


def main():
    types_values_and_layouts()
    outputs_with_out_sharding()
    same_errors()
    print("ok")


if __name__ == "__main__":
    main()
