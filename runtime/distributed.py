"""Several processes joined into one system: jaxlib's coordination service and its client.

Process 0 runs the coordination service; every process connects a client to it. The
backend client made afterwards (``client.py``) hands that client to PJRT, which then
lists every process's devices (the same global order everywhere) and, on CPU, runs
collectives across processes through gloo (notes/distributed.md §4). Without gloo a
multi-process CPU program fails to compile (§0.8).
"""
from __future__ import annotations

import atexit
import errno
import socket
import time
from dataclasses import dataclass

from jaxlib import _jax


@dataclass
class Joined:
    """The running distributed system, as this process sees it."""
    process_id: int
    num_processes: int
    client: object                      # _jax.DistributedRuntimeClient
    service: object | None              # _jax.DistributedRuntimeService (process 0 only)
    preemption: object                  # _jax.PreemptionSyncManager (its SIGTERM notice, as in JAX)
    local_device_ids: tuple | None      # GPU: the visible devices of this process
    partition_index: int | None


_JOINED: list = [None]


def joined() -> Joined | None:
    return _JOINED[0]


def join(coordinator_address: str, bind_address: str, num_processes: int, process_id: int, *,
         local_device_ids, init_timeout: int, heartbeat_timeout: int, shutdown_timeout: int,
         partition_index) -> Joined:
    """Start the service (process 0) and connect this process's client; blocks until every
    process has connected or ``init_timeout`` seconds have passed. Once the service answers,
    jaxlib's own failures (processes that never join, a count that differs) abort the process
    with jaxlib's message, as in JAX."""
    if _JOINED[0] is not None:
        raise RuntimeError("distributed.initialize should only be called once.")
    service = None
    if process_id == 0:
        _check_free(bind_address)
        try:
            service = _jax.get_distributed_runtime_service(bind_address, num_processes,
                                                           heartbeat_timeout=heartbeat_timeout,
                                                           shutdown_timeout=shutdown_timeout)
        except _jax.JaxRuntimeError as e:
            raise RuntimeError(f"distributed.initialize: process 0 could not start the coordination "
                               f"service on {bind_address}: {e}") from None
    try:
        _wait_until_reachable(coordinator_address, init_timeout)
        client = _jax.get_distributed_runtime_client(coordinator_address, process_id,
                                                     init_timeout=init_timeout, use_compression=True,
                                                     heartbeat_timeout=heartbeat_timeout)
        client.connect()
        preemption = _jax.create_preemption_sync_manager()
        preemption.initialize(client)
    except BaseException:
        if service is not None:   # a failed join leaves nothing running: initialize may be retried
            service.shutdown()
        raise
    _JOINED[0] = Joined(process_id, num_processes, client, service, preemption,
                        None if local_device_ids is None else tuple(local_device_ids), partition_index)
    atexit.register(leave)      # as JAX: a process that exits without shutdown() still leaves cleanly
    return _JOINED[0]


def _check_free(bind_address: str) -> None:
    """A clear error when another socket holds the service's port: jaxlib's failed server start
    sometimes segfaults while cleaning up (seen with 0.10.2)."""
    host, port = bind_address.rsplit(":", 1)
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:             # no such address family here: let jaxlib try
        return
    with probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the server: TIME_WAIT is fine
        try:
            probe.bind((host, int(port)))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise RuntimeError(f"distributed.initialize: process 0 could not start the coordination "
                                   f"service on {bind_address}: the port is in use") from None


def _wait_until_reachable(address: str, timeout: float) -> None:
    """Raise a clear error when nothing listens at ``address`` within ``timeout`` seconds: jaxlib's
    client aborts the whole process when it cannot reach the service (notes §0.8)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"distributed.initialize: no coordination service answers at {address} "
                                   f"(waited {timeout} s; process 0 starts it): {e}") from None
            time.sleep(0.1)


def leave() -> None:
    """Disconnect this process (waiting for the others, as the service requires) and stop the
    service on process 0. The backend client made while joined stays as it is."""
    state, _JOINED[0] = _JOINED[0], None
    if state is None:
        return
    state.preemption.shutdown()         # before the client it uses
    state.client.shutdown()
    if state.service is not None:
        state.service.shutdown()


def cpu_client_options() -> dict:
    """``make_cpu_client`` arguments joining the CPU client to the system (none if not joined)."""
    state = _JOINED[0]
    if state is None:
        return {}
    return {"distributed_client": state.client, "node_id": state.process_id,
            "num_nodes": state.num_processes,
            "collectives": _jax.make_gloo_tcp_collectives(distributed_client=state.client)}


def plugin_client_options(options: dict) -> tuple[dict, object]:
    """A PJRT plugin's (GPU's) creation options and distributed client, joined if we are."""
    state = _JOINED[0]
    if state is None:
        return options, None
    options = dict(options, node_id=state.process_id, num_nodes=state.num_processes)
    if state.local_device_ids is not None:
        options["visible_devices"] = list(state.local_device_ids)
    if state.partition_index is not None:
        options["partition_index"] = state.partition_index
    return options, state.client
