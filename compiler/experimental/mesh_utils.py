"""``jaxprc.experimental.mesh_utils``: device arrays shaped for ``Mesh`` (JAX's ``mesh_utils``).

On CPU (and any platform without a registered handler) the mesh is the devices in the order
given, reshaped; on GPU, in device-id order, as JAX orders them. ``device_kind_handler_dict``
maps a ``device_kind`` to a function ``(mesh_shape, devices, *, contiguous_submeshes)`` that
returns the mesh, or None to fall back; it starts empty (JAX's entries are TPU topologies).
"""
from __future__ import annotations

import collections
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..runtime import devices as _all_devices

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

device_kind_handler_dict: dict[str, Callable[..., np.ndarray | None]] = {}


def _axis_sizes(mesh_shape, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        raise ValueError(f"`{what}` passed to `create_device_mesh` should be a sequence of ints. "
                         f"Got {mesh_shape}") from None


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False, allow_split_physical_axes: bool = False) -> np.ndarray:
    """A numpy array of ``devices`` (default: all of them) of shape ``mesh_shape``, whose size
    must be the number of devices. ``contiguous_submeshes`` and ``allow_split_physical_axes``
    matter only to topology handlers (TPU in JAX); the plain layout satisfies both."""
    devices = list(_all_devices() if devices is None else devices)
    shape = _axis_sizes(mesh_shape, "mesh_shape")
    if math.prod(shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of mesh_shape {shape}")
    handler = device_kind_handler_dict.get(devices[-1].device_kind)
    if handler is not None:
        mesh = handler(shape, devices, contiguous_submeshes=contiguous_submeshes)
        if mesh is not None:
            return mesh
    if devices[-1].platform == "gpu":     # process order is not XLA's topology-aware numbering
        devices = sorted(devices, key=lambda d: d.id)
    mesh = np.empty(len(devices), dtype=object)
    mesh[:] = devices                      # never let numpy look inside the device objects
    return mesh.reshape(shape)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh of ``mesh_shape * dcn_mesh_shape`` (elementwise): a ``mesh_shape`` block per granule
    (a slice, or a process with ``process_is_granule``), the blocks laid out as ``dcn_mesh_shape``.
    CPU devices have no ``slice_index``: pass ``process_is_granule=True`` there, as in JAX."""
    devices = list(_all_devices() if devices is None else devices)
    attr = "process_index" if process_is_granule else "slice_index"
    if not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0]} does not have attribute {attr}. See `process_is_granule` option.")
    dcn = _axis_sizes(dcn_mesh_shape, "dcn_mesh_shape")
    if len(dcn) != len(_axis_sizes(mesh_shape, "mesh_shape")):
        raise ValueError(f"mesh_shape {tuple(mesh_shape)} and dcn_mesh_shape {dcn} must have the same length")
    by_granule = collections.defaultdict(list)
    for d in devices:
        by_granule[getattr(d, attr)].append(d)
    keys = sorted(by_granule) if should_sort_granules_by_key else list(by_granule)
    if math.prod(dcn) != len(keys):
        raise ValueError(f"Number of slices {len(keys)} must equal the product of dcn_mesh_shape {dcn}")
    blocks = [create_device_mesh(mesh_shape, by_granule[k], allow_split_physical_axes=allow_split_physical_axes)
              for k in keys]
    # Block g sits at position unravel(g, dcn) of the outer grid.
    inner = blocks[0].shape
    mesh = np.empty(tuple(i * o for i, o in zip(inner, dcn)), dtype=object)
    for g, block in enumerate(blocks):
        at = np.unravel_index(g, dcn)
        mesh[tuple(slice(i * n, (i + 1) * n) for i, n in zip(at, inner))] = block
    return mesh
