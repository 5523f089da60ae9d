"""pshuffle, pswapaxes (all_to_all with axis_index_groups), ragged_all_to_all and nested pmap: the
multi-device checks (tests/collectives2_checks.py) run on 8 CPU devices in a process of their own;
typing, text and the XLA:CPU error on one device here."""
import numpy as np
import pytest

import jaxprc as jx
from jaxprc import lax
from jaxprc.ir.core import JaxprTypeError
from jaxprc.sharding import PartitionSpec as P

from multidevice import run_script
from roundtrip import assert_round_trip

MESH = jx.make_mesh((1,), ("i",))
F, I = np.zeros(4, np.float32), np.zeros(2, np.int32)


def test_collectives2_checks_on_8_cpu_devices():
    run_script("collectives2_checks.py")


def on_mesh(fn, *args, out=P("i")):
    return jx.shard_map(fn, mesh=MESH, in_specs=(P("i"),) * len(args), out_specs=out)


def ragged(*args, **kw):
    return lax.ragged_all_to_all(*args, axis_name="i", **kw)


def test_text_round_trip():
    for fn, args in ((lambda a, b, *r: ragged(a, b, *r), (F, F, I, I, I, I)),
                     (lambda a, b, *r: ragged(a, b, *r, axis_index_groups=[[0]]), (F, F, I, I, I, I)),
                     (lambda a: lax.pswapaxes(a, "i", 0, axis_index_groups=[[0]]), (F[:1],)),
                     (lambda a: lax.pshuffle(a, "i", [0]), (F,))):
        cj = jx.make_jaxpr(on_mesh(fn, *args))(*args)
        assert_round_trip(cj)
    cj = jx.make_jaxpr(on_mesh(lambda a: lax.pswapaxes(a, "i", 0, axis_index_groups=[[0]]), F[:1]))(F[:1])
    assert "axis_index_groups=((0,),)" in str(cj)


def test_pswapaxes_and_pshuffle_on_one_device_are_identities():
    x = np.arange(3, dtype=np.float32)
    outs = jx.jit(on_mesh(lambda a: (lax.pswapaxes(a[:1], "i", 0), lax.pshuffle(a, "i", [0])), x,
                          out=(P("i"), P("i"))))(x)
    np.testing.assert_array_equal(np.asarray(outs[0]), x[:1])
    np.testing.assert_array_equal(np.asarray(outs[1]), x)


@pytest.mark.parametrize("args, match", [
    ((F, F, F, I, I, I), "input_offsets must be integer type"),
    ((F, F, I, I.reshape(1, 2), I, I), "send_sizes must be rank 1"),
    ((F, F, I, I, np.zeros(0, np.int32), I), "output_offsets must be rank 1 with positive"),
    ((F, F, I, I, I, np.zeros(3, np.int32)), "must have one shape"),
    ((F, F.astype(np.int32), I, I, I, I), "must have one dtype"),
])
def test_ragged_all_to_all_typing_errors(args, match):
    with pytest.raises(JaxprTypeError, match=match):
        jx.make_jaxpr(on_mesh(ragged, *args))(*args)


def test_ragged_all_to_all_params_and_scope():
    with pytest.raises(NameError, match="ragged_all_to_all: unbound axis name: 'i'"):
        ragged(F, F, I, I, I, I)
    with pytest.raises(ValueError, match="cover all indices exactly once"):
        jx.make_jaxpr(on_mesh(lambda *a: ragged(*a, axis_index_groups=[[1]]), F, F, I, I, I, I))(F, F, I, I, I, I)


def test_ragged_all_to_all_lowers_as_jax_and_xla_cpu_reports_it():
    """The custom call JAX emits; on CPU XLA refuses to compile it, and says so."""
    f = jx.jit(on_mesh(ragged, F, F, I, I, I, I))
    text = f.lower(F, F, I, I, I, I).as_text()
    assert ("stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) "
            "{api_version = 4 : i32, backend_config = {channel_id = 1 : i64, replica_groups = dense<0> : "
            "tensor<1x1xi64>}}") in text, text
    with pytest.raises(Exception, match="ragged-all-to-all. is not supported by XLA:CPU"):
        f(F, F, I, I, I, I)


def test_collectives_over_a_vmap_axis_match_a_loop():
    """Example b of pswapaxes gets row b of every example; pshuffle's gets example perm[b]'s; a
    partial ppermute leaves zeros; an operand not batched is the same in every example."""
    x = np.arange(4 * 4 * 3, dtype=np.float32).reshape(4, 4, 3)
    swapped = jx.vmap(lambda v: lax.pswapaxes(v, "b", 0), axis_name="b")(x)
    np.testing.assert_array_equal(np.asarray(swapped), x.transpose(1, 0, 2))
    tiled = jx.vmap(lambda v: lax.all_to_all(v, "b", 1, 0, tiled=True), axis_name="b")(x[:, :, :2].repeat(2, 2))
    want = np.stack([np.concatenate([x[a, :, :2].repeat(2, 1)[:, b:b + 1] for a in range(4)], 0) for b in range(4)])
    np.testing.assert_array_equal(np.asarray(tiled), want)
    shuffled = jx.vmap(lambda v: lax.pshuffle(v, "b", [2, 3, 1, 0]), axis_name="b")(x)
    np.testing.assert_array_equal(np.asarray(shuffled), x[[2, 3, 1, 0]])
    partial = jx.vmap(lambda v: lax.ppermute(v, "b", [(0, 2), (3, 1)]), axis_name="b")(x)
    np.testing.assert_array_equal(np.asarray(partial), np.stack([0 * x[0], x[3], x[0], 0 * x[0]]))
    same = jx.vmap(lambda v, w: lax.pswapaxes(w, "b", 0) + v, axis_name="b", in_axes=(0, None))(0 * x, x[1])
    np.testing.assert_array_equal(np.asarray(same), np.broadcast_to(x[1][:, None], (4, 4, 3)))
    with pytest.raises(NotImplementedError, match="ragged_all_to_all over a vmap axis"):
        jx.make_jaxpr(jx.vmap(lambda *a: lax.ragged_all_to_all(*a, axis_name="b"), axis_name="b"))(
            np.zeros((2, 4)), np.zeros((2, 4)), *[np.zeros((2, 2), np.int32)] * 4)
