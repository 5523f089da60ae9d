"""DLPack: device buffers exchanged with other array libraries without going through numpy.

Export (``Array.__dlpack__``) hands out jaxlib's capsule of the array's buffer. Import
(``import_capsule``) reads the capsule's shape and dtype itself (jaxlib's buffer from a capsule
has no type attached, and its Python-side typing would import jax, notes §0.1), then lets
jaxlib wrap the producer's memory. That buffer aliases the producer: callers copy it unless
the user asked for aliasing (compiler/dlpack.py).
"""
from __future__ import annotations

import ctypes
import enum

import ml_dtypes
import numpy as np
from jaxlib import _jax

from .array import Array, Aval, DeletedArrayError, _copy_to_host, to_buffer, to_numpy, without_jax_import
from .client import backend


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLROCM = 10


# The platform whose PJRT client holds memory of a DLPack device type.
PLATFORM_OF = {DLDeviceType.kDLCPU: "cpu", DLDeviceType.kDLCUDA: "cuda", DLDeviceType.kDLCUDAHost: "cuda",
               DLDeviceType.kDLROCM: "rocm"}

MIN_DLPACK_VERSION = (0, 5)


class _DLTensor(ctypes.Structure):
    """The head of a (legacy, unversioned) ``DLManagedTensor``: dlpack.h's ``DLTensor``."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# (DLDataTypeCode, bits) -> numpy dtype: codes 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool.
_DTYPES = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
           (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64,
           (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (4, 16): ml_dtypes.bfloat16,
           (5, 64): np.complex64, (5, 128): np.complex128, (6, 8): np.bool_}
SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in _DTYPES.values())

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


def describe(capsule) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of an unconsumed ``dltensor`` capsule."""
    if not _is_valid(capsule, b"dltensor"):
        raise TypeError("from_dlpack: __dlpack__() did not return an unused 'dltensor' capsule")
    t = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
    dtype = _DTYPES.get((t.code, t.bits)) if t.lanes == 1 else None
    if dtype is None:
        raise TypeError(f"from_dlpack: DLPack data type (code {t.code}, {t.bits} bits, {t.lanes} lanes) "
                        f"has no jaxprc dtype; supported: {sorted(d.name for d in SUPPORTED_DTYPES)}")
    return tuple(t.shape[i] for i in range(t.ndim)), np.dtype(dtype)


def import_capsule(capsule, device, stream) -> tuple:
    """(jaxlib buffer on ``device`` aliasing the capsule's memory, typed with its Aval; the Aval;
    whether its layout is XLA's default, row-major). Strides that permute the dimensions give
    the buffer another layout, which only jaxlib's own host copy (``copy_to_host``) reads."""
    shape, dtype = describe(capsule)
    aval = Aval.get(shape, dtype)
    raw = without_jax_import(_jax.dlpack_managed_tensor_to_buffer, capsule, device, stream)
    row_major = raw._pjrt_layout._xla_layout().minor_to_major() == tuple(range(len(shape) - 1, -1, -1))
    return _jax.ArrayImpl(aval, backend().sharding, [raw], True, _skip_checks=True), aval, row_major


def copy_to_host(buf):
    """A host copy of the buffer, whatever its layout."""
    return _copy_to_host(buf)


def export_buffer(buf, stream):
    """jaxlib's capsule of ``buf`` (its memory, shared with the consumer)."""
    return _jax.buffer_to_dlpack_managed_tensor(buf, stream=stream)


# ------------------------------------------------------------- Array's protocol methods

def _exported_buffer(a: Array, what: str):
    if type(a) is not Array:
        raise BufferError(f"{what}: the array is laid out over several devices; DLPack exchanges "
                          "single-device arrays (take a shard's data first)")
    if a._buf.is_deleted():
        raise DeletedArrayError(f"{what} of an Array that has been deleted (donated or .delete()d)")
    return a._buf


def _dlpack_device(self) -> tuple[DLDeviceType, int]:
    """(DLPack device type, device number) of the memory ``__dlpack__`` exports."""
    _exported_buffer(self, "__dlpack_device__")
    dev = backend().device
    kind = {"cpu": DLDeviceType.kDLCPU, "cuda": DLDeviceType.kDLCUDA, "rocm": DLDeviceType.kDLROCM}.get(dev.platform)
    if kind is None:
        raise BufferError(f"__dlpack_device__: DLPack has no device type for platform '{dev.platform}'")
    return kind, dev.local_hardware_id


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this array (the array API's ``__dlpack__``). It shares the array's
    memory unless ``copy=True``; consumers must not write to shared memory (numpy marks the
    arrays it makes of it read-only)."""
    buf = _exported_buffer(self, "__dlpack__")
    here = _dlpack_device(self)
    if dl_device is not None and tuple(dl_device) != tuple(here):
        raise BufferError(f"__dlpack__: the array is on DLPack device {tuple(map(int, here))}; exporting "
                          f"to dl_device={tuple(dl_device)} is not supported (device_put it there first)")
    if max_version is not None and tuple(max_version) < MIN_DLPACK_VERSION:
        raise BufferError(f"__dlpack__: DLPack versions below {MIN_DLPACK_VERSION} are not supported "
                          f"(max_version={tuple(max_version)})")
    if copy:          # a private buffer (jaxlib's clone() would share this one)
        buf = to_buffer(to_numpy(self), self.aval)
    return export_buffer(buf, stream)


Array.__dlpack__ = _dlpack
Array.__dlpack_device__ = _dlpack_device
