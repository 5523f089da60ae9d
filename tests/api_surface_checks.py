"""Checks of the small public modules that need several CPU devices (mesh_utils on real devices,
Compiled's shardings over a mesh); run by test_api_surface.py in a process of its own."""
import sys

import numpy as np

import jaxprc as jx
from jaxprc.experimental import mesh_utils
from jaxprc.sharding import Mesh, NamedSharding, PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, run  # noqa: E402

@check
def device_mesh_of_the_process_devices():
    devices = mesh_utils.create_device_mesh((2, 2))
    assert [d.id for d in devices.flat] == [0, 1, 2, 3] and devices.shape == (2, 2)
    hybrid = mesh_utils.create_hybrid_device_mesh((2, 2), (1, 1), process_is_granule=True)
    assert (hybrid == devices).all()
    mesh = Mesh(devices, ("a", "b"))
    f = jx.jit(lambda x: x * 2, in_shardings=NamedSharding(mesh, P("a", "b")))
    np.testing.assert_array_equal(np.asarray(f(np.ones((4, 4), np.float32))), 2 * np.ones((4, 4)))


@check
def compiled_shardings_over_a_mesh():
    mesh = jx.make_mesh((4,), ("i",))
    split = NamedSharding(mesh, P("i"))
    f = jx.jit(lambda x, y: (x * 2, y + 1), in_shardings=(split, None), out_shardings=(split, None))
    compiled = f.lower(np.ones(8, np.float32), np.ones(3, np.float32)).compile()
    (x_in, y_in), _ = compiled.input_shardings
    assert x_in == split and y_in.spec == P(None) and y_in.mesh == mesh
    assert compiled.output_shardings[0] == split


run()
