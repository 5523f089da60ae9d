"""``jaxprc.experimental.multihost_utils``: host values exchanged between joined processes.

Each helper is one SPMD program over a mesh of every device, one row per process
(``processes`` x ``local_devices``): a process puts its value on its own row and the
program's collective (a sum, or a gather to a replicated result) exchanges them. Results
are numpy arrays, the same in every process.
"""
from __future__ import annotations

import zlib

import numpy as np

from .. import numpy as jnp
from ..api import device_put, jit
from ..lax.host_local import global_array_to_host_local_array_p, host_local_array_to_global_array_p
from ..process_local import make_array_from_process_local_data
from ..runtime.sharded import ShardedArray
from ..sharding import Mesh, NamedSharding, PartitionSpec as P, ShardingParam
from ..runtime import devices, distributed
from ..engine.spmd import broadcast
from ..toplevel import local_device_count, process_count, process_index
from ..tree_util import tree_all, tree_flatten, tree_map, tree_unflatten

__all__ = ["assert_equal", "broadcast_one_to_all", "global_array_to_host_local_array",
           "host_local_array_to_global_array", "process_allgather", "reached_preemption_sync_point",
           "sync_global_devices"]


def _process_rows():
    """Every device, one mesh row per process, and the sharding that splits dim 0 over rows."""
    mesh = Mesh(np.array(devices(), dtype=object).reshape(process_count(), local_device_count()),
                ("processes", "local_devices"))
    return NamedSharding(mesh, P("processes")), NamedSharding(mesh, P())


def _sum_rows(x):
    return jnp.sum(x, axis=0, dtype=x.dtype)


def broadcast_one_to_all(in_tree, is_source: bool | None = None):
    """Every leaf of ``in_tree`` as the source process's (process 0's unless ``is_source``
    says); the leaves must have the same shapes in every process."""
    if process_count() == 1:
        return tree_map(np.asarray, in_tree)
    if is_source is None:
        is_source = process_index() == 0
    rows, replicated = _process_rows()

    def exchange(x):
        x = np.asarray(x)
        mine = (x if is_source else np.zeros_like(x))[None]       # the others contribute zeros
        total = jit(_sum_rows, out_shardings=replicated)(make_array_from_process_local_data(rows, mine))
        return np.asarray(total)
    return tree_map(exchange, in_tree)


def process_allgather(in_tree, tiled: bool = False):
    """Every process's leaves, stacked along a new first axis (``tiled``: concatenated along
    the first axis). A global array spanning processes comes back whole (``tiled`` only)."""
    def gather(x):
        if isinstance(x, ShardedArray) and x.spans_processes():
            if not tiled:
                raise ValueError("Gathering global non-fully-addressable arrays only supports tiled=True")
            return np.asarray(device_put(x, NamedSharding(Mesh(np.array(x.device_tuple, dtype=object),
                                                               ("devices",)), P())))
        host = np.asarray(x)
        if process_count() == 1:        # as JAX: a scalar stays one when tiled
            return host if tiled else host[None]
        if host.ndim == 0 or not tiled:
            host = host[None]
        rows, replicated = _process_rows()
        return np.asarray(device_put(make_array_from_process_local_data(rows, host), replicated))
    return tree_map(gather, in_tree)


def assert_equal(in_tree, fail_message: str = ""):
    """Raise AssertionError unless every process passed the same values."""
    def repeated(x):
        if isinstance(x, ShardedArray) and x.spans_processes():
            return np.asarray(x.addressable_shards[0].data)
        x = np.asarray(x)
        return np.concatenate([x[None] if x.ndim == 0 else x] * process_count())
    gathered = process_allgather(in_tree, tiled=True)
    expected = tree_map(repeated, in_tree)
    if not tree_all(tree_map(lambda a, b: bool(np.all(np.equal(a, b))), expected, gathered)):
        raise AssertionError(f"{fail_message}. Expected: {gathered}; got: {in_tree}.")


def sync_global_devices(name: str) -> None:
    """A barrier: returns once every process has called it with the same ``name``."""
    assert_equal(np.uint32(zlib.crc32(name.encode())), f"sync_global_devices name mismatch ('{name}')")


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether every process has reached the step at which to save after a preemption notice
    (SIGTERM to any process): call it at every step, from the same first step everywhere."""
    state = distributed.joined()
    return False if state is None else state.preemption.reached_sync_point(step_id)


def host_local_array_to_global_array(local_inputs, global_mesh: Mesh, pspecs):
    """Each process's part of each leaf of ``local_inputs`` (host or device values) as one
    global array laid out over ``global_mesh`` as its PartitionSpec (``pspecs``: one, or a
    pytree prefix of the inputs). This process's devices must form a block of the mesh; a
    dimension split over mesh axes grows by how many times the mesh's extent along those axes
    exceeds the block's. Under jit: the identity where the shapes agree."""
    return _convert(host_local_array_to_global_array_p, local_inputs, global_mesh, pspecs)


def global_array_to_host_local_array(global_inputs, global_mesh: Mesh, pspecs):
    """The inverse of ``host_local_array_to_global_array``: this process's part of each global
    array (re-laid out as its PartitionSpec first if it is laid out otherwise)."""
    return _convert(global_array_to_host_local_array_p, global_inputs, global_mesh, pspecs)


def _convert(prim, inputs, mesh, pspecs):
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{prim.name}: global_mesh must be a Mesh, got {type(mesh).__name__}")
    leaves, tree = tree_flatten(inputs)
    outs = []
    for x, spec in zip(leaves, broadcast(pspecs, tree, f"{prim.name}: pspecs")):
        if spec is None:
            raise ValueError("`None` is not a valid input to the pspecs argument. Please use "
                             "jaxprc.sharding.PartitionSpec() if you wanted to replicate your input.")
        if not isinstance(spec, P):
            raise TypeError(f"{prim.name}: pspecs must be PartitionSpecs, got {spec!r}")
        NamedSharding(mesh, spec)           # the spec's axes are the mesh's (a clear error)
        outs.append(prim.bind(x, global_mesh=ShardingParam.of(NamedSharding(mesh, P())),
                              pspec=spec.axes(len(spec))))
    return tree_unflatten(tree, outs)
