"""``make_array_from_process_local_data``: a global array from each process's part of it.

With processes joined by ``jaxprc.distributed``, a data loader in each process reads only
the rows its own devices hold. The global shape follows from the sharding: along a
dimension, the distinct blocks the processes hold are laid side by side (JAX's rule, so the
same loader code gives the same arrays). A dimension given whole (equal to the global
size) is read by index in every process.
"""
from __future__ import annotations

import numpy as np

from . import sharding as shd
from .engine import spmd
from .api import device_put
from .toplevel import process_count
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["make_array_from_process_local_data"]


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """``local_data`` (a pytree of host arrays, this process's part) as global arrays laid out by
    ``sharding`` (one, or a prefix of the pytree). ``global_shape`` (one shape for every leaf,
    or a pytree of them) is inferred when None."""
    leaves, tree = tree_flatten(local_data)
    shardings = [shd.resolve(s, "make_array_from_process_local_data")
                 for s in spmd.broadcast(sharding, tree, "make_array_from_process_local_data")]
    shapes = _broadcast_shapes(global_shape, tree)
    if process_count() == 1:
        for s, d in zip(shapes, leaves):
            if s is not None and s != np.shape(d):
                raise ValueError("When calling `make_array_from_process_local_data` on a single process, "
                                 f"global_shape should be None or equal to local_data.shape. Got "
                                 f"global_shape={s} and local_data.shape={np.shape(d)}.")
        return device_put(local_data, sharding)
    out = [_from_local(np.asarray(d), s, shape) for d, s, shape in zip(leaves, shardings, shapes)]
    return tree_unflatten(tree, out)


def _broadcast_shapes(global_shape, tree) -> list:
    if global_shape is None or (isinstance(global_shape, tuple)
                                and all(isinstance(n, (int, np.integer)) or n is None for n in global_shape)):
        return [None if global_shape is None else tuple(global_shape)] * tree.num_leaves
    shapes, shape_tree = tree_flatten(global_shape, is_leaf=lambda x: x is None or isinstance(x, tuple))
    if shape_tree.num_leaves != tree.num_leaves:
        raise ValueError(f"make_array_from_process_local_data: global_shape {global_shape!r} does not match "
                         f"the structure of local_data ({tree.num_leaves} arrays)")
    return [None if s is None else tuple(s) for s in shapes]


def _from_local(data: np.ndarray, sharding, global_shape):
    if global_shape is None:
        global_shape = tuple(local * count if count else None
                             for local, count in ((n, _process_count_along(sharding, i, data.ndim))
                                                  for i, n in enumerate(data.shape)))
        if None in global_shape:
            raise ValueError("Unable to compute global_shape due to non-uniform sharding. Specify global "
                             f"shape directly. Partially computed global_shape={global_shape}.")
    elif None in global_shape:
        raise ValueError(f"global_shape={global_shape} has Nones. This is not supported.")
    if len(global_shape) != data.ndim:
        raise ValueError(f"make_array_from_process_local_data: global_shape {global_shape} has "
                         f"{len(global_shape)} dimensions, the local data {data.shape} has {data.ndim}")
    sharding.check_shape(global_shape, "make_array_from_process_local_data")
    indices = sharding.addressable_devices_indices_map(global_shape)
    block = sharding.shard_shape(global_shape)
    starts = [sorted({index[i].start or 0 for index in indices.values()}) for i in range(data.ndim)]
    whole = [n == g for n, g in zip(data.shape, global_shape)]
    for i, (n, g) in enumerate(zip(data.shape, global_shape)):
        if not whole[i] and n != block[i] * len(starts[i]):
            raise ValueError("Invalid host data, each dimension should match either global or process "
                             f"shape. In dimension {i}, the process data has {n} elements. Process "
                             f"addresses {block[i] * len(starts[i])} elements and global_shape={global_shape}.")

    def local_part(index):   # the global block `index` within this process's data
        return data[tuple(s if whole[i] else slice(k * block[i], (k + 1) * block[i])
                          for i, s in enumerate(index)
                          for k in (starts[i].index(s.start or 0),))]
    return shd.make_array_from_callback(global_shape, sharding, local_part)


def _process_count_along(sharding, dim: int, ndim: int) -> int | None:
    """How many distinct blocks the processes hold along ``dim`` (JAX's process-uniform rule),
    or None when processes hold different numbers of blocks or overlapping ones."""
    if sharding.is_fully_addressable or sharding.is_fully_replicated_for(ndim):
        return 1
    n = sharding.num_devices       # a shape every tiling divides: only the pattern matters
    by_process: dict = {}
    for device, index in sharding.devices_indices_map((n,) * ndim).items():
        by_process.setdefault(device.process_index, set()).add((index[dim].start, index[dim].stop))
    sizes = {len(blocks) for blocks in by_process.values()}
    distinct = {frozenset(blocks) for blocks in by_process.values()}
    every = set().union(*by_process.values())
    if len(sizes) != 1 or sum(len(b) for b in distinct) != len(every):
        return None
    return len(distinct)
