"""``jaxprc.sharding``: meshes of devices and how arrays are laid out over them (JAX's API).

A ``NamedSharding(mesh, PartitionSpec(...))`` splits array dimension i over the
mesh axes named by entry i of the spec. It becomes XLA's ``HloSharding`` (a tile
assignment over the mesh's devices, in the mesh's flat order) for transfers and
executables, and Shardy's ``#sdy.sharding`` in StableHLO (``lax.sharding_constraint.sdy_sharding``).
"""
from __future__ import annotations

import itertools
import math
import threading
from typing import NamedTuple

import numpy as np
from jaxlib import _jax, xla_client as xc

from . import runtime
from .engine.caches import BoundedCache
from .ir import sharding_type
from .ir.core import param_type
from .ir.sharding_type import (UNCONSTRAINED, AbstractMesh, AxisType, DuplicateSpecError,  # noqa: F401
                                PartitionSpec, _axis_names, _axis_types)
from .runtime.sharded import REPLICATED, ShardedArray, assemble, put_sharded

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding", "auto_axes", "explicit_axes",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh", "make_mesh", "make_single_device_sharding",
           "reshard", "set_mesh", "use_abstract_mesh"]


def reshard(xs, out_shardings):
    """``jaxprc.reshard`` (compiler/engine/spmd.py), also here as in ``jax.sharding``."""
    from .engine.spmd import reshard as impl
    return impl(xs, out_shardings)


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """``f`` with the context mesh's ``axes`` Auto (compiler/sharding_axes.py)."""
    from .sharding_axes import auto_axes as impl
    return impl(f, axes=axes, out_sharding=out_sharding)


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """``f`` with the context mesh's ``axes`` Explicit (compiler/sharding_axes.py)."""
    from .sharding_axes import explicit_axes as impl
    return impl(f, axes=axes, in_sharding=in_sharding)


class Mesh(AbstractMesh):
    """An n-dimensional array of devices with named axes."""

    def __init__(self, devices, axis_names, axis_types=None):
        devices = np.asarray(devices, dtype=object)
        names = _axis_names(axis_names)
        if devices.ndim != len(names):
            raise ValueError(f"Mesh: devices have {devices.ndim} dimensions but {len(names)} axis names "
                             f"{names} were given")
        ids = [d.id for d in devices.flat]
        if len(set(ids)) != len(ids):
            raise ValueError(f"Mesh: a device appears more than once in {ids}")
        super().__init__(devices.shape, names, axis_types)
        self._grid = devices

    devices = property(lambda self: self._grid)

    device_ids = property(lambda self: np.vectorize(lambda d: d.id, otypes=[int])(self.devices))
    local_devices = property(lambda self: [self._flat_devices[i]
                                           for i in runtime.sharded.addressable(self._flat_devices)])
    is_multi_process = property(lambda self: len({d.process_index for d in self.devices.flat}) > 1)
    abstract_mesh = property(lambda self: AbstractMesh(
        self.axis_sizes, self.axis_names, self.axis_types,
        _platform=self.devices.flat[0].platform if self.devices.size else None))

    @property
    def local_mesh(self) -> "Mesh":
        """The smallest block of the mesh holding this process's devices (an error when it holds
        other processes' devices too)."""
        me = runtime.backend().process_index
        mine = np.vectorize(lambda d: d.process_index == me, otypes=[bool])(self.devices)
        if not mine.any():
            raise ValueError(f"{self!r} has none of this process's devices")
        block = tuple(slice(hit[0], hit[-1] + 1) for hit in (
            np.flatnonzero(mine.any(axis=tuple(a for a in range(mine.ndim) if a != axis)))
            for axis in range(mine.ndim)))
        if not mine[block].all():
            raise ValueError("When passing host local inputs to pjit, devices connected to a single host "
                             "must form a contiguous subcube of the global device mesh")
        return Mesh(self.devices[block], self.axis_names)      # Auto axes, as JAX's

    @property
    def _flat_devices(self) -> tuple:
        return tuple(self.devices.flat)

    def _key(self):
        return super()._key() + (tuple(d.id for d in self.devices.flat),)

    def __repr__(self):
        types = f", axis_types={self.axis_types}" if self.axis_names else ""
        return f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}{types})"

    def __enter__(self):       # names the mesh PartitionSpecs refer to (not get_mesh's, as JAX)
        _CONTEXT.legacy.append(self)
        return self

    def __exit__(self, *exc):
        _CONTEXT.legacy.pop()
        return False


class _EmptyMesh(Mesh):
    """The mesh of a context that set none (``get_mesh()`` then)."""

    def __init__(self):
        AbstractMesh.__init__(self, (), ())
        self._grid = np.empty((0,), dtype=object)

    def _short_repr(self):
        return "Mesh()"

    __str__ = _short_repr


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None) -> Mesh:
    """A mesh of the first ``prod(axis_shapes)`` devices; axes Explicit unless ``axis_types``."""
    devices = runtime.devices() if devices is None else list(devices)
    shape = tuple(int(s) for s in axis_shapes)
    n = math.prod(shape)
    if n > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of mesh_shape {shape}")
    grid = np.empty(n, dtype=object)
    grid[:] = devices[:n]
    return Mesh(grid.reshape(shape), axis_names,
                _axis_types(axis_types, len(shape), AxisType.Explicit))


# ------------------------------------------------------------ the mesh in context

class _MeshContext(threading.local):
    """This thread's meshes (as JAX's, per thread; each thread starts with none): ``set_mesh``'s,
    ``use_abstract_mesh``'s, and the ``with mesh:`` blocks, which only name the mesh that
    PartitionSpecs refer to."""

    def __init__(self):
        self.mesh = None          # set_mesh
        self.abstract = None      # use_abstract_mesh
        self.legacy: list = []    # with mesh:


_CONTEXT = _MeshContext()


def context_mesh():
    """The mesh PartitionSpecs refer to here: ``set_mesh``'s, else the innermost ``with mesh:``, or None."""
    return _CONTEXT.mesh if _CONTEXT.mesh is not None else (_CONTEXT.legacy[-1] if _CONTEXT.legacy else None)


def get_mesh():
    """The mesh ``set_mesh`` set in this thread (an empty Mesh when none)."""
    return _CONTEXT.mesh if _CONTEXT.mesh is not None else _EMPTY_MESH


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh of this thread's context (``use_abstract_mesh``, else ``set_mesh``'s)."""
    if _CONTEXT.abstract is not None:
        return _CONTEXT.abstract
    return _CONTEXT.mesh.abstract_mesh if _CONTEXT.mesh is not None else _EMPTY_ABSTRACT_MESH


class _Setting:
    """Sets one field of this thread's mesh context when made; ``with`` restores it on exit."""

    _field = ""

    def __init__(self, mesh):
        self.previous = getattr(_CONTEXT, self._field)
        setattr(_CONTEXT, self._field, mesh)
        self.mesh = mesh

    def __enter__(self):
        return self.mesh

    def __exit__(self, *exc):
        setattr(_CONTEXT, self._field, self.previous)
        return False


class set_mesh(_Setting):
    """Set the mesh of this thread (PartitionSpecs refer to it, ``get_abstract_mesh`` gives its axes):
    from now on when called, for a block in ``with``."""

    _field = "mesh"

    def __init__(self, mesh):
        if mesh is not None and (not isinstance(mesh, Mesh) or isinstance(mesh, _EmptyMesh)):
            raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
        super().__init__(mesh)


class use_abstract_mesh(_Setting):
    """Set the abstract mesh of this thread (for a block in ``with``)."""

    _field = "abstract"

    def __init__(self, mesh):
        if not isinstance(mesh, AbstractMesh) or isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `jax.sharding.AbstractMesh`. Got {type(mesh)}")
        super().__init__(mesh)


_EMPTY_MESH = _EmptyMesh()
_EMPTY_ABSTRACT_MESH = AbstractMesh((), ())

# ----------------------------------------------------------------- specs

# ------------------------------------------------------------------ shardings

class Sharding:
    """How an array is laid out over devices; subclasses give ``_devices`` and ``_hlo(ndim)``."""

    memory_kind = None

    @property
    def device_set(self) -> set:
        return set(self._devices)

    num_devices = property(lambda self: len(self._devices))
    # this process's devices (all of them unless jaxprc.distributed joined several processes)
    _addressable = property(lambda self: [self._devices[i] for i in runtime.sharded.addressable(self._devices)])
    addressable_devices = property(lambda self: set(self._addressable))
    is_fully_addressable = property(lambda self: len(self._addressable) == len(self._devices))
    _device_assignment = property(lambda self: self._devices)

    def is_fully_replicated_for(self, ndim: int) -> bool:
        return self._hlo(ndim).is_replicated()

    def devices_indices_map(self, global_shape) -> dict:
        """Device -> the index (tuple of slices) of the part of the array it holds."""
        shape = tuple(global_shape)
        indices = runtime.sharded.shard_indices(self._hlo(len(shape)), shape, len(self._devices))
        return dict(zip(self._devices, indices))

    def addressable_devices_indices_map(self, global_shape) -> dict:
        mine = set(self._addressable)
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in mine}

    def shard_shape(self, global_shape) -> tuple:
        shape = tuple(global_shape)
        self.check_shape(shape, "shard_shape")
        index = runtime.sharded.shard_indices(self._hlo(len(shape)), shape, len(self._devices))[0]
        return tuple(len(range(*s.indices(n))) for s, n in zip(index, shape))

    def check_shape(self, shape, what: str) -> None:
        """A clear error when ``shape`` cannot be laid out so (a dimension not divisible)."""


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device, *, memory_kind=None):
        self._device = device
        self._devices = (device,)

    is_fully_replicated = property(lambda self: True)

    def _hlo(self, ndim):
        return REPLICATED

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash(("single", self._device.id))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


def make_single_device_sharding(device, *, memory_kind=None) -> SingleDeviceSharding:
    """The whole array on ``device`` (JAX's ``jax.sharding.make_single_device_sharding``)."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)


class NamedSharding(sharding_type.NamedSharding, Sharding):
    """An array split over the axes of ``mesh`` as ``spec`` says."""

    @property
    def _devices(self) -> tuple:
        if not isinstance(self.mesh, Mesh):
            raise ValueError("device_set is not implemented for `jax.sharding.AbstractMesh`.")
        return self.mesh._flat_devices

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[a] == 1 for axes in self.spec.axes(len(self.spec)) for a in axes)

    def _hlo(self, ndim: int):
        return _named_hlo(self.mesh.axis_names, self.mesh.axis_sizes, self.spec.axes(ndim))

    def check_shape(self, shape, what: str) -> None:
        if len(self.spec) > len(shape):
            raise ValueError(f"{what}: {self} is for arrays of at least {len(self.spec)} dimensions, "
                             f"got shape {shape}")
        for dim, (n, axes) in enumerate(zip(shape, self.spec.axes(len(shape)))):
            ways = math.prod(self.mesh.shape[a] for a in axes)
            if n % ways:
                raise ValueError(f"{what}: Sharding spec {tuple(self.spec)} implies that array axis {dim} "
                                 f"is partitioned {ways} times, but does not evenly divide the dimension "
                                 f"size {n}. Got shape: {shape} and sharding {self}")


def _named_hlo(names, sizes, dim_axes):
    """XLA's tile assignment for mesh axes ``dim_axes`` per dimension; devices are numbered in the
    mesh's flat order (the executable's device assignment). Unused axes replicate."""
    used = [a for axes in dim_axes for a in axes]
    if not used:
        return REPLICATED
    position = {n: i for i, n in enumerate(names)}
    unused = [n for n in names if n not in used]
    tiles = [math.prod(sizes[position[a]] for a in axes) for axes in dim_axes]
    copies = math.prod(sizes[position[a]] for a in unused)
    perm = [position[a] for a in used + unused]
    subgroups = [xc.OpSharding.Type.REPLICATED] if copies > 1 else []
    return xc.HloSharding.iota_tile(tiles + ([copies] if copies > 1 else []), list(sizes), perm, subgroups)


# ---------------------------------------------------------------- resolution

def resolve(sharding, what: str):
    """A Sharding from a Sharding, a Device, or a PartitionSpec under ``set_mesh``."""
    if isinstance(sharding, Sharding):
        return sharding
    if isinstance(sharding, PartitionSpec):
        mesh = context_mesh()
        if mesh is None:
            raise ValueError(f"{what}: a PartitionSpec {sharding} needs a mesh: use "
                             "NamedSharding(mesh, spec) or set one with jaxprc.set_mesh(mesh)")
        return NamedSharding(mesh, sharding)
    if hasattr(sharding, "id") and hasattr(sharding, "platform"):
        if sharding not in runtime.devices():
            raise ValueError(f"{what}: {sharding!r} is not one of this process's devices {runtime.devices()}")
        return SingleDeviceSharding(sharding)
    raise TypeError(f"{what}: expected a Sharding, a PartitionSpec or a Device, got {type(sharding).__name__}")


def named_from_hlo(mesh: Mesh, hlo, ndim: int):
    """The NamedSharding over ``mesh`` whose tile assignment is ``hlo`` (None if none is): the
    layout XLA chose for a result, in JAX's terms (a spec entry per dimension, as JAX gives)."""
    # JAX's spelling: a mesh with Explicit axes types every dimension, an Auto mesh drops trailing Nones
    full = any(t is not AxisType.Auto for t in mesh.axis_types)
    if hlo.is_replicated():
        return NamedSharding(mesh, PartitionSpec(*[None] * (ndim if full else 0)))
    names, sizes = mesh.axis_names, mesh.axis_sizes
    for placement in itertools.product(range(-1, ndim), repeat=len(names)):
        groups = [[a for a, d in zip(names, placement) if d == dim] for dim in range(ndim)]
        for orders in itertools.product(*[itertools.permutations(g) for g in groups]):
            if _named_hlo(names, sizes, orders) == hlo:
                spec = [None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders]
                while not full and spec and spec[-1] is None:
                    spec.pop()
                return NamedSharding(mesh, PartitionSpec(*spec))
    return None


# ------------------------------------------------------ placing values as types say

def concrete_mesh(abstract: AbstractMesh) -> Mesh:
    """A Mesh of devices for ``abstract``: the context's (``set_mesh``, ``with mesh:``) when it
    has those axes, else the first devices laid out as ``make_mesh`` does."""
    mesh = context_mesh()
    if mesh is not None and mesh.abstract_mesh == abstract:
        return mesh
    return make_mesh(abstract.axis_sizes, abstract.axis_names, abstract.axis_types)


def put_as_typed(values, avals) -> list:
    """``values`` laid out as the shardings written in ``avals`` name (a parsed program's inputs);
    values of types without one are left as they are."""
    from .api import device_put
    return [v if getattr(a, "sharding_in_type", None) is None
            else device_put(v, NamedSharding(concrete_mesh(a.sharding_in_type.mesh), a.sharding_in_type.spec))
            for v, a in zip(values, avals)]


# ---------------------------------------------------------------- transfers

def put(value, sharding: Sharding, aval: runtime.Aval):
    """``value`` (host or device) laid out as ``sharding``: a ShardedArray carrying ``sharding``,
    committed to its devices (the default device's too, as JAX's device_put commits)."""
    sharding.check_shape(aval.shape, "device_put")
    if isinstance(value, ShardedArray) and value.sharding == sharding:
        return value
    current = getattr(value, "sharding", None)
    if isinstance(value, ShardedArray) and (value.spans_processes() or (
            current is not None and current._devices == sharding._devices)):
        return _reshard(sharding)(value)       # no host copy: an SPMD program moves it
    if isinstance(value, runtime.Array):
        moved = _copy_to_devices(value, sharding, aval)
        if moved is not None:
            return moved
    if sharding._devices == (runtime.backend().device,):      # uploaded as to the default device, committed
        return assemble(aval, REPLICATED, sharding._devices, [runtime.to_buffer(np.asarray(value), aval)], sharding)
    return put_sharded(np.asarray(value), aval, sharding._hlo(len(aval.shape)), sharding._devices, sharding)


def _copy_to_devices(value, sharding: Sharding, aval: runtime.Aval):
    """``value``'s shards copied device to device onto ``sharding``'s devices when the layout is
    the same tiling there (jaxlib's copy path, as JAX's device_put); None when it is not."""
    default = runtime.backend().device
    sharded = isinstance(value, ShardedArray)
    src_devices, src_hlo = (value.device_tuple, value.hlo) if sharded else ((default,), REPLICATED)
    dst_devices, dst_hlo = sharding._devices, sharding._hlo(len(aval.shape))
    if len(src_devices) != len(dst_devices) or src_hlo != dst_hlo:
        return None
    if value._buf.is_deleted():
        raise runtime.deleted_error(aval.shape, aval.dtype, "It was given to device_put.")
    target = runtime.sharded.gspmd_sharding(dst_devices, dst_hlo)
    (buf,) = _jax.batched_copy_array_to_devices_with_sharding(
        [value._buf], [xc.DeviceList(dst_devices)], [target], [xc.ArrayCopySemantics.ALWAYS_COPY])
    return ShardedArray(buf, aval, dst_hlo, dst_devices, sharding)     # committed, on the default device too


def _identity(x):
    return x


_RESHARD = BoundedCache()     # target sharding -> its resharding program


def _reshard(sharding):
    """A program that lays its argument out as ``sharding``: XLA moves the pieces between
    devices (collectives; across processes too), nothing goes through the host."""
    from .api import jit
    return _RESHARD.get(sharding, lambda: jit(_identity, out_shardings=sharding))


def _array_sharding(self):
    return SingleDeviceSharding(runtime.backend().device)


class Shard(NamedTuple):
    """One piece of an array: where it is, which part it is, and its data (an Array)."""
    device: object
    index: tuple
    replica_id: int
    data: object


def _shards(self, everywhere: bool = False) -> list:
    """This process's shards; ``everywhere``: every device's (others' with data None)."""
    if type(self) is runtime.Array:
        return [Shard(self.device, (slice(None),) * self.ndim, 0, self)]
    devices, shape = self.device_tuple, self.shape
    indices = runtime.sharded.shard_indices(self.hlo, shape, len(devices))
    bufs = dict(zip(runtime.sharded.addressable(devices), self.shard_buffers()))
    seen: dict = {}
    out = []
    for position, (device, index) in enumerate(zip(devices, indices)):
        key = tuple((s.start, s.stop) for s in index)
        replica = seen[key] = seen.get(key, -1) + 1
        buf = bufs.get(position)
        if buf is None:
            if everywhere:
                out.append(Shard(device, index, replica, None))
            continue
        aval = runtime.Aval.get(tuple(len(range(*s.indices(n))) for s, n in zip(index, shape)),
                                self.dtype, self.weak_type)
        out.append(Shard(device, index, replica, ShardedArray(buf, aval, REPLICATED, (device,),
                                                              SingleDeviceSharding(device))))
    return out


runtime.Array.sharding = property(_array_sharding)
runtime.Array.addressable_shards = property(_shards)
runtime.Array.global_shards = property(lambda self: _shards(self, everywhere=True))
runtime.Array.addressable_data = lambda self, index: self.addressable_shards[index].data
runtime.Array.is_fully_replicated = property(lambda self: self.sharding.is_fully_replicated_for(self.ndim))
runtime.Array.is_fully_addressable = property(lambda self: type(self) is runtime.Array or not self.spans_processes())
runtime.Array.committed = property(lambda self: type(self) is not runtime.Array)


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """A global array whose shard on each device is ``data_callback(index)`` (host data; called
    for this process's devices only)."""
    shape = tuple(shape)
    sharding = resolve(sharding, "make_array_from_callback")
    sharding.check_shape(shape, "make_array_from_callback")
    indices = sharding.addressable_devices_indices_map(shape)
    if sharding.is_fully_replicated_for(len(shape)):      # one call for every device, as JAX
        whole = np.asarray(data_callback((slice(None),) * len(shape)))
        pieces = [(d, whole) for d in indices]
    else:
        pieces = [(d, np.asarray(data_callback(i))) for d, i in indices.items()]
    from .engine.dispatch import runtime_aval
    from .ir.tracing import get_aval
    dt = pieces[0][1].dtype if dtype is None else np.dtype(dtype)
    aval = runtime_aval(get_aval(np.zeros((), dt)).update(shape=shape, weak_type=False))
    arrays = [put_sharded(p.astype(aval.dtype), runtime.Aval.get(p.shape, aval.dtype), REPLICATED, [d])
              for d, p in pieces]
    return _assemble(shape, sharding, aval, arrays)


def _assemble(shape, sharding, aval, arrays):
    """One global array from single-device Arrays on this process's devices, in ``sharding``'s
    device order."""
    want = sharding.shard_shape(shape)
    for a in arrays:
        if tuple(a.shape) != want:
            raise ValueError(f"a shard of shape {tuple(a.shape)} was given where {sharding} on "
                             f"shape {shape} puts shards of shape {want}")
    return assemble(aval, sharding._hlo(len(shape)), sharding._devices, [a._buf for a in arrays], sharding)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """A global array from one single-device Array per device of ``sharding`` (of this process's
    devices, when processes are joined)."""
    shape = tuple(shape)
    sharding = resolve(sharding, "make_array_from_single_device_arrays")
    sharding.check_shape(shape, "make_array_from_single_device_arrays")
    by_device = {}
    for a in arrays:
        if not isinstance(a, runtime.Array) or len(a.devices()) != 1:
            raise ValueError("make_array_from_single_device_arrays: every array must be an Array on "
                             f"one device, got {type(a).__name__}")
        by_device[next(iter(a.devices()))] = a
    wanted = sharding._addressable
    missing = [d for d in wanted if d not in by_device]
    if missing or len(arrays) != len(wanted):
        raise ValueError(f"make_array_from_single_device_arrays: {sharding} needs one array on each of "
                         f"{wanted}; got arrays on {[next(iter(a.devices())) for a in arrays]}")
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1:
        raise ValueError(f"make_array_from_single_device_arrays: the arrays have different dtypes {dtypes}")
    aval = runtime.Aval.get(shape, dtypes.pop(), False)
    return _assemble(shape, sharding, aval, [by_device[d] for d in wanted])


# ------------------------------------------------------------ the IR param

@param_type
class ShardingParam(NamedTuple):
    """A NamedSharding as a primitive param (printed and parsed in the text IR): the mesh's axes
    and device ids, and the mesh axes each array dimension is split over (leading dimensions;
    the others are not split). No device ids: a type's sharding, over the devices of the mesh in
    context (``concrete_mesh``)."""
    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple
    device_ids: tuple
    dims: tuple

    @staticmethod
    def of(sharding) -> "ShardingParam":
        m = sharding.mesh
        devices = tuple(d.id for d in m._flat_devices) if isinstance(m, Mesh) else ()
        return ShardingParam(m.axis_names, m.axis_sizes, tuple(t.name for t in m.axis_types),
                             devices, sharding.spec.axes(len(sharding.spec)))

    def named(self) -> NamedSharding:
        if not self.device_ids:
            abstract = AbstractMesh(self.axis_sizes, self.axis_names, tuple(AxisType[t] for t in self.axis_types))
            return NamedSharding(concrete_mesh(abstract), sharding_type.spec_of(self.dims))
        by_id = {d.id: d for d in runtime.devices()}
        missing = [i for i in self.device_ids if i not in by_id]
        if missing:
            raise ValueError(f"a sharding names devices {missing} this process does not have "
                             f"({len(by_id)} devices; JAXPRC_NUM_CPU_DEVICES sets the CPU count)")
        grid = np.empty(len(self.device_ids), dtype=object)
        grid[:] = [by_id[i] for i in self.device_ids]
        spec = [None if not d else d[0] if len(d) == 1 else tuple(d) for d in self.dims]
        return NamedSharding(Mesh(grid.reshape(self.axis_sizes), self.axis_names,
                                  tuple(AxisType[t] for t in self.axis_types)), PartitionSpec(*spec))


