"""Placement as JAX 0.10.2 has it, jaxprc vs jax on 8 CPU devices (run by test_placement_oracle.py
in a process of its own, so both clients start with 8 devices): device=/out_sharding= on array
creation, committed and uncommitted arrays, jit(device=), auto_axes/explicit_axes, lax.full_like's
placement, and JAX's errors (incompatible devices, specs a mesh's axis types refuse)."""
import os
import warnings

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402

warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
X = np.arange(32, dtype=np.float32).reshape(8, 4)


def describe(value):
    """What the comparison looks at: a result's type, devices, committedness and sharding; values."""
    if isinstance(value, (tuple, list)):
        return [describe(v) for v in value]
    if not hasattr(value, "devices"):
        return value
    return (repr(type(value).__module__.split(".")[0] in ("jax", "jaxlib", "jaxprc")),
            repr(jax.typeof(value)) if isinstance(value, jax.Array) else repr(jx.typeof(value)),
            sorted(d.id for d in value.devices()), value.committed, repr(value.sharding), np.asarray(value).tolist())


def cases(L):
    """name -> thunk, written once for both libraries (L is jax or jaxprc)."""
    n, P, d = L.numpy, L.sharding.PartitionSpec, L.devices()
    explicit = L.make_mesh((2, 4), ("x", "y"))
    auto = L.make_mesh((2, 4), ("x", "y"), axis_types=(L.sharding.AxisType.Auto,) * 2)
    on = lambda i: L.device_put(np.ones(4, np.float32), d[i])      # noqa: E731
    in_mesh = lambda f: lambda: _with(L.set_mesh(explicit), f)      # noqa: E731
    return {
        "array_device": lambda: n.array([1.0, 2.0], device=d[1]),
        "asarray_device": lambda: n.asarray(X, device=d[2]),
        "arange_device": lambda: n.arange(8, device=d[3]),
        "zeros_device": lambda: n.zeros(3, device=d[3]),
        "both_placements": lambda: n.array([1.0], device=d[1], out_sharding=P("x")),
        "array_out_sharding": in_mesh(lambda: n.array(X, out_sharding=P("x", "y"))),
        "asarray_numpy_as_is": in_mesh(lambda: n.asarray(X, out_sharding=P("x"))),
        "arange_out_sharding": in_mesh(lambda: n.arange(8, out_sharding=P("x"))),
        "uncommitted": lambda: n.ones(4) * 2,
        "put_commits_default": lambda: L.device_put(np.ones(3, np.float32), d[0]),
        "put_commits_array": lambda: L.device_put(n.ones(3), d[0]),
        "put_nowhere_stays": lambda: L.device_put(n.ones(3)),
        "follows_committed": lambda: n.ones(4) + on(2),
        "reshape_follows": lambda: on(1).reshape((2, 2)),
        "committed_mix": lambda: on(0) + on(1),
        "committed_jit_mix": lambda: L.jit(lambda u, v: u * v)(on(2), on(3)),
        "committed_jit_tree": lambda: L.jit(lambda x, ys: x + ys[0] + ys[1])(on(1), (on(1), on(2))),
        "jit_device": lambda: L.jit(lambda a, b: a + b, device=d[4])(1, 2),
        "jit_device_moves": lambda: L.jit(lambda a, b: a + b, device=d[4])(on(2), on(3)),
        "jit_closed_over": lambda: L.jit(lambda: L.lax.add(3.0, 4.0), device=d[1])(),
        "full_like_committed": lambda: L.lax.full_like(on(1), 2.0),
        "full_like_sharding": lambda: L.lax.full_like(n.arange(8.0), 1.0,
                                                       sharding=L.sharding.NamedSharding(auto, P("x"))),
        "auto_axes": in_mesh(lambda: L.sharding.auto_axes(lambda a: a * 2, out_sharding=P("x"))(
            L.device_put(X, P("x", "y")))),
        "auto_axes_jit": in_mesh(lambda: L.jit(L.sharding.auto_axes(lambda v: v @ v.T, out_sharding=P("x", None)))(
            L.device_put(X, P("x", "y")))),
        "auto_axes_kwarg": in_mesh(lambda: L.sharding.auto_axes(lambda a: a + 1)(L.device_put(X, P("x")),
                                                                                 out_sharding=P(None, "y"))),
        "auto_axes_missing": in_mesh(lambda: L.sharding.auto_axes(lambda a: a)(X)),
        # eagerly JAX leaves the result laid out as inside (P('x')) though its type is not split:
        # compared are the type and the values
        "explicit_axes": lambda: _with(L.set_mesh(auto), lambda: _type_and_values(L, L.sharding.explicit_axes(
            lambda a: a * 2, in_sharding=P("x"))(X))),
        "explicit_axes_jit": lambda: _with(L.set_mesh(auto), lambda: _inside_and_out(L, lambda f: L.jit(
            L.sharding.explicit_axes(f, in_sharding=P("x")))(X))),
        "explicit_axes_no_mesh": lambda: L.sharding.explicit_axes(lambda a: a, in_sharding=P("x"))(X),
        "unreduced_auto": lambda: L.sharding.NamedSharding(auto, P(None, "y", unreduced={"x"})),
        "reduced_auto": lambda: L.sharding.NamedSharding(auto, P(None, "y", reduced={"x"})),
        "unconstrained_explicit": lambda: L.sharding.NamedSharding(explicit, P(P.UNCONSTRAINED, "y")),
        "unconstrained_out": lambda: L.jit(lambda a: a * 2, out_shardings=L.sharding.NamedSharding(
            auto, P(P.UNCONSTRAINED, "y")))(X),
        "unconstrained_constraint": lambda: L.jit(lambda a: L.lax.with_sharding_constraint(
            a, L.sharding.NamedSharding(auto, P(P.UNCONSTRAINED, "y"))))(X),
    }


def _type_and_values(L, value):
    return repr(L.typeof(value)), np.asarray(value).tolist()


def _inside_and_out(L, call):
    """The type of the argument inside the function ``call`` runs, and its result."""
    seen = []

    def f(a):
        seen.append(repr(L.typeof(a)))
        return a.sum(0) * 2
    out = call(f)
    return seen, _type_and_values(L, out)     # (jaxprc names the result's layout over the switched mesh)


def _with(context, fn):
    with context:
        return fn()


def run(cases, L, name):
    try:
        return describe(cases(L)[name]()), None
    except Exception as e:       # noqa: BLE001  (the error is compared with JAX's)
        return None, (type(e).__name__, str(e).split("\n--------------------")[0])


# JAX names an eager `*` after jnp.multiply, jaxprc after its primitive; JAX's fori_loop with
# static bounds is a scan over (i, carry), and its messages name that carry
JAX_WORDS = {"of multiply with": "of mul with", "scan body function": "fori_loop body function",
             "input carry component loop_carry[1]": "input carry c"}


def compare(cases):
    """Each case of ``cases(L)`` run with both libraries: the same results, or the same errors."""
    for name in cases(jax):
        (j, j_err), (x, x_err) = run(cases, jax, name), run(cases, jx, name)
        if j_err is not None:
            assert x_err is not None, (name, "jaxprc accepted what JAX refuses:", j_err, x)
            theirs = j_err[1]
            for a, b in JAX_WORDS.items():
                theirs = theirs.replace(a, b)
            assert x_err == (j_err[0], theirs), (name, x_err, j_err)
            continue
        assert x_err is None, (name, x_err)
        assert x == j, (name, x, j)
    print("ok")


if __name__ == "__main__":
    compare(cases)
