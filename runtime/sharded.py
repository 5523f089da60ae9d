"""Arrays spread over several devices, and SPMD executables that run on them.

A ``ShardedArray`` is one global jaxlib ``ArrayImpl`` whose sharding is a
``GSPMDSharding(DeviceList, HloSharding)`` (the jax-free multi-device sharding,
notes/distributed.md §0.3). Shards sit in the device list's order; each shard's
index comes from the HloSharding's tile assignment (``shard_indices``).

jaxlib checks nothing when a multi-device program runs and segfaults on a
wrong shard (§0.1, §0.2): ``SpmdExecutable`` compares every argument's devices,
sharding, shape and dtype with what the program expects, and moves mismatched
arguments, before each run.

Several processes (``distributed.py``): ``devices`` are global, but a process holds, uploads
and reads only the shards on its own devices (``addressable``); jaxlib's ``_arrays`` lists
just those, in device-list order.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np
from jaxlib import _jax, xla_client as xc

from .array import Array, Aval, _copy_to_host, deleted_error, device_aval, no_buffer_format, without_jax_import
from . import effects, monitoring
from .client import backend
from .executable import JaxRuntimeError, XlaCompileError, XlaRuntimeError, _parse, callback_error

REPLICATED = xc.HloSharding.replicate()


def gspmd_sharding(devices, hlo):
    return _jax.GSPMDSharding(xc.DeviceList(tuple(devices)), hlo)


def shard_indices(hlo, shape, ndev: int) -> list:
    """The numpy index of the shard on each position of the device list (None: no shard)."""
    full = (slice(None),) * len(shape)
    if hlo.is_replicated():
        return [full] * ndev
    if hlo.is_maximal():
        owner = hlo.tile_assignment_devices()[0]
        return [full if i == owner else None for i in range(ndev)]
    dims = list(hlo.tile_assignment_dimensions())
    copies = dims.pop() if hlo.replicate_on_last_tile_dim() else 1
    per_dim = [[slice(i * (d // n), (i + 1) * (d // n)) for i in range(n)] if n > 1 else [slice(None)]
               for d, n in zip(shape, dims)]     # an unsplit dimension: slice(None), as in JAX
    out, order = [None] * ndev, iter(hlo.tile_assignment_devices())
    for index in itertools.product(*per_dim):
        for _ in range(copies):
            out[next(order)] = index
    return out


def addressable(devices) -> list[int]:
    """Positions in ``devices`` of this process's devices."""
    me = backend().process_index
    return [i for i, d in enumerate(devices) if d.process_index == me]


class ShardedArray(Array):
    """A global array whose shards live on ``devices`` (in that order) as ``hlo`` says.

    ``sharding`` is the user-level sharding object (``jaxprc.sharding``), set by the compiler.
    """

    __slots__ = ("hlo", "device_tuple", "sharding")

    def __init__(self, buf, aval: Aval, hlo, devices, sharding=None):
        super().__init__(buf, aval)
        self.hlo, self.device_tuple, self.sharding = hlo, tuple(devices), sharding

    @property
    def device(self):
        """The one device, or (as JAX) the sharding of an array over several."""
        if len(self.device_tuple) == 1:
            return self.device_tuple[0]
        if self.sharding is None:
            raise ValueError("device is not defined for an Array sharded over several devices; use "
                             ".devices() or .sharding")
        return self.sharding

    def devices(self) -> set:
        return set(self.device_tuple)

    def _rewrap(self, buf) -> "ShardedArray":
        return ShardedArray(buf, self.aval, self.hlo, self.device_tuple, self.sharding)

    def shard_buffers(self) -> list:
        """The single-device ``ArrayImpl`` of each of this process's shards, in device-list order."""
        return without_jax_import(lambda: list(self._buf._arrays))

    def host_value(self) -> np.ndarray:
        if self._buf.is_deleted():
            raise deleted_error(self.shape, self.dtype)
        dtype = device_aval(self.aval).dtype
        mine = addressable(self.device_tuple)
        if not mine:
            raise _not_here()
        if len(self.device_tuple) == 1:
            out = _shard_to_numpy(self._buf, dtype)
        else:
            indices = shard_indices(self.hlo, self.shape, len(self.device_tuple))
            blocks = [None if index is None else tuple((s.start, s.stop) for s in index) for index in indices]
            if set(blocks) - {blocks[i] for i in mine} - {None}:   # a block no device here holds
                raise _not_here()
            out, done = np.empty(self.shape, dtype), {None}
            for i, shard in zip(mine, self.shard_buffers()):
                if blocks[i] not in done:          # one copy of each block (replicas hold the same)
                    done.add(blocks[i])
                    if out[indices[i]].size:
                        out[indices[i]] = _shard_to_numpy(shard, dtype)
        return out.astype(self.dtype) if dtype != self.dtype else out

    def spans_processes(self) -> bool:
        """Whether some shards are on other processes' devices."""
        return len(addressable(self.device_tuple)) < len(self.device_tuple)

    def _readable(self) -> bool:
        """JAX's rule for printing values: every shard here, or a shard here that is the whole array."""
        mine = len(addressable(self.device_tuple))
        return mine == len(self.device_tuple) or (mine > 0 and self.hlo.is_replicated())

    def __repr__(self):
        if self._readable():
            return super().__repr__()
        return f"Array(shape={self.shape}, dtype={self.dtype.name}{', weak_type=True' if self.weak_type else ''})"

    def __str__(self):
        return super().__str__() if self._readable() else repr(self)

    def __reduce__(self):   # pickles as its host value, like a single-device Array
        return Array.__reduce__(self)


def _not_here() -> RuntimeError:
    return RuntimeError("Fetching value for `jax.Array` that spans non-addressable (non process local) "
                        "devices is not possible. Use the array's `.addressable_shards` to inspect the "
                        "addressable (process local) shards.")


def _shard_to_numpy(buf, dtype) -> np.ndarray:
    if no_buffer_format(dtype) or backend().platform != "cpu":
        return _copy_to_host(buf)
    return np.asarray(buf)


def put_sharded(value, aval: Aval, hlo, devices, sharding=None) -> ShardedArray:
    """Host value -> one global array with a shard of ``value`` on each of ``devices`` (this
    process's part of them: the others upload theirs)."""
    host = np.asarray(value, device_aval(aval).dtype)
    indices, mine = shard_indices(hlo, host.shape, len(devices)), addressable(devices)
    # fresh copies: replicated views of one host array made batched_device_put fail (bad_function_call)
    shards = [np.array(host[indices[i]], order="C") for i in mine]
    buf = _jax.batched_device_put(device_aval(aval), gspmd_sharding(devices, hlo), shards,
                                  [devices[i] for i in mine], force_copy=True, enable_x64=True)
    return ShardedArray(buf, aval, hlo, devices, sharding)


def assemble(aval: Aval, hlo, devices, shard_bufs, sharding=None) -> ShardedArray:
    """One global array from single-device buffers (one per device of this process, in
    ``devices``' order)."""
    buf = _jax.ArrayImpl(device_aval(aval), gspmd_sharding(devices, hlo), list(shard_bufs), True,
                         _skip_checks=True)
    return ShardedArray(buf, aval, hlo, devices, sharding)


# ------------------------------------------------------------------ SPMD programs

def spmd_options(devices) -> xc.CompileOptions:
    """Options for one program partitioned over ``devices`` with Shardy (as JAX sets them)."""
    options = xc.CompileOptions()
    options.num_replicas, options.num_partitions = 1, len(devices)
    build = options.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    options.device_assignment = xc.DeviceAssignment.create(np.array([[d.id for d in devices]], np.int32))
    return options


_COLLECTIVE_OPS = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
                   "collective-broadcast")
_IN_FLIGHT: list = []            # the results of the last CPU program with collectives launched
_IN_FLIGHT_LOCK = threading.Lock()


def _one_at_a_time(launch):
    """On the CPU, let one program with collectives run at a time: XLA runs each device's part on
    a shared thread pool, and the parts of several runs queued at once can take every thread
    while each waits for its missing peers in the collective (a deadlock XLA aborts the process
    on after 40 s; JAX has it too). ``launch()`` starts after the previous run's results are ready."""
    with _IN_FLIGHT_LOCK:
        for buf in _IN_FLIGHT:
            try:
                buf.block_until_ready()
            except Exception:   # noqa: BLE001 -- deleted or donated since: nothing left to wait for
                pass
        _IN_FLIGHT[:] = outs = launch()
    return outs


class SpmdExecutable:
    """A program partitioned over ``devices``: call it on arrays, get ShardedArrays.

    ``propagate_outputs[i]``: result i has no sharding of its own (the partitioner picks it).
    ``host_callbacks``: the Python functions the module's callback custom calls name by index.
    """

    def __init__(self, module, devices, name: str, out_avals, propagate_outputs, host_callbacks=()):
        self.devices, self.name = tuple(devices), name
        self.host_callbacks = tuple(host_callbacks)      # kept alive as long as the executable
        self.out_avals = [Aval.get(a.shape, a.dtype, a.weak_type) for a in out_avals]
        options = spmd_options(self.devices)
        options.executable_build_options.allow_spmd_sharding_propagation_to_output = list(propagate_outputs)
        try:
            with monitoring.elapsed(monitoring.BACKEND_COMPILE_EVENT, name):
                self.loaded = backend().client.compile_and_load(_parse(module), xc.DeviceList(self.devices),
                                                                options, host_callbacks=list(self.host_callbacks))
        except JaxRuntimeError as e:
            raise XlaCompileError(f"XLA failed to compile '{name}': {e}") from None
        # None with one partition (notes §0.10): everything is on the one device
        ins, outs = self.loaded.get_parameter_shardings(), self.loaded.get_output_shardings()
        self.in_hlo = [xc.HloSharding.from_proto(p) for p in ins] if ins is not None else None
        self.out_hlo = ([xc.HloSharding.from_proto(p) for p in outs] if outs is not None
                        else [REPLICATED] * len(self.out_avals))
        # CPU programs with collectives run one at a time (see _one_at_a_time)
        self.serialized = backend().platform == "cpu" and len(self.devices) > 1 and any(
            op in self.as_text() for op in _COLLECTIVE_OPS)
        sharding = lambda h: gspmd_sharding(self.devices, h)      # noqa: E731
        self.handlers = [_jax.array_result_handler(device_aval(a), sharding(h), True, _skip_checks=True)
                         for a, h in zip(self.out_avals, self.out_hlo)]

    def argument(self, i: int, x, aval: Aval):
        """The global buffer of argument ``i``: ``x``'s own when it is laid out as the program
        expects, else a copy made so (through the host)."""
        hlo = self.in_hlo[i]
        if isinstance(x, ShardedArray) and x.device_tuple == self.devices and x.hlo == hlo:
            if x.aval.shape != aval.shape or x.aval.dtype != aval.dtype:
                raise TypeError(f"argument {i} of '{self.name}' is {x.dtype.name}{list(x.shape)}, "
                                f"the program takes {aval.dtype.name}{list(aval.shape)}")
            if x._buf.is_deleted():
                raise deleted_error(x.shape, x.dtype, f"It is argument {i} of '{self.name}'.")
            return x._buf
        if isinstance(x, ShardedArray) and x.spans_processes():   # cannot be gathered here to re-lay out
            raise ValueError(f"argument {i} of '{self.name}' is laid out as {x.hlo} over devices "
                             f"{[d.id for d in x.device_tuple]}; the program takes it as {hlo} over "
                             f"{[d.id for d in self.devices]}. An array spanning several processes "
                             "must already have the sharding jit expects (reshard it with device_put).")
        host = np.asarray(x)
        if host.shape != aval.shape:
            raise TypeError(f"argument {i} of '{self.name}' has shape {host.shape}, the program "
                            f"takes {aval.shape}")
        return put_sharded(host, aval, hlo, self.devices)._buf

    def run(self, args, in_avals) -> list[ShardedArray]:
        if self.in_hlo is None:
            self.in_hlo = [REPLICATED] * len(in_avals)
        if len(args) != len(self.in_hlo):
            raise TypeError(f"'{self.name}' takes {len(self.in_hlo)} arguments, got {len(args)}")
        buffers = [self.argument(i, x, a) for i, (x, a) in enumerate(zip(args, in_avals))]
        launch = self._launch_effectful if self.host_callbacks else (
            lambda bufs: self.loaded.execute_sharded(bufs).consume_with_handlers(self.handlers))
        try:
            outs = _one_at_a_time(lambda: launch(buffers)) if self.serialized else launch(buffers)
        except JaxRuntimeError as e:
            error = self.host_callbacks and callback_error(self.name)
            if error:
                raise error from error.__cause__     # the exception a callback raised, as the cause
            raise XlaRuntimeError(f"XLA failed to run '{self.name}': {e}") from None
        return [ShardedArray(o, a, h, self.devices) for o, a, h in zip(outs, self.out_avals, self.out_hlo)]

    def _launch_effectful(self, buffers) -> list:
        """Run a program calling host callbacks and wait for it (as on one device)."""
        return effects.wait_for(self.loaded.execute_sharded(buffers, with_tokens=True), self.handlers)

    def as_text(self) -> str:
        return self.loaded.hlo_modules()[0].to_string()

    def memory_analysis(self):
        return self.loaded.get_compiled_memory_stats()

    def cost_analysis(self) -> dict:
        return self.loaded.cost_analysis()
