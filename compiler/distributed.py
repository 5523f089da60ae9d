"""``jaxprc.distributed``: join several processes into one system of devices (JAX's API).

Every process calls ``initialize`` with the same coordinator address and process count,
before anything creates the backend client. Afterwards ``jaxprc.devices()`` lists every
process's devices, ``local_devices()`` this process's, and one jit program over a mesh
spanning processes runs as one SPMD computation, each process feeding and reading its own
devices' shards. The coordination itself is jaxlib's (``runtime/distributed.py``).
"""
from __future__ import annotations

import os
import warnings

from .runtime import client as _client, distributed as _dist

__all__ = ["initialize", "is_initialized", "shutdown"]


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               heartbeat_timeout_seconds: int = 100, shutdown_timeout_seconds: int = 300,
               coordinator_bind_address: str | None = None, slice_index: int | None = None,
               partition_index: int | None = None) -> None:
    """Join this process to the others: process 0 serves at ``coordinator_address``
    ('host:port'), every process connects to it. Blocks until all ``num_processes`` have
    joined (at most ``initialization_timeout`` seconds).

    No cluster auto-detection (Slurm, Open MPI, TPU, mpi4py): the address, count and id are
    given, or read from ``JAX_COORDINATOR_ADDRESS`` / ``JAX_LOCAL_DEVICE_IDS`` as JAX does.
    """
    if _client.backend_started():
        raise RuntimeError("jaxprc.distributed.initialize() must be called before any jaxprc calls "
                           "that might initialise the XLA backend. This includes any computation, "
                           "but also calls to jaxprc.devices, jaxprc.device_put, and others.")
    if cluster_detection_method not in (None, "deactivate"):
        raise ValueError(f"distributed.initialize: cluster_detection_method={cluster_detection_method!r} "
                         "is not supported by jaxprc; give coordinator_address, num_processes and "
                         "process_id")
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if isinstance(local_device_ids, int):
        local_device_ids = [local_device_ids]
    if local_device_ids is None and os.environ.get("JAX_LOCAL_DEVICE_IDS"):
        local_device_ids = [int(i) for i in os.environ["JAX_LOCAL_DEVICE_IDS"].split(",")]
    if coordinator_address is None:
        raise ValueError("coordinator_address should be defined.")
    if num_processes is None:
        raise ValueError("Number of processes must be defined.")
    if process_id is None:
        raise ValueError("The process id of the current process must be defined.")
    if not isinstance(process_id, int) or isinstance(process_id, bool):
        raise TypeError("process_id must be a nonnegative int. "
                        f"Got process_id={process_id} of type {type(process_id)}.")
    if not isinstance(num_processes, int) or isinstance(num_processes, bool):
        raise TypeError("num_processes must be a positive int. "
                        f"Got num_processes={num_processes} of type {type(num_processes)}.")
    if not 0 <= process_id < num_processes:
        raise ValueError("process_id and num_processes must be nonnegative, with process_id < "
                         f"num_processes. Got process_id={process_id}, num_processes={num_processes}.")
    if ":" not in coordinator_address or not coordinator_address.rsplit(":", 1)[1].isdigit():
        raise ValueError(f"coordinator_address must be 'host:port', got {coordinator_address!r}")
    bind = (coordinator_bind_address or os.environ.get("JAX_COORDINATOR_BIND_ADDRESS")
            or "[::]:" + coordinator_address.rsplit(":", 1)[1])   # every interface, the same port
    if partition_index is None and slice_index is not None:
        warnings.warn("`slice_index` has been deprecated. Please use `partition_index` instead.",
                      DeprecationWarning, stacklevel=2)
        partition_index = slice_index
    if partition_index is None and os.environ.get("JAX_PARTITION_INDEX"):
        partition_index = int(os.environ["JAX_PARTITION_INDEX"])
    _dist.join(coordinator_address, bind, num_processes, process_id,
               local_device_ids=local_device_ids, init_timeout=initialization_timeout,
               heartbeat_timeout=heartbeat_timeout_seconds, shutdown_timeout=shutdown_timeout_seconds,
               partition_index=partition_index)


def is_initialized() -> bool:
    """Whether ``initialize`` has joined this process (and ``shutdown`` has not left)."""
    return _dist.joined() is not None


def shutdown() -> None:
    """Leave the distributed system (waits for the other processes); nothing if not joined."""
    _dist.leave()
