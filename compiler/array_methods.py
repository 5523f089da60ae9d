"""Operators and methods of arrays: installs ``+ - * / ... [] .at .T .reshape .sum ...`` on
``jaxprc.ir.Tracer`` and ``jaxprc.Array``, implemented with ``jaxprc.numpy``.

``install()`` runs when ``jaxprc.numpy`` is imported (``import jaxprc`` does).
"""
from __future__ import annotations

import numpy as np

from jaxprc.ir.tracing import Tracer, get_aval
from jaxprc.numpy._util import from_jax_array


_JNP = None


def _numpy():
    global _JNP
    if _JNP is None:       # imported on first use (jaxprc.numpy imports this module)
        import jaxprc.numpy as jnp
        _JNP = jnp
    return _JNP


def _binary(name: str, reflected: bool = False):
    def op(self, other):
        other = from_jax_array(other)
        if type(other) is not type(self) and type(other) not in _SCALARS and not _is_operand(other):
            return NotImplemented
        fn = getattr(_numpy(), name)
        return fn(other, self) if reflected else fn(self, other)
    return op


_SCALARS = (bool, int, float, complex)


def _is_operand(x) -> bool:
    if type(x) is Tracer:
        return True
    if isinstance(x, (list, tuple, dict, set, str)) or x is None:
        return False
    try:
        get_aval(x)
        return True
    except TypeError:
        return False


def _unary(name: str):
    def op(self):
        return getattr(_numpy(), name)(self)
    return op


def _method(name: str):
    """``x.name(*args, **kw)`` calls ``jnp.name(x, *args, **kw)``."""
    def method(self, *args, **kwargs):
        return getattr(_numpy(), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _reshape(self, *shape, order="C"):
    shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
    return _numpy().reshape(self, shape, order=order)


def _transpose(self, *axes):
    axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
    return _numpy().transpose(self, axes)


def _astype(self, dtype, copy=False):
    from jaxprc.ir import dtypes as dt
    from jaxprc.numpy._dtypes import to_dtype
    from jaxprc.numpy._util import convert
    return convert(self, dt.canonicalize_dtype(to_dtype(dtype)))


def _getitem(self, idx):
    from jaxprc.numpy.indexing import getitem
    return getitem(self, idx)


def _at(self):
    from jaxprc.numpy.indexing import _IndexUpdateHelper
    return _IndexUpdateHelper(self)


def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))


def _round(self, decimals=0, out=None):
    return _numpy().round(self, decimals)


def _python_round(self, ndigits=None):
    """``round(x)`` gives an integer array, ``round(x, n)`` one of x's dtype (as in JAX)."""
    rounded = _numpy().round(self, 0 if ndigits is None else ndigits)
    return rounded if ndigits is not None else rounded.astype(_numpy().int_)


def _setitem(self, idx, value):
    raise TypeError(f"{type(self).__name__}s are immutable and do not support in-place item "
                    "assignment; instead of x[idx] = y, use x = x.at[idx].set(y) (or .add, .mul, "
                    ".min, .max).")


def _copy(self):
    return _numpy().array(self, copy=True)


def _compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
    return _numpy().compress(condition, self, axis=axis, out=out, size=size, fill_value=fill_value)


def _view(self, dtype=None, type=None):
    """The array's bits read as ``dtype``: the last axis grows or shrinks by the ratio of the
    item sizes (numpy's ``view``); booleans count as bytes, complex numbers as two floats."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    from jaxprc import lax
    from jaxprc.ir import dtypes as dt
    from jaxprc.numpy._dtypes import to_dtype
    jnp = _numpy()
    dtype = dt.canonicalize_dtype(to_dtype(dtype))
    bits_in, bits_out = dt.bit_width(self.dtype), dt.bit_width(dtype)
    if self.ndim == 0:
        if bits_in != bits_out:
            raise ValueError("view() of a 0d array is only supported if the itemsize is unchanged.")
        return _view(jnp.expand_dims(self, 0), dtype).squeeze()
    if (self.shape[-1] * bits_in) % bits_out:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the total size "
                         "in bytes of the last axis of the array.")
    if self.dtype == dtype:
        return self
    # bitcast_convert_type takes neither booleans nor complex numbers: go through bytes and floats.
    if self.dtype == bool:
        return _view(self.astype(np.uint8), dtype)
    if dt.is_complex(self.dtype):
        parts = jnp.stack([jnp.real(self), jnp.imag(self)], axis=-1)
        return _view(parts.reshape(*self.shape[:-1], 2 * self.shape[-1]), dtype)
    if dtype == bool:
        return _view(self, np.uint8).astype(bool)
    if dt.is_complex(dtype):
        parts = _view(self, dt.finfo(dtype).dtype)
        return jnp.real(parts[..., 0::2]).astype(dtype) + 1j * parts[..., 1::2].astype(dtype)
    if bits_in < bits_out:
        factor = bits_out // bits_in
        return lax.bitcast_convert_type(self.reshape(*self.shape[:-1], self.shape[-1] // factor, factor), dtype)
    out = lax.bitcast_convert_type(self, dtype)
    return out.reshape(*out.shape[:-2], out.shape[-2] * out.shape[-1]) if bits_in > bits_out else out


def _byteswap(self):
    """The elements with their bytes in reverse order (the other endianness), dtype kept."""
    from jaxprc import lax
    from jaxprc.ir import dtypes as dt
    jnp = _numpy()
    if dt.is_complex(self.dtype):
        return lax.complex(_byteswap(jnp.real(self)), _byteswap(jnp.imag(self)))
    if self.dtype.itemsize == 1:
        return _copy(self)
    swapped = lax.rev(lax.bitcast_convert_type(self, np.uint8), (self.ndim,))
    return lax.bitcast_convert_type(swapped, self.dtype)


def _to_device(self, device, *, stream=None):
    """The array placed on ``device`` (a Device or Sharding), as ``device_put``."""
    if stream is not None:
        raise NotImplementedError("stream argument of array.to_device()")
    from jaxprc import device_put
    return device_put(self, device)


def _flat(self):
    raise NotImplementedError("JAX Arrays do not implement the arr.flat property: consider arr.flatten() instead.")


def _tracer_tobytes(self, order="C"):
    return self._concrete("tobytes()").tobytes(order)


def _tracer_unsafe_buffer_pointer(self):
    # A traced value has no buffer, even where its value could be computed.
    from jaxprc.ir.tracing import ConcretizationTypeError, _concretization_message
    raise ConcretizationTypeError(_concretization_message(self, "unsafe_buffer_pointer()"))


_OPERATORS = {
    "__add__": _binary("add"), "__radd__": _binary("add", True),
    "__sub__": _binary("subtract"), "__rsub__": _binary("subtract", True),
    "__mul__": _binary("multiply"), "__rmul__": _binary("multiply", True),
    "__truediv__": _binary("true_divide"), "__rtruediv__": _binary("true_divide", True),
    "__floordiv__": _binary("floor_divide"), "__rfloordiv__": _binary("floor_divide", True),
    "__mod__": _binary("remainder"), "__rmod__": _binary("remainder", True),
    "__divmod__": _binary("divmod"), "__rdivmod__": _binary("divmod", True),
    "__pow__": _binary("power"), "__rpow__": _binary("power", True),
    "__matmul__": _binary("matmul"), "__rmatmul__": _binary("matmul", True),
    "__and__": _binary("bitwise_and"), "__rand__": _binary("bitwise_and", True),
    "__or__": _binary("bitwise_or"), "__ror__": _binary("bitwise_or", True),
    "__xor__": _binary("bitwise_xor"), "__rxor__": _binary("bitwise_xor", True),
    "__lshift__": _binary("left_shift"), "__rlshift__": _binary("left_shift", True),
    "__rshift__": _binary("right_shift"), "__rrshift__": _binary("right_shift", True),
    "__eq__": _binary("equal"), "__ne__": _binary("not_equal"),
    "__lt__": _binary("less"), "__le__": _binary("less_equal"),
    "__gt__": _binary("greater"), "__ge__": _binary("greater_equal"),
    "__neg__": _unary("negative"), "__pos__": _unary("positive"), "__abs__": _unary("absolute"),
    "__invert__": _unary("invert"),
    "__getitem__": _getitem, "__setitem__": _setitem, "__iter__": _iter, "__round__": _python_round,
}

_METHODS = {name: _method(name) for name in (
    "sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "squeeze", "ravel",
    "cumsum", "cumprod", "clip", "dot", "conj", "conjugate", "swapaxes", "var", "std", "take",
    "repeat", "sort", "argsort", "nonzero", "diagonal", "trace", "ptp", "argpartition", "choose",
    "searchsorted")}
_METHODS.update(reshape=_reshape, transpose=_transpose, astype=_astype, round=_round,
                flatten=_method("ravel"), copy=_copy)
_METHODS.update(compress=_compress, view=_view, byteswap=_byteswap, to_device=_to_device)
# Tracers only: an Array reads its buffer (jaxprc.runtime.Array).
_TRACER_METHODS = {"tobytes": _tracer_tobytes, "unsafe_buffer_pointer": _tracer_unsafe_buffer_pointer}

_PROPERTIES = {
    "T": lambda self: _numpy().transpose(self),
    "mT": lambda self: _numpy().matrix_transpose(self),
    "at": _at,
    "itemsize": lambda self: self.dtype.itemsize,
    "real": lambda self: _numpy().real(self),
    "imag": lambda self: _numpy().imag(self),
    "flat": _flat,
}


def install_on(cls: type) -> None:
    """Give ``cls`` (an array type whose instances have an aval) numpy's operators and methods."""
    for name, fn in {**_OPERATORS, **_METHODS}.items():
        setattr(cls, name, fn)
    for name, getter in _PROPERTIES.items():
        setattr(cls, name, property(getter))


def install() -> None:
    """Install on ``jaxprc.ir.Tracer`` and, when the runtime provides it, ``jaxprc.Array``."""
    from jaxprc.ir.tracing import Tracer
    install_on(Tracer)
    for name, fn in _TRACER_METHODS.items():
        setattr(Tracer, name, fn)
    try:
        from jaxprc.runtime import Array
    except ImportError:       # the runtime is optional for tracing alone
        return
    install_on(Array)
    import jaxprc.numpy as jnp
    jnp.ndarray = Array

