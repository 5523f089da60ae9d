"""checkify of shard_map bodies over 4 CPU devices (run by test_checkify.py in a process of its
own): each device's error comes out stacked, as JAX's."""
import sys

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.experimental import checkify as ck
from jaxprc.sharding import PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, run  # noqa: E402
from roundtrip import assert_round_trip  # noqa: E402

mesh = jx.make_mesh((4,), ("x",))


def body(v):
    ck.check(jnp.all(v > 0), "block starting {} not positive", v[0])
    return v[jnp.int32(2) * v.astype(np.int32)[:1]] / lax.psum(v, "x")


@check
def shard_map_errors_per_device():
    f = ck.checkify(jx.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")), errors=ck.all_checks)
    x = np.array([1, 0, 2, 3, 1, 2, -1, 1], np.float32) + 0.0
    err, out = jx.jit(f)(x)
    assert err.get() == (     # a failed check has a smaller code than the gather's index check
        "at mapped index 0: block starting 1.0 not positive (`check` failed)\n"
        "at mapped index 1: out-of-bounds indexing for array of shape (2,): index 4 is out of bounds for "
        "axis 0 with size 2. \n"
        "at mapped index 2: out-of-bounds indexing for array of shape (2,): index 2 is out of bounds for "
        "axis 0 with size 2. \n"
        "at mapped index 3: block starting -1.0 not positive (`check` failed)"), err.get()
    assert_round_trip(jx.make_jaxpr(f)(x))
    err, out = f(np.full(8, 0.25, np.float32))
    assert err.get() is None and out.shape == (8,)
    sm = jx.shard_map(lambda v: v / lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    assert "shard_map" in str(jx.make_jaxpr(ck.checkify(sm))(x))      # nothing to check: kept whole

    def then_check(v):
        out = jx.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(v)
        ck.check(out[0] < 0, "out0 is {}", out[0])
        return out
    err, _ = ck.checkify(then_check)(np.full(8, 0.25, np.float32))
    # the error is per device after the shard_map, so a later failure shows at every index
    assert err.get() == "\n".join(f"at mapped index {i}: out0 is 0.25 (`check` failed)" for i in range(4))
    err, _ = ck.checkify(then_check)(x)
    assert err.get().startswith("at mapped index 0: block starting 1.0"), err.get()


run()
