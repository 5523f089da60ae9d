"""jaxlib's LAPACK kernels for the CPU client.

jaxlib ships them as XLA FFI handlers (``lapack_?getrf_ffi``, ...) that must be
registered with XLA before a program calling them compiles, and its LAPACK
module initialised before one runs: an uninitialised kernel segfaults.
Initialising binds the BLAS/LAPACK routines SciPy exports
(``scipy.linalg.cython_lapack``), so these kernels need SciPy installed, as
jax does; without it the first use raises an ImportError saying so.
``ensure_registered`` does both steps, once per process; lowering rules that
emit such a call run it first.
"""
from __future__ import annotations

import threading

import numpy as np
from jaxlib import xla_client as xc

_LOCK = threading.Lock()
_REGISTERED = False


def ensure_registered() -> None:
    """Register every LAPACK FFI target with XLA's CPU platform and initialise them (idempotent)."""
    global _REGISTERED
    if _REGISTERED:
        return
    with _LOCK:
        if _REGISTERED:
            return
        from jaxlib import lapack
        try:
            lapack._lapack.initialize()
        except ImportError as e:
            raise ImportError("Linear algebra on the CPU runs jaxlib's LAPACK kernels, which take their LAPACK "
                              "routines from SciPy (scipy.linalg.cython_lapack), as jax does: install scipy "
                              f"to use it ({e})") from e
        for name, capsule, api_version in lapack.registrations()["cpu"]:
            xc.register_custom_call_target(name, capsule, platform="cpu", api_version=api_version)
        for name in lapack.batch_partitionable_targets():   # lets SPMD split the batch dimensions
            xc.register_custom_call_as_batch_partitionable(name)
        _REGISTERED = True


def target(routine: str, dtype) -> str:
    """The FFI target of a LAPACK routine for ``dtype``: ``target("getrf", float32)`` is
    ``lapack_sgetrf_ffi``; the orthogonal/unitary families (orgqr/ungqr, syevd/heevd) are
    named by their real spelling and renamed for complex dtypes."""
    dtype = np.dtype(dtype)
    prefix = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}.get(dtype.type)
    if prefix is None:
        raise TypeError(f"LAPACK has no {routine} kernel for {dtype}")
    if dtype.kind == "c":
        routine = {"orgqr": "ungqr", "ormqr": "unmqr", "syevd": "heevd", "sytrd": "hetrd"}.get(routine, routine)
    return f"lapack_{prefix}{routine}_ffi"
