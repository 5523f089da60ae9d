"""shard_map's varying-manual-axes types (check_vma), jaxprc vs jax on 8 CPU devices (run by
test_vma_oracle.py in a process of its own, so that both clients start with 8 devices): for each
program, the types its body's values get (``typeof(v)``, written ``float32[4]{V:x}``), its results,
and for the programs JAX refuses, the error's type and message."""
import os
import re

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402

A = np.arange(32, dtype=np.float32).reshape(8, 4)
B = np.arange(4, dtype=np.float32)
AUTO = {lib: lib.make_mesh((2, 4), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2) for lib in (jax, jx)}
P = {jax: jax.sharding.PartitionSpec, jx: jx.sharding.PartitionSpec}


def cast(L, v, axes):
    return L.lax.pcast(v, axes, to="varying")


# name -> (body(L, seen, a, b) where L is the library and seen(v) records v's type, out_specs as
# PartitionSpec argument tuples); a is split over x, b replicated
PROGRAMS = {
    "elementwise_joins": (lambda L, seen, a, b: seen(seen(a) + seen(b)), [("x",)]),
    "psum_removes": (lambda L, seen, a, b: (seen(L.lax.psum(a, "x")), seen(L.lax.psum(b, "x"))), [(), ()]),
    "pmax_pmin": (lambda L, seen, a, b: (seen(L.lax.pmax(a, "x")), seen(L.lax.pmin(b, "y"))), [(), ()]),
    "psum_two_axes": (lambda L, seen, a, b: seen(L.lax.psum(a + L.lax.axis_index("y"), ("x", "y"))), [()]),
    "axis_index": (lambda L, seen, a, b: seen(a * seen(L.lax.axis_index("y")))[None], [("y", "x")]),
    "pcast": (lambda L, seen, a, b: seen(cast(L, b, "x")) * 2, [("x",)]),
    "pcast_two": (lambda L, seen, a, b: seen(cast(L, b, ("x", "y"))), [(("x", "y"),)]),
    "all_gather": (lambda L, seen, a, b: (seen(L.lax.all_gather(a, "x")), seen(L.lax.all_gather(b, "x", tiled=True))),
                   [("x",), ("x",)]),
    "all_gather_invarying": (lambda L, seen, a, b: (seen(L.lax.all_gather(a, "x", to="invarying")),
                                                    seen(L.lax.all_gather(b, "y", tiled=True, to="invarying"))),
                             [(), ()]),
    "ppermute": (lambda L, seen, a, b: seen(L.lax.ppermute(b, "x", [(0, 1), (1, 0)])), [("x",)]),
    "psum_scatter": (lambda L, seen, a, b: seen(L.lax.psum_scatter(b, "y", tiled=True)), [("y",)]),
    "all_to_all": (lambda L, seen, a, b: seen(L.lax.all_to_all(a, "y", 1, 1, tiled=True)), [(("x", "y"),)]),
    "zeros_like": (lambda L, seen, a, b: seen(L.numpy.zeros_like(a)) + seen(L.numpy.zeros(4)), [("x",)]),
    "fori_cast_carry": (lambda L, seen, a, b: seen(L.lax.fori_loop(0, 3, lambda i, c: c + a[0], cast(L, b, "x"))),
                        [("x",)]),
    "fori_varying_init": (lambda L, seen, a, b: seen(L.lax.fori_loop(0, 2, lambda i, c: c * 0 + b, a)), [("x",)]),
    "scan": (lambda L, seen, a, b: seen(L.lax.scan(lambda c, r: (c + L.lax.psum(r, "x"), r), b, a)[0]), [()]),
    "cond_same": (lambda L, seen, a, b: seen(L.lax.cond(True, lambda: a * 2, lambda: a + b)), [("x",)]),
    "grad": (lambda L, seen, a, b: seen(L.grad(lambda v: (v * b).sum())(a)), [("x",)]),
    "jit_inside": (lambda L, seen, a, b: seen(L.jit(lambda u, v: u * v)(a, b)), [("x",)]),
    "vmap_inside": (lambda L, seen, a, b: seen(L.vmap(lambda r: r + b)(a)), [("x",)]),
    # refused, with JAX's errors
    "out_spec_replicated": (lambda L, seen, a, b: a * 2, [()]),
    "out_spec_one_axis": (lambda L, seen, a, b: a + L.lax.axis_index("y"), [("x",)]),
    "out_specs_two": (lambda L, seen, a, b: (a, b, a), [(), (), ("x",)]),
    "psum_mixed": (lambda L, seen, a, b: L.lax.psum(a, ("x", "y")), [()]),
    "pcast_varying": (lambda L, seen, a, b: cast(L, a, "x"), [("x",)]),
    "pcast_mixed": (lambda L, seen, a, b: cast(L, a, ("x", "y")), [("x",)]),
    "pcast_set": (lambda L, seen, a, b: cast(L, a, {"x"}), [("x",)]),
    "pcast_to": (lambda L, seen, a, b: L.lax.pcast(a, "x", to="sideways"), [("x",)]),
    "all_gather_to": (lambda L, seen, a, b: L.lax.all_gather(a, "x", to="sideways"), [("x",)]),
    "fori_carry": (lambda L, seen, a, b: L.lax.fori_loop(0, 2, lambda i, c: (c[0] + a[0], c[1]), (b, b))[0], [("x",)]),
    "while_carry": (lambda L, seen, a, b: L.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + a[0]), (0, b))[1],
                    [("x",)]),
    "scan_carry": (lambda L, seen, a, b: L.lax.scan(lambda c, r: (c + r, r), b, a)[0], [("x",)]),
    "cond_branches": (lambda L, seen, a, b: L.lax.cond(True, lambda: a[0], lambda: b), [("x",)]),
    "cond_branches_other": (lambda L, seen, a, b: L.lax.cond(True, lambda: b, lambda: a[0]), [("x",)]),
}
REFUSED = {"out_spec_replicated", "out_spec_one_axis", "out_specs_two", "psum_mixed", "pcast_varying",
           "pcast_mixed", "pcast_set", "pcast_to", "all_gather_to", "fori_carry", "while_carry", "scan_carry",
           "cond_branches", "cond_branches_other"}
# JAX's fori_loop with static bounds is a scan over (i, carry): its messages name that carry
JAX_WORDS = {"scan body function": "fori_loop body function", "loop_carry[1][0]": "c[0]",
             "`jax.shard_map`": "`jaxprc.shard_map`", "'_rem_singleton'": "'<lambda>'"}


def run(L, name, jit):
    body, out_specs = PROGRAMS[name]
    types = []

    def seen(v):
        types.append(repr(L.typeof(v)))
        return v
    specs = tuple(P[L](*s) for s in out_specs)
    f = L.shard_map(lambda a, b: body(L, seen, a, b), mesh=AUTO[L], in_specs=(P[L]("x"), P[L]()),
                    out_specs=specs if len(specs) > 1 else specs[0])
    try:
        out = (L.jit(f) if jit else f)(A, B)
    except Exception as e:      # noqa: BLE001  (the error is compared with JAX's)
        return types, None, (type(e).__name__, str(e).split("\n--------------------")[0])
    return types, [np.asarray(o) for o in L.tree.leaves(out)], None


def message(text: str, jit: bool) -> str:
    for theirs, ours in JAX_WORDS.items():
        text = text.replace(theirs, ours)
    return text if jit else re.sub(r"out_specs\[\d+\] is", "out_specs is", text)


def main():
    for name in PROGRAMS:
        for jit in (False, True):
            where = f"{name} (jit={jit})"
            j_types, j_out, j_err = run(jax, name, jit)
            x_types, x_out, x_err = run(jx, name, jit)
            assert (j_err is not None) == (name in REFUSED), (where, j_err)
            if j_err:
                assert x_err is not None, (where, "jaxprc accepted what JAX refuses:", j_err)
                assert x_err[0] == j_err[0], (where, x_err, j_err)
                if name not in ("pcast_to", "all_gather_to"):      # JAX prints a set, in hash order
                    # eager, JAX's out_specs error names no result (it traced a wrapper): compared without
                    assert message(x_err[1], jit) == message(j_err[1], jit), (where, x_err[1], j_err[1])
                continue
            assert x_err is None, (where, x_err)
            assert x_types == j_types, (where, x_types, j_types)
            assert len(x_out) == len(j_out), where
            for k, (x, j) in enumerate(zip(x_out, j_out)):
                np.testing.assert_allclose(x, j, rtol=1e-6, err_msg=f"{where} result {k}")
    print("ok")


if __name__ == "__main__":
    main()
