"""Device arrays: ``Array`` wraps one PJRT buffer (jaxlib's ``ArrayImpl``) with its type.

Without jax, jaxlib's ``ArrayImpl`` has no shape, dtype or numpy conversion of
its own: it carries the aval object we give it. ``Aval`` is that object
(shape, dtype, weak type), interned so that cache keys compare by identity.
"""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np
from jaxlib import _jax

from .client import backend



def no_buffer_format(dtype) -> bool:
    """ml_dtypes' types (bfloat16, float8_*, int4...) have no PEP-3118 format: numpy would read
    their device memory as a 0-d object array, so they come to the host by an explicit copy.
    (Their numpy kinds vary, 'V' or 'f'; all are user-defined numpy dtypes.)"""
    return dtype.isbuiltin == 2


class Aval:
    """Shape, dtype and weak type of a device array; the attributes jaxlib reads.

    Instances are interned: ``Aval.get`` returns one object per (shape, dtype,
    weak_type), so equality is identity and hashing is cheap.
    """

    __slots__ = ("shape", "dtype", "weak_type", "__weakref__")
    _interned: dict = {}

    def __init__(self, shape, dtype, weak_type):
        self.shape, self.dtype, self.weak_type = shape, dtype, weak_type

    @classmethod
    def get(cls, shape, dtype, weak_type=False) -> "Aval":
        key = (tuple(shape), np.dtype(dtype), bool(weak_type))
        aval = cls._interned.get(key)
        if aval is None:     # setdefault: threads racing here still share one object per key
            aval = cls._interned.setdefault(key, cls(*key))
        return aval

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def str_short(self) -> str:
        """``float32[3,4]``: the type as JAX's messages write it."""
        return type_str(self.shape, self.dtype)

    def __repr__(self):       # JAX's form: jaxlib's messages (transfer guards) print it
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"


def type_str(shape, dtype) -> str:
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"


def carries_no_data(dtype) -> bool:
    """A zero-size void dtype (JAX's float0, the tangent type of integers): no device form of its
    own. Devices hold such values as booleans; they come back to the host as numpy zeros."""
    return dtype.kind == "V" and dtype.itemsize == 0


# The dtype of XLA tokens (the IR's ``token``, jaxprc.ir.dtypes, which this layer cannot import).
TOKEN_DTYPE = np.dtype([("token", np.void, 0)])


class Token:
    """The host value of a token (``lax.create_token``): tokens hold no data and jaxlib moves
    none between executions, so outside a program a token is this marker, as JAX's Token."""
    __slots__ = ()
    shape, dtype = (), TOKEN_DTYPE

    def __repr__(self):
        return "Token()"


def host_value_without_data(aval) -> object:
    """The host value of a result that carries no data: a Token, or numpy zeros (float0)."""
    return Token() if aval.dtype == TOKEN_DTYPE else np.zeros(aval.shape, aval.dtype)


def device_aval(aval: Aval) -> Aval:
    """The type a value of ``aval`` has on the device."""
    return Aval.get(aval.shape, np.bool_) if carries_no_data(aval.dtype) else aval


class Array:
    """A value on a device: a PJRT buffer plus its shape, dtype and weak type.

    Arithmetic operators and indexing are installed by ``jaxprc.array_methods``.
    """

    __slots__ = ("_buf", "aval", "__weakref__")
    __array_priority__ = 100

    def __init__(self, _buf, aval: Aval | None = None):
        # (`_buf`: jaxlib's C++ dispatch rebuilds results as `Array(_buf=...)`, compiler/cpp_dispatch.py)
        self._buf = _buf
        self.aval = _buf.aval if aval is None else aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    weak_type = property(lambda self: self.aval.weak_type)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)

    @property
    def nbytes(self) -> int:
        return self.aval.size * self.aval.dtype.itemsize

    @property
    def device(self):
        return backend().device

    def devices(self) -> set:
        return {backend().device}

    # -- host interop ----------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        host = to_numpy(self)
        if dtype is None and not copy:
            return host
        if dtype is not None and np.dtype(dtype) != host.dtype:
            return host.astype(dtype)
        return host.copy() if copy else host

    def item(self, *index):
        return to_numpy(self).item(*index)

    def tolist(self):
        return to_numpy(self).tolist()

    def __bool__(self):
        return bool(to_numpy(self))

    def __int__(self):
        return int(to_numpy(self))

    def __float__(self):
        return float(to_numpy(self))

    def __complex__(self):
        return complex(to_numpy(self))

    def __index__(self):
        if not np.issubdtype(self.dtype, np.integer):
            raise TypeError(f"only integer scalar arrays can be converted to a scalar index, "
                            f"got dtype {self.dtype.name}")
        return int(to_numpy(self))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    __hash__ = None   # mutable-looking array semantics, like numpy and JAX

    def __reduce__(self):       # pickle and deepcopy: the host value, back on the default device
        return _from_host, (np.array(to_numpy(self)), self.weak_type)

    def __repr__(self):
        return _array_repr(self)

    def __str__(self):
        return str(to_numpy(self))

    def __format__(self, spec):
        # as numpy's arrays: only the empty format spec for arrays of rank > 0 (TypeError otherwise)
        return format(to_numpy(self).item(), spec) if not self.shape else format(to_numpy(self), spec)

    def tobytes(self, order="C") -> bytes:
        return to_numpy(self).tobytes(order)

    def copy_to_host_async(self) -> None:
        """Start copying the value to the host, so that a later read does not wait for the copy
        (where device memory is host memory, as on CPU, there is nothing to copy)."""
        for buf in self._check_live().shard_buffers():
            without_jax_import(buf._copy_single_device_array_to_host_async)

    # -- buffer lifetime -------------------------------------------------------
    def _check_live(self) -> "Array":
        if self._buf.is_deleted():
            raise deleted_error(self.shape, self.dtype)
        return self

    def shard_buffers(self) -> list:
        """The single-device ``ArrayImpl`` of each of this process's shards."""
        return [self._buf]

    def unsafe_buffer_pointer(self) -> int:
        """The address of the device buffer (only for arrays on one device)."""
        bufs = self._check_live().shard_buffers()
        if len(bufs) != 1:
            raise ValueError("unsafe_buffer_pointer() is supported only for unsharded arrays.")
        return without_jax_import(bufs[0].unsafe_buffer_pointer)

    def platform(self) -> str:
        """The platform of the array's devices ('cpu', 'cuda', ...), as jaxlib names it."""
        return self._buf.platform()

    def clone(self) -> "Array":
        """Another Array over the same device buffer (jaxlib's clone, as JAX's): deleting or
        donating either deletes both."""
        return self._rewrap(self._check_live()._buf.clone())

    def _rewrap(self, buf) -> "Array":
        return Array(buf, self.aval)

    # JAX 0.10.2 keeps these two names only to point to their replacements.
    @property
    def device_buffer(self):
        raise AttributeError("arr.device_buffer has been deprecated. Use arr.addressable_data(0)")

    @property
    def device_buffers(self):
        raise AttributeError("arr.device_buffers has been deprecated. Use [x.data for x in arr.addressable_shards]")

    def block_until_ready(self) -> "Array":
        self._buf.block_until_ready()
        return self

    def is_ready(self) -> bool:
        return self._buf.is_ready()

    def delete(self) -> None:
        self._buf.delete()

    def is_deleted(self) -> bool:
        return self._buf.is_deleted()

    def on_device_size_in_bytes(self) -> int:
        return self._buf.on_device_size_in_bytes()


def _array_repr(a: Array) -> str:
    """JAX's format: ``Array([0., 1.], dtype=float32)``; weak values add ``weak_type=True``."""
    prefix = "Array("
    dtype_str = f"dtype={a.dtype.name}" + (", weak_type=True" if a.weak_type else "")
    if a.is_deleted():
        return f"{prefix}<deleted>, shape={a.shape}, {dtype_str})"
    line_width = np.get_printoptions()["linewidth"]
    if a.size == 0:
        body = f"[], shape={a.shape}"
    else:
        body = np.array2string(to_numpy(a), prefix=prefix, suffix=",", separator=", ",
                               max_line_width=line_width)
    last_line_len = len(body) - body.rfind("\n") + 1
    # Same wrapping rule as JAX, so reprs match character for character.
    sep = " " * len(prefix) if last_line_len + len(dtype_str) + 2 > line_width else " "
    return f"{prefix}{body},{sep}{dtype_str})"


class DeletedArrayError(RuntimeError):
    """An Array whose buffer was deleted (explicitly or by donation) was used."""


def deleted_error(shape, dtype, detail: str = "") -> DeletedArrayError:
    """JAX's error for a deleted array (``Array has been deleted with shape=float32[3].``), then
    ``detail`` (where it was used) and how that happens."""
    where = f" {detail}" if detail else ""
    return DeletedArrayError(
        f"Array has been deleted with shape={type_str(shape, dtype)}.{where} Its buffer "
        "was donated to a jitted computation (donate_argnums) or freed with .delete().")


def to_numpy(a: Array) -> np.ndarray:
    """The host value of a device array: a read-only view of device memory on CPU."""
    if type(a) is not Array:      # sharded over several devices (runtime/sharded.py)
        return a.host_value()
    buf = a._buf
    if buf.is_deleted():
        raise deleted_error(a.shape, a.dtype)
    # ml_dtypes' types have no buffer format (no_buffer_format), and device memory is not
    # host-addressable: both take an explicit copy.
    if a.aval.dtype.isbuiltin != 2 and backend().platform == "cpu":
        return np.asarray(buf)
    return _copy_to_host(buf)


class _NoJaxInThisCall(threading.local):
    """An import hook (first on ``sys.meta_path``) that fails imports of jax fast, in the calling
    thread only and only inside ``without_jax_import``: other threads import jax as usual."""
    active = False

    def find_spec(self, name, path=None, target=None):
        if self.active and (name == "jax" or name.startswith("jax.")):
            raise ModuleNotFoundError(f"No module named {name!r} (jaxprc: not imported by jaxlib calls)",
                                      name=name)
        return None


_NO_JAX = _NoJaxInThisCall()
sys.meta_path.insert(0, _NO_JAX)


def without_jax_import(fn, *args):
    """Run a jaxlib call whose C++ imports jax when installed (notes §0.1: to make avals):
    unless the user has imported jax, the import is made to fail fast, for this thread only."""
    if "jax" in sys.modules or _NO_JAX.active:
        return fn(*args)
    _NO_JAX.active = True
    try:
        return fn(*args)
    finally:
        _NO_JAX.active = False


def _copy_to_host(buf) -> np.ndarray:
    """jaxlib's device-to-host copy (it imports jax, see ``without_jax_import``)."""
    return without_jax_import(buf._single_device_array_to_np_array_did_copy)[0]


def to_buffer(x, aval: Aval):
    """A device buffer holding host value ``x`` converted to ``aval``'s dtype.

    The device never aliases a numpy buffer the caller can still write to
    (zero-copy transfers race with later host writes, notes §0.5): such
    buffers are copied synchronously; only arrays created here are handed over.
    """
    if carries_no_data(aval.dtype):
        aval, x = device_aval(aval), np.zeros(aval.shape, np.bool_)
    host = np.asarray(x, aval.dtype)
    owned = host is not x and host.base is None
    if not host.flags.c_contiguous:
        host, owned = np.ascontiguousarray(host), True
    b = backend()
    try:
        return _jax.batched_device_put(aval, b.sharding, [host], [b.device],
                                       force_copy=not owned, enable_x64=True)
    except _jax.JaxRuntimeError as e:
        if "Unknown NumPy dtype" not in str(e):
            raise
        # float6_* (ml_dtypes has them; XLA's runtime does not)
        raise TypeError(f"{aval.dtype.name} arrays cannot be placed on the {b.platform} device: "
                        "XLA's runtime has no buffers of that type") from None


def _from_host(value: np.ndarray, weak_type: bool) -> Array:
    aval = Aval.get(value.shape, value.dtype, weak_type)
    return Array(to_buffer(value, aval), aval)


@contextlib.contextmanager
def explicit_transfers(direction: str):
    """Marks the transfers made in the block as explicit ones (``direction``: 'device_put' or
    'device_get'), which only the transfer guard's ``*_explicit`` levels guard (jaxlib's
    thread-local guard state)."""
    state = _jax.guard_lib.thread_local_state()
    attr = f"explicit_{direction}"
    saved = getattr(state, attr)
    setattr(state, attr, True)
    try:
        yield
    finally:
        setattr(state, attr, saved)


def device_put(x, weak_type: bool = False) -> Array:
    """Copy a host value (numpy array, scalar, nested lists) to the default device.

    The value's dtype is kept as is: canonicalisation (x64) is the caller's business.
    """
    if type(x) is Array:
        return x
    host = np.asarray(x)
    aval = Aval.get(host.shape, host.dtype, weak_type)
    return Array(to_buffer(x if host is x else host, aval), aval)
