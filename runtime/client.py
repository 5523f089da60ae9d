"""The PJRT client: created lazily, once per process, for one platform.

CPU always works. CUDA is used when a CUDA PJRT plugin package
(``jax-cuda12-pjrt`` / ``jax-cuda13-pjrt``) is installed and a GPU is visible;
``JAXPRC_PLATFORM=cpu|cuda`` forces a choice. ``JAXPRC_NUM_CPU_DEVICES=N`` (read when the
client is created) gives the CPU client N devices (JAX's ``jax_num_cpu_devices``). The plugin's Python package
imports ``jax``, so we only *locate* its shared library and load it through
jaxlib's own plugin loading. After ``jaxprc.distributed.initialize`` the client is made
joined to the other processes (``distributed.py``): ``devices`` are then every process's
devices, ``local_devices`` this process's.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import pathlib
import threading
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # before jaxlib loads libjax_common

from jaxlib import _jax, xla_client as xc  # noqa: E402

from . import distributed  # noqa: E402

_REPLICATED = xc.HloSharding.replicate()

# jaxlib records a Python traceback with every execution while tracebacks are enabled (its
# default), and without jax's hooks nothing releases them: ~70 bytes leaked per call. jaxprc
# reads none of them.
_jax.set_tracebacks_enabled(False)


class DeviceSharding(_jax.SingleDeviceSharding):
    """A single-device sharding usable without jax.

    jaxlib's C++ calls ``memory_kind`` and ``_to_xla_hlo_sharding`` on shardings;
    jax monkeypatches them onto the base class, we define them on a subclass.
    """
    memory_kind = None

    def _to_xla_hlo_sharding(self, ndim):
        return _REPLICATED

    def __repr__(self):      # JAX's form: jaxlib's messages (transfer guards) print it
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self._device.default_memory().kind})"


class Backend:
    """One PJRT client with its devices and the sharding of its default device."""

    def __init__(self, client, platform: str):
        self.client = client
        self.platform = platform                      # "cpu" or "gpu" (JAX's names)
        self.devices = list(client.devices())               # every process's, in the global order
        self.local_devices = list(client.local_devices())
        self.process_index = client.process_index()
        self.device = self.local_devices[0]
        self.sharding = DeviceSharding(self.device)
        self.device_list = xc.DeviceList((self.device,))


_BACKEND: Backend | None = None
_BACKEND_LOCK = threading.Lock()


def backend() -> Backend:
    """The process's backend, created on first use (once, whichever thread asks first)."""
    global _BACKEND
    if _BACKEND is None:
        with _BACKEND_LOCK:
            if _BACKEND is None:
                _BACKEND = _make_backend(os.environ.get("JAXPRC_PLATFORM", "").strip().lower())
    return _BACKEND


def backend_started() -> bool:
    """Whether the client exists (then joining other processes is too late)."""
    return _BACKEND is not None


def devices() -> list:
    return list(backend().devices)


def default_backend() -> str:
    return backend().platform


def _make_backend(requested: str) -> Backend:
    if requested not in ("", "cpu", "cuda", "gpu"):
        raise ValueError(f"JAXPRC_PLATFORM={requested!r}: expected 'cpu' or 'cuda'")
    if requested in ("cuda", "gpu"):
        plugin = find_cuda_plugin()
        if plugin is None:
            raise RuntimeError("JAXPRC_PLATFORM=cuda, but no CUDA PJRT plugin is installed "
                               "(pip install jax-cuda12-pjrt or jax-cuda13-pjrt).")
        return Backend(_make_cuda_client(plugin), "gpu")   # errors (no GPU) propagate
    if requested == "":
        plugin = find_cuda_plugin()
        if plugin is not None:
            try:
                return Backend(_make_cuda_client(plugin), "gpu")
            except Exception as e:   # noqa: BLE001 -- plugin present but no usable GPU
                warnings.warn(f"A CUDA PJRT plugin is installed but no GPU could be used ({e}); "
                              "falling back to the CPU. Set JAXPRC_PLATFORM=cpu to silence this.",
                              RuntimeWarning, stacklevel=3)
    return Backend(xc.make_cpu_client(**_cpu_device_count(), **distributed.cpu_client_options()), "cpu")


def _cpu_device_count() -> dict:
    """``num_devices`` for the CPU client from ``JAXPRC_NUM_CPU_DEVICES``; without it jaxlib's
    default (one device, or ``XLA_FLAGS=--xla_force_host_platform_device_count=N``)."""
    text = os.environ.get("JAXPRC_NUM_CPU_DEVICES", "").strip()
    if not text:
        return {}
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"JAXPRC_NUM_CPU_DEVICES={text!r}: expected a positive integer")
    return {"num_devices": int(text)}


# ------------------------------------------------------------------ CUDA

def find_cuda_plugin() -> str | None:
    """Path of an installed ``xla_cuda_plugin.so``, without importing its (jax-importing) package."""
    for pkg in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ModuleNotFoundError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            so = pathlib.Path(list(spec.submodule_search_locations)[0]) / "xla_cuda_plugin.so"
            if so.exists():
                return str(so)
    return None


# Libraries jax preloads from the `nvidia` pip packages; some are not on the plugin's RPATH.
_NVIDIA_LIBS = ("cuda_runtime", "cuda_nvrtc", "nvjitlink", "cublas", "nccl", "cuda_cupti",
                "cusparse", "cusolver", "cufft", "nvshmem", "cudnn", "cu13")


def _preload_nvidia_libraries() -> None:
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ModuleNotFoundError, ValueError):
        return
    if spec is None or not spec.submodule_search_locations:
        return
    for root in spec.submodule_search_locations:
        for lib in _NVIDIA_LIBS:
            for so in sorted(glob.glob(os.path.join(root, lib, "lib", "lib*.so*"))):
                try:
                    ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)
                except OSError:   # a library needing another one not found: the plugin may not need it
                    pass


def _make_cuda_client(plugin_path: str):
    _preload_nvidia_libraries()
    if not xc.pjrt_plugin_loaded("cuda"):
        xc.load_pjrt_plugin_dynamically("cuda", plugin_path)
    if not xc.pjrt_plugin_initialized("cuda"):
        xc.initialize_pjrt_plugin("cuda")
    options, dist_client = distributed.plugin_client_options(xc.generate_pjrt_gpu_plugin_options())
    return xc.make_c_api_client("cuda", options, dist_client)
