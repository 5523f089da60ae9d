"""Shardings in types through control flow, random samplers and iota, jaxprc vs jax on 8 CPU devices
(run by test_sharding_rules_oracle.py in a process of its own): the result types under jit, the
values, and JAX's errors when branches or loop carries disagree or a scan runs over a split axis."""
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from placement_oracle_checks import compare  # noqa: E402  (it sets up 8 devices before importing jax)

import numpy as np  # noqa: E402

X = np.arange(32, dtype=np.float32).reshape(8, 4)


def cases(L):
    n, lax, P = L.numpy, L.lax, L.sharding.PartitionSpec
    mesh = L.make_mesh((2, 4), ("x", "y"))

    def typed(f, *specs):
        """The result type of jit(f) on X laid out as each spec, under the mesh, and its values."""
        def call():
            with L.set_mesh(mesh):
                out = L.jit(f)(*[L.device_put(X, P(*s)) for s in specs])
                return [(repr(L.typeof(o)), np.asarray(o).tolist()) for o in L.tree.leaves(out)]
        return call
    key = lambda: L.random.key(0)       # noqa: E731
    return {
        "cond": typed(lambda v: lax.cond(True, lambda u: u * 2, lambda u: u + 1, v), ("x", "y")),
        "cond_branches_differ": typed(lambda v, w: lax.cond(True, lambda: v, lambda: w), ("x", "y"), ("x", None)),
        "fori": typed(lambda v: lax.fori_loop(0, 3, lambda i, c: c * 2, v), ("x", "y")),
        "fori_carry_differs": typed(lambda v, w: lax.fori_loop(0, 3, lambda i, c: c + w, v), ("x", None), ("x", "y")),
        "while": typed(lambda v: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, v))[1],
                       ("x", "y")),
        "scan_over_whole_axis": typed(lambda v: lax.scan(lambda c, r: (c, r * 2), n.zeros(8), v.T), (None, "x")),
        "scan_carry_gets_split": typed(lambda v: lax.scan(lambda c, r: (c + r, r), n.zeros(8), v.T), (None, "x")),
        "scan_over_split_axis": typed(lambda v: lax.scan(lambda c, r: (c + r, r * 2), n.zeros(4), v)[1], ("x", None)),
        "normal": typed(lambda: L.random.normal(key(), (8, 4), out_sharding=P("x"))),
        "uniform": typed(lambda: L.random.uniform(key(), (8, 4), out_sharding=P("x", "y"))),
        "bits": typed(lambda: L.random.bits(key(), (8, 4), out_sharding=P(None, "y"))),
        "randint": typed(lambda: L.random.randint(key(), (8,), 0, 5, out_sharding=P("x"))),
        "iota": typed(lambda: lax.broadcasted_iota(n.int32, (8, 4), 0, out_sharding=P("x"))),
        "pad": typed(lambda v: n.pad(v, ((1, 1), (0, 0))), ("x", "y")),
        "dynamic_slice": typed(lambda v: lax.dynamic_slice(v, (0, 1), (8, 2)), ("x", None)),
    }


if __name__ == "__main__":
    compare(cases)
