"""``jaxprc.extend.backend``: the PJRT client jaxprc runs on (one per process)."""
from jaxprc.runtime import backend as _runtime_backend

from ..toplevel import _backend, clear_caches

__all__ = ["backends", "get_backend", "get_default_device", "clear_backends"]


def get_backend(platform=None):
    """The jaxlib PJRT client of ``platform`` (None: the default one)."""
    return _backend(platform).client


def backends() -> dict:
    """Platform name -> client, for the platforms this process runs on."""
    backend = _runtime_backend()
    return {backend.platform: backend.client}


def get_default_device():
    return _runtime_backend().device


def clear_backends() -> None:
    """Drop compiled programs. jaxprc keeps one client per process, which stays."""
    clear_caches()
