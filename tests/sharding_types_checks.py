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


if __name__ == "__main__":
    run()
