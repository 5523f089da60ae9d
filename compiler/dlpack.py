"""``jaxprc.dlpack``: arrays exchanged with other libraries through DLPack (JAX's ``jax.dlpack``).

``from_dlpack(x)`` takes any object with ``__dlpack__`` and ``__dlpack_device__`` (a numpy array,
a torch tensor, a jaxprc Array); jaxprc Arrays export themselves the same way, so
``numpy.from_dlpack(jaxprc_array)`` works.

Copies: by default (``copy=None``) and with ``copy=True`` the result is a copy, complete before
``from_dlpack`` returns, so writing to the producer's memory afterwards never reaches it (JAX
aliases by default, which makes such a write change a JAX array). ``copy=False`` aliases the
producer's memory, as JAX does: the producer must then not write to it while the result
lives. Values are converted to jaxprc's dtypes (``float64`` becomes ``float32`` unless x64 is
on), which is a copy whatever ``copy`` says. Exports (``Array.__dlpack__``) share the array's
memory unless ``copy=True``; numpy makes read-only arrays of them.
"""
from __future__ import annotations

import numpy as np

from . import runtime
from .api import device_put
from .ir import dtypes as dt
from .runtime import Array
from .runtime.dlpack import PLATFORM_OF, SUPPORTED_DTYPES, DLDeviceType, copy_to_host, import_capsule
from .sharding import Sharding

__all__ = ["from_dlpack", "is_supported_dtype"]


def is_supported_dtype(dtype) -> bool:
    """Whether arrays of ``dtype`` can be exchanged through DLPack."""
    if dtype is None:      # numpy would read None as float64
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return np.dtype(dtype) in SUPPORTED_DTYPES


def _platform(name: str) -> str:
    return "cuda" if name == "gpu" else name


def from_dlpack(external_array, device=None, copy: bool | None = None) -> Array:
    """A jaxprc Array of the DLPack tensor ``external_array`` (see the module's note on copies).
    ``device``: a Device or single-device Sharding to put the result on."""
    if isinstance(device, Sharding):
        if len(device.device_set) > 1:
            raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular device, but a "
                             f"Sharding with {len(device.device_set)} devices was provided.")
        device, = device.device_set
    if not hasattr(external_array, "__dlpack__") or not hasattr(external_array, "__dlpack_device__"):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods.")
    b = runtime.backend()
    dl_type, dl_id = external_array.__dlpack_device__()
    platform = PLATFORM_OF.get(dl_type)
    if platform is None or (platform != "cpu" and platform != _platform(b.platform)):
        raise TypeError(f"Array passed to from_dlpack is on unsupported device type (DLDeviceType: {dl_type}); "
                        f"jaxprc runs on '{b.platform}'.")
    wanted = device if device is not None else b.device
    if platform != _platform(b.platform) or dl_id != b.device.local_hardware_id:
        # Host memory for a GPU process, or another device's: it must move, through the host.
        if copy is False:
            raise ValueError(f"from_dlpack: the tensor is on DLPack device ({int(dl_type)}, {dl_id}), which "
                             f"requires a copy to {wanted!r}, however copy=False. Set copy=True or copy=None.")
        return device_put(np.from_dlpack(external_array, copy=True), device)
    if device is not None and device != b.device and copy is False:
        raise ValueError(f"Specified device={device!r} which requires a copy since the source device is "
                         f"{b.device!r}, however copy=False. Set copy=True or copy=None.")
    stream = None
    if dl_type == DLDeviceType.kDLCUDA:       # the producer orders its work before this stream's
        stream = b.device.get_stream_for_external_ready_events()
    buf, aval, row_major = import_capsule(external_array.__dlpack__(stream=stream), b.device, stream)
    canonical = runtime.Aval.get(aval.shape, dt.canonicalize_dtype(aval.dtype))
    if copy is False and (canonical.dtype != aval.dtype or not row_major):
        why = (f"its dtype {aval.dtype} becomes {canonical.dtype}" if row_major else
               "its strides permute the dimensions (jaxprc's arrays are row-major)")
        raise ValueError(f"from_dlpack(copy=False): the tensor cannot be used in place: {why}. "
                         "Set copy=True or copy=None.")
    if copy is False:
        result = Array(buf, aval)
    else:       # to_buffer copies synchronously: done before the producer may write again
        result = Array(runtime.to_buffer(copy_to_host(buf), canonical), canonical)
    return result if device is None or device == b.device else device_put(result, device)
