"""jaxprc vs jax on 8 CPU devices: pshuffle, pswapaxes (axis_index_groups too) under pmap and
shard_map with their derivatives; nested pmap against JAX's shard_map over the 2-D mesh it means
(JAX 0.10.2's own pmap refuses to nest); ragged_all_to_all's lowering, its derivative's and vmap's,
and XLA:CPU's error for it (run by test_collectives2_oracle.py in a process of its own)."""
import os
import re
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402

X = (np.arange(8 * 8 * 2, dtype=np.float32).reshape(8, 8, 2) - 60) / 9
GROUPS = [[0, 5, 2, 7], [1, 4, 3, 6]]
PERM = [3, 0, 7, 1, 2, 6, 4, 5]


def same(a, b, what):
    la, lb = jax.tree_util.tree_leaves(a), jx.tree_util.tree_leaves(b)
    assert len(la) == len(lb), what
    for x, y in zip(la, lb):
        assert x.shape == y.shape and x.dtype == y.dtype, (what, x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-5, atol=1e-5, err_msg=what)


def mesh(lib, shape, names):
    return lib.sharding.Mesh(np.array(lib.devices()[:int(np.prod(shape))]).reshape(shape), names)


def swaps(lib):
    lax, jnp = lib.lax, lib.numpy
    P = lib.sharding.PartitionSpec

    def fn(v):
        return (lax.pswapaxes(v, "i", 0), lax.pshuffle(v, "i", PERM),
                lax.pswapaxes(v[:4], "i", 0, axis_index_groups=GROUPS), lax.pswapaxes(jnp.swapaxes(v, 0, 1), "i", 1))
    m = mesh(lib, (4, 2), ("x", "y"))

    def shmap(v):
        v = v[0, 0]
        return lax.pswapaxes(v, "x", 0)[None, None], lax.pshuffle(v, ("x", "y"), [5, 4, 7, 6, 1, 0, 3, 2])[None, None]
    loss = lambda x: sum(jnp.sum(jnp.sin(o) * w) for w, o in enumerate(lib.pmap(fn, "i")(x), 1))   # noqa: E731
    return {
        "pmap": lambda: lib.pmap(fn, "i")(X),
        "shard_map": lambda: lib.jit(lib.shard_map(shmap, mesh=m, in_specs=P("x", "y"), out_specs=P("x", "y")))(
            X[:, :4].reshape(4, 2, 4, 2)),
        "grad": lambda: lib.grad(loss)(X),
        "vmap": lambda: lib.pmap(lib.vmap(lambda v: lax.pswapaxes(v, "i", 0), in_axes=1), "i")(np.stack([X, -X], 2)),
    }


N = (np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) - 9) / 5


def nested_body(lax):
    return lambda v: (v * 10 + lax.psum(v, "i"), lax.psum(v, "j"), lax.psum(v, ("i", "j")), lax.pmean(v, ("j", "i")),
                      lax.axis_index("i"), lax.axis_index("j"), lax.all_gather(v, "i"),
                      lax.ppermute(v, "i", [(0, 3), (3, 1), (1, 0)]))


def nested_jax():
    """What pmap(pmap(f, 'i'), 'j') means: f on each device of a (j, i) mesh, each example on its own."""
    from jax.sharding import PartitionSpec as P
    f = nested_body(jax.lax)

    def body(v):
        return [o[None, None] for o in f(v[0, 0])]
    return jax.jit(jax.shard_map(body, mesh=mesh(jax, (2, 4), ("j", "i")), in_specs=P("j", "i"),
                                 out_specs=P("j", "i")))(N)


def nested_jaxprc():
    return jx.pmap(jx.pmap(nested_body(jx.lax), axis_name="i"), axis_name="j")(N)


def nested_grad(lib):
    """d/dx of the nested program (the reference: JAX's 2-D shard_map form)."""
    jnp, lax = lib.numpy, lib.lax
    f = lambda v: jnp.sin(v) * lax.psum(v * v, ("i", "j")) + lax.all_gather(v, "j").prod(0)   # noqa: E731
    if lib is jx:
        g = jx.pmap(jx.pmap(f, "i"), "j")
    else:
        P = jax.sharding.PartitionSpec
        g = jax.shard_map(lambda v: f(v[0, 0])[None, None], mesh=mesh(jax, (2, 4), ("j", "i")), in_specs=P("j", "i"),
                          out_specs=P("j", "i"))
    return lib.grad(lambda x: jnp.sum(g(x) * jnp.arange(3.0)))(N)


def ragged_programs(lib):
    P = lib.sharding.PartitionSpec
    rag = lambda *a: lib.lax.ragged_all_to_all(*a, axis_name="x")   # noqa: E731
    sm = lambda fn: lib.jit(lib.shard_map(fn, mesh=mesh(lib, (4,), ("x",)), in_specs=(P("x"),) * 6,   # noqa: E731
                                          out_specs=P("x")))
    jnp = lib.numpy
    return {"plain": sm(rag),
            "grad": sm(lambda a, b, *r: lib.grad(lambda a, b: jnp.sum(rag(a, b, *r) ** 2), argnums=(0, 1))(a, b)),
            "vmap": sm(lambda *a: lib.vmap(rag)(*[v.reshape(2, 2) for v in a]).reshape(4))}


def ragged_checks():
    ones = np.ones(16, np.int32)
    args = (np.arange(16, dtype=np.float32), np.zeros(16, np.float32), np.tile(np.arange(4, dtype=np.int32), 4),
            ones, np.repeat(np.arange(4, dtype=np.int32), 4), ones)
    calls = lambda text: re.findall(r"stablehlo.custom_call @ragged_all_to_all\(.*", text)   # noqa: E731
    theirs, ours = ragged_programs(jax), ragged_programs(jx)
    for name in theirs:
        a, b = calls(theirs[name].lower(*args).as_text()), calls(ours[name].lower(*args).as_text())
        assert len(a) == len(b) >= 1, (name, a, b)
        if name == "plain":     # the same instruction, attribute for attribute
            norm = lambda s: re.sub(r"%\w+", "%", s)    # noqa: E731
            assert norm(a[0]) == norm(b[0]), (a, b)
    errors = []
    for f in (theirs["plain"], ours["plain"]):
        try:
            f(*args)
        except Exception as e:      # noqa: BLE001  (each library's own exception type)
            errors.append(str(e))
    assert len(errors) == 2 and all("UNIMPLEMENTED: HLO opcode `ragged-all-to-all` is not supported by XLA:CPU" in e
                                    for e in errors), errors


def vmap_axis_cases(lib):
    """all_to_all, pswapaxes and pshuffle over a vmap's named axis (a batch of 4 examples). (JAX
    gives wrong shapes for an operand not batched, and rejects a partial ppermute there.)"""
    lax = lib.lax
    x = X.reshape(4, 4, 4, 2)
    cases = {f"all_to_all_{s}{c}{'t' if t else ''}": (lambda v, s=s, c=c, t=t: lax.all_to_all(v, "b", s, c, tiled=t))
             for s, c, t in ((0, 0, False), (0, 1, False), (1, 0, False), (1, 2, True), (0, 0, True))}
    cases.update(pswapaxes=lambda v: lax.pswapaxes(v, "b", 1), pshuffle=lambda v: lax.pshuffle(v, "b", [2, 3, 1, 0]))
    return {name: (lambda fn=fn: lib.vmap(fn, axis_name="b")(x)) for name, fn in cases.items()}


def main():
    for name, (theirs, ours) in {k: (v, vmap_axis_cases(jx)[k]) for k, v in vmap_axis_cases(jax).items()}.items():
        same(theirs(), ours(), name)
    print("ok vmap axis")
    theirs, ours = swaps(jax), swaps(jx)
    for name in theirs:
        same(theirs[name](), ours[name](), name)
        print("ok", name)
    same(nested_jax(), nested_jaxprc(), "nested pmap")
    same(nested_grad(jax), nested_grad(jx), "nested pmap grad")
    print("ok nested")
    ragged_checks()
    print("ok ragged")


if __name__ == "__main__":
    main()
    sys.exit(0)
