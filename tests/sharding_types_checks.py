"""Checks of JAX 0.10's sharding API (axis types, mesh contexts, specs) and of shardings in types,
over 8 CPU devices; run by test_sharding_types.py in a process of its own."""
import pickle
import sys
import threading

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402

mesh = jx.make_mesh((2, 4), ("x", "y"))                       # Explicit axes (make_mesh's default)
auto = jx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


@check
def partition_specs():
    p = P("x", None, unreduced={"y"})
    assert repr(p) == "P('x', None, unreduced={'y'})" and p.unreduced == frozenset({"y"})
    assert repr(P("x", reduced={"y"})) == "P('x', reduced={'y'})"
    assert p != P("x", None) and P("x") != P("x", None) and hash(P("x")) == hash(P("x", None))
    assert pickle.loads(pickle.dumps(p)) == p
    assert repr(P(P.UNCONSTRAINED, "x")) == "P(UNCONSTRAINED, 'x')"
    assert repr(p._normalized_spec_for_aval(3)) == "P('x', None, None, unreduced={'y'})"
    raises(ValueError, lambda: P("x", unreduced={"x"}), "cannot overlap with unreduced axes")
    raises(ValueError, lambda: P(unreduced={"y"}, reduced={"y"}), "cannot overlap")
    raises(TypeError, lambda: P(unreduced="y"), "should of type `frozenset` or `set`")


@check
def abstract_meshes():
    am = mesh.abstract_mesh
    assert repr(am) == ("AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, "
                        "num_cores=None, platform=cpu)")
    plain = AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    assert repr(plain) == "AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Auto))"
    assert plain.abstract_mesh is plain and plain.size == 8
    s = NamedSharding(plain, P("x"))
    assert repr(s) == "NamedSharding(mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Auto)), spec=P('x',))"
    assert s.num_devices == 8 and s == NamedSharding(plain, P("x")) and s != NamedSharding(plain, P("x", None))
    raises(ValueError, lambda: s.device_set, "not implemented for `jax.sharding.AbstractMesh`")
    raises(ValueError, lambda: plain.devices, "AbstractMesh does not implement devices")
    raises(ValueError, lambda: NamedSharding(plain, P("z")), "Resource axis: z")


@check
def mesh_contexts():
    assert repr(jx.sharding.get_mesh()) == "Mesh(axis_sizes=(), axis_names=())"
    assert repr(jx.sharding.get_abstract_mesh()) == "AbstractMesh((), axis_types=())"
    with jx.set_mesh(mesh) as m:
        assert m is mesh and jx.sharding.get_mesh() is mesh
        assert jx.sharding.get_abstract_mesh() == mesh.abstract_mesh
        seen = []                                   # meshes are per thread, as JAX's
        t = threading.Thread(target=lambda: seen.append(jx.sharding.get_mesh().empty))
        t.start(); t.join()
        assert seen == [True]
    assert jx.sharding.get_mesh().empty
    with jx.sharding.use_abstract_mesh(mesh.abstract_mesh):
        assert jx.sharding.get_abstract_mesh() == mesh.abstract_mesh and jx.sharding.get_mesh().empty
    raises(ValueError, lambda: jx.set_mesh(mesh.abstract_mesh), "Expected mesh of type `jax.sharding.Mesh`")
    with auto:                    # `with mesh:` names the mesh of PartitionSpecs only
        assert jx.sharding.get_mesh().empty
        f = jx.jit(lambda a: jx.lax.with_sharding_constraint(a, P("x")))
        assert f(jnp.ones(8)).sharding == NamedSharding(auto, P("x"))


@check
def mesh_context_in_other_threads():
    errors = []

    def body():
        try:
            with auto:
                out = jx.jit(lambda a: a * 2, in_shardings=P("y"))(np.arange(8.0, dtype=np.float32))
            np.testing.assert_array_equal(np.asarray(out), np.arange(8.0) * 2)
            with jx.set_mesh(mesh):
                assert jx.sharding.get_abstract_mesh() == mesh.abstract_mesh
        except Exception as e:   # noqa: BLE001  (reported by the main thread)
            errors.append(e)
    threads = [threading.Thread(target=body) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@check
def pjit_is_jit_with_shardings():
    from jaxprc.experimental.pjit import pjit
    s = NamedSharding(auto, P("x", "y"))
    f = pjit(lambda a, b: a + b, in_shardings=(s, None), out_shardings=NamedSharding(auto, P("y")))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = f(x, 1.0)
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    assert out.sharding == NamedSharding(auto, P("y"))
    g = pjit(lambda a, n: a * n, static_argnums=1)
    np.testing.assert_array_equal(np.asarray(g(x, 3)), x * 3)


# ---------------------------------------------------------------- shardings in types

X = np.arange(32, dtype=np.float32).reshape(8, 4) / 8
W = np.arange(16, dtype=np.float32).reshape(4, 4) / 4


def put(value, *spec, on=mesh):
    return jx.device_put(value, NamedSharding(on, P(*spec)))


def spec(value) -> tuple:
    """The spec of ``value``'s type, one entry per dimension (empty: no sharding in the type)."""
    t = jx.typeof(value)
    return tuple(t.sharding.spec) if t.sharding_in_type is not None else ()


def placed_as_typed(value):
    """A result's layout is the one its type names (on the concrete mesh)."""
    s = value.sharding       # as given to device_put (P('y',)), or as the type writes it (P('y', None))
    assert s.mesh == mesh and s.spec._normalized_spec_for_aval(value.ndim) == jx.typeof(value).sharding.spec, (
        s, jx.typeof(value))


@check
def arrays_carry_their_explicit_sharding():
    x = put(X, "x", "y")
    t = jx.typeof(x)
    assert str(t) == "float32[8@x,4@y]" and repr(t) == "ShapedArray(float32[8@x,4@y])"
    assert t.sharding == NamedSharding(mesh.abstract_mesh, P("x", "y"))
    assert jx.typeof(put(X, ("x", "y"))).str_short() == "f32[8@(x,y),4]"
    assert jx.typeof(put(X, "x", on=auto)).sharding_in_type is None      # Auto axes are not typed
    mixed = jx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    assert str(jx.typeof(put(X, "x", "y", on=mixed))) == "float32[8@x,4]"
    plain = jx.typeof(X)
    assert plain.sharding_in_type is None and repr(plain.sharding) == (
        "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None, None))")


@check
def rules_of_the_common_families():
    x, w = put(X, "x", "y"), put(W, "y", None)
    cases = {
        "sin": (lambda: jnp.sin(x), np.sin(X), ("x", "y")),
        "add unsplit": (lambda: x + jnp.ones((8, 4)), X + 1, ("x", "y")),
        "broadcast row": (lambda: x + put(np.ones(4, np.float32), "y"), X + 1, ("x", "y")),
        "broadcast new axis": (lambda: x[:, None, :] * jnp.ones((8, 3, 4)), X[:, None, :] * np.ones((8, 3, 4)),
                               ("x", None, "y")),
        "sum 0": (lambda: x.sum(0), X.sum(0), ("y",)),
        "max 1": (lambda: x.max(1), X.max(1), ("x",)),
        "sum all": (lambda: x.sum(), X.sum(), ()),
        "argmax": (lambda: jnp.argmax(x, axis=1), X.argmax(1), ("x",)),
        "transpose": (lambda: x.T, X.T, ("y", "x")),
        "astype": (lambda: x.astype(jnp.int32), X.astype(np.int32), ("x", "y")),
        "where": (lambda: jnp.where(x > 1, x, 0.0), np.where(X > 1, X, 0), ("x", "y")),
        "split dim": (lambda: put(X, "x", None).reshape(2, 4, 4), X.reshape(2, 4, 4), ("x", None, None)),
        "merge dims": (lambda: put(X, "x", None).reshape(32), X.reshape(32), ("x",)),
        "dot free": (lambda: put(X, "x", None) @ put(W, None, "y"), X @ W, ("x", "y")),
        "dot one side contracted": (lambda: x @ put(W, None, None), X @ W, ("x", None)),
        "dot other side": (lambda: put(X, "x", None) @ put(W, "x", None), X @ W, ("x", None)),
        "dot out_sharding": (lambda: jnp.dot(x, w, out_sharding=NamedSharding(mesh, P("x", None))), X @ W,
                             ("x", None)),
        "batched einsum": (lambda: jnp.einsum("bij,bjk->bik", put(np.stack([X, X]), "x", None, None),
                                              put(np.stack([W, W]), None, None, "y")),
                           np.stack([X @ W, X @ W]), ("x", None, "y")),
        "einsum out_sharding": (lambda: jnp.einsum("ij,jk->ik", x, w, out_sharding=NamedSharding(mesh, P("x", None))),
                                X @ W, ("x", None)),
        "reshape out_sharding": (lambda: jnp.reshape(put(X, None, "y"), (32,), out_sharding=NamedSharding(mesh, P("y"))),
                                 X.reshape(32), ("y",)),
        "reshard": (lambda: jx.sharding.reshard(x, NamedSharding(mesh, P("y", "x"))), X, ("y", "x")),
        "concatenate": (lambda: jnp.concatenate([x, x], axis=1), np.concatenate([X, X], 1), ("x", "y")),
        "slice of whole rows": (lambda: jx.lax.slice(x, (0, 1), (8, 3)), X[:, 1:3], ("x", None)),
        "nested jit": (lambda: jx.jit(jnp.sin)(x) * 2, np.sin(X) * 2, ("x", "y")),
        "cond": (lambda: jx.lax.cond(True, lambda b: b * 2, lambda b: b + 1, x), X * 2, ("x", "y")),
        "fori_loop": (lambda: jx.lax.fori_loop(0, 3, lambda i, c: c * 2, x), X * 8, ("x", "y")),
        "softmax": (lambda: jx.nn.softmax(x, axis=1), np.exp(X) / np.exp(X).sum(1, keepdims=True), ("x", "y")),
        "sort along a whole dim": (lambda: jnp.sort(put(X, "x", None), axis=1), np.sort(X, 1), ("x", None)),
        "cumsum along a whole dim": (lambda: jnp.cumsum(put(X, "x", None), axis=1), np.cumsum(X, 1), ("x", None)),
        "ones_like": (lambda: jnp.ones_like(x), np.ones_like(X), ("x", "y")),
        "zeros out_sharding": (lambda: jnp.zeros((8, 4), out_sharding=NamedSharding(mesh, P(None, "x"))),
                               np.zeros((8, 4)), (None, "x")),
        "full device": (lambda: jnp.full((8, 4), 2.0, device=NamedSharding(mesh, P("y"))), np.full((8, 4), 2.0),
                        ("y", None)),
    }
    jitted = {}
    for name, (fn, expected, want) in cases.items():
        out = fn()
        assert spec(out) == want, (name, jx.typeof(out), want)
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6, err_msg=name)
        if want:
            placed_as_typed(out)
        jitted[name] = jx.jit(fn)()          # the same program traced once: same type and values
        assert jx.typeof(jitted[name]) == jx.typeof(out), name
        np.testing.assert_allclose(np.asarray(jitted[name]), expected, rtol=1e-6, err_msg=name)


@check
def rules_raise_as_jax_does():
    from jaxprc.ir.sharding_type import ShardingTypeError
    x = put(X, "x", "y")
    raises(ShardingTypeError, lambda: x + put(X, "y", "x"),
           "add got incompatible shardings for broadcasting: ('x', 'y'), ('y', 'x').")
    raises(ShardingTypeError, lambda: x @ put(W, "y", None),
           "Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please "
           "specify the output sharding via the `out_sharding` parameter. Got lhs_contracting_spec=('y',) and "
           "rhs_contracting_spec=('y',)")
    raises(ShardingTypeError, lambda: put(X, "x", None) @ put(W, None, "x"),
           "dot_general operation with inputs: f32[8@x,4], f32[4,4@x] produces an illegally sharded result: "
           "f32[8@x,4@x]")
    raises(ShardingTypeError, lambda: put(X, None, "y").reshape(32),
           "This reshape is not supported. Please specify the sharding of the output via the `out_sharding` "
           "argument of jax.lax.reshape. Got operand type: float32[8,4@y], new sizes: (32,)")
    raises(ValueError, lambda: jnp.dot(x, put(W, "y", None), out_sharding=P("x", None)),
           "Using PartitionSpec when you are not under a mesh context is not allowed")
    raises(ShardingTypeError, lambda: jnp.cumsum(x, axis=1),
           "Input should be unsharded over the axis being reduced. Got input type=float32[8@x,4@y] and axis=1")
    raises(ShardingTypeError, lambda: jnp.sort(x, axis=0), "Arguments to sort must be unsharded over the sorting "
           "dimension. Got arg sharding=NamedSharding(mesh=AbstractMesh('x': 2, 'y': 4")
    raises(ValueError, lambda: jx.sharding.reshard(x, P(None, "x")),
           "Using PartitionSpec when you are not under a mesh context is not allowed")
    with jx.set_mesh(mesh):                  # a PartitionSpec of the context mesh
        out = jnp.dot(x, put(W, "y", None), out_sharding=P("x", None))
    assert spec(out) == ("x", None)
    np.testing.assert_allclose(np.asarray(out), X @ W, rtol=1e-6)


@check
def transformations_keep_shardings():
    x = put(X, "x", "y")
    f = lambda a: (jnp.sin(a) * a).sum()
    g = jx.grad(f)(x)
    assert spec(g) == ("x", "y")
    np.testing.assert_allclose(np.asarray(g), np.cos(X) * X + np.sin(X), rtol=1e-5)
    assert spec(jx.jit(jx.grad(f))(x)) == ("x", "y")
    assert spec(jx.grad(lambda a: jx.jit(jnp.sin)(a).sum())(x)) == ("x", "y")    # a call's types are its body's
    # dot_general's transpose contracts split dimensions (no ambiguity error inside grad): each
    # cotangent takes its primal's type, as JAX's transposes give them
    b = put(W, None, None)
    h = lambda a, b: jnp.sum(jnp.tanh(a @ b))
    ga, gb = jx.grad(h, argnums=(0, 1))(x, b)
    assert (jx.typeof(ga), jx.typeof(gb)) == (jx.typeof(x), jx.typeof(b)), (jx.typeof(ga), jx.typeof(gb))
    ea, eb = jx.grad(h, argnums=(0, 1))(X, W)
    np.testing.assert_allclose(np.asarray(ga), np.asarray(ea), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gb), np.asarray(eb), rtol=1e-5)
    out, tangent = jx.jvp(jnp.sin, (x,), (x,))
    assert spec(out) == spec(tangent) == ("x", "y")
    v = jx.vmap(lambda a: jnp.sin(a).sum())(x)
    assert spec(v) == ("x",)
    np.testing.assert_allclose(np.asarray(v), np.sin(X).sum(1), rtol=1e-5)


@check
def sharded_types_round_trip_through_text():
    from jaxprc.ir.core import JaxprTypeError
    from jaxprc.ir.parser import ParseError, parse
    from jaxprc.ir.verify import verify
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from roundtrip import assert_round_trip
    x, w = put(X, "x", "y"), put(W, None, "y")
    f = lambda a, b: (jnp.sin(a) @ b).sum(0) + jx.sharding.reshard(a, NamedSharding(mesh, P(("x", "y"), None))).sum(0)
    cj = jx.make_jaxpr(f)(x, w)
    text = str(cj)
    assert text.startswith("mesh x=2, y=4\n{ lambda ; a:f32[8@x,4@y] b:f32[4,4@y]. let"), text
    assert "f32[8@(x,y),4] = sharding_constraint" in text and "e:f32[4@y] = reduce_sum" in text, text
    back = assert_round_trip(cj)
    out = jx.jit(jx.jaxpr_as_fun(back))(x, w)[0]          # the parsed program runs, sharded as typed
    assert spec(out) == ("y",)
    placed_as_typed(out)
    np.testing.assert_allclose(np.asarray(out), (np.sin(X) @ W).sum(0) + X.sum(0), rtol=1e-5)
    # an edited type that breaks the sharding rule is refused, naming the equation
    raises(ParseError, lambda: parse(text.replace("e:f32[4@y] = reduce_sum", "e:f32[4] = reduce_sum")),
           "declared type f32[4] of 'e' differs from the type reduce_sum gives; expected f32[4@y]")
    eqn = back.jaxpr.eqns[2]
    eqn.outvars[0].aval = eqn.outvars[0].aval.update(sharding=None)
    raises(JaxprTypeError, lambda: verify(back), "reduce_sum")
    raises(ParseError, lambda: parse(text.replace("mesh x=2, y=4\n", "")), "without a mesh line")
    raises(ParseError, lambda: parse(text.replace("a:f32[8@x,4@y] b", "a:f32[8@z,4@y] b")), "mesh axis 'z'")
    raises(ParseError, lambda: parse(text.replace("mesh x=2, y=4", "mesh x=2, y=four")), "malformed mesh line")
    raises(ParseError, lambda: parse(text.replace("a:f32[8@x,4@y] b", "a:f32[8@x,4@x] b")), "the sharding of type")
    auto_axis = parse("mesh x=2, y=4:Auto\n{ lambda ; a:f32[8@x,4]. let b:f32[8@x,4] = sin a in (b,) }")
    assert str(auto_axis).startswith("mesh x=2, y=4:Auto\n")


@check
def command_line_runs_a_sharded_program():
    import contextlib
    import io
    import tempfile
    from jaxprc.tools.cli import main
    text = ("mesh x=2, y=4\n{ lambda ; a:f32[8@x,4@y] b:f32[4,4@y]. let\n"
            "    c:f32[8@x,4@y] = dot_general[dimension_numbers=(((1,), (0,)), ((), ())) precision=None "
            "preferred_element_type=f32] a b\n    d:f32[4@y] = reduce_sum[axes=(0,)] c\n  in (d,) }\n")
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(text)
        f.flush()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["run", "--devices", "8", "-i", "a=1.0", "-i", "b=0.5", f.name]) == 0
    assert out.getvalue().strip() == "out0:f32[4@y] = [16., 16., 16., 16.]", out.getvalue()


@check
def control_flow_samplers_and_iota_keep_shardings():
    a, b = put(X, "x", "y"), put(X, "x", None)
    f = jx.jit(lambda v: jx.lax.fori_loop(0, 3, lambda i, c: c * 2, v))
    assert spec(f(a)) == ("x", "y") and np.array_equal(np.asarray(f(a)), X * 8)
    raises(TypeError, lambda: jx.jit(lambda v, w: jx.lax.cond(True, lambda: v, lambda: w))(a, b),
           "The output of true_fun has type float32[8@x,4@y] but the corresponding output of false_fun has type "
           "float32[8@x,4].")
    raises(TypeError, lambda: jx.jit(lambda v, w: jx.lax.fori_loop(0, 3, lambda i, c: c + w, v))(b, a),
           "The input carry c has type float32[8@x,4] but the corresponding output carry component has type "
           "float32[8@x,4@y].")
    ys = jx.jit(lambda v: jx.lax.scan(lambda c, r: (c, r * 2), jnp.zeros(8), v)[1])(put(X.T, None, "x"))
    assert spec(ys) == (None, "x") and np.array_equal(np.asarray(ys), X.T * 2)
    raises(ValueError, lambda: jx.jit(lambda v: jx.lax.scan(lambda c, r: (c + r, r), jnp.zeros(4), v))(b),
           "0th dimension of all xs should be replicated. Got P('x', None)")
    with jx.set_mesh(mesh):
        key = jx.random.key(0)
        drawn = jx.jit(lambda k: jx.random.normal(k, (8, 4), out_sharding=P("x")))(key)
        assert spec(drawn) == ("x", None)          # the same draws as without a layout
        np.testing.assert_array_equal(np.asarray(drawn), np.asarray(jx.random.normal(key, (8, 4))))
        ints = jx.jit(lambda: jx.lax.broadcasted_iota(jnp.int32, (8, 4), 0, out_sharding=P("x")))()
        assert spec(ints) == ("x", None) and np.array_equal(np.asarray(ints), np.arange(8)[:, None].repeat(4, 1))


if __name__ == "__main__":
    run()
