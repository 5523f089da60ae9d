"""Operators and methods of arrays: installs ``+ - * / ... [] .at .T .reshape .sum ...`` on
``jaxprc.ir.Tracer`` and ``jaxprc.Array``, implemented with ``jaxprc.numpy``.

``install()`` runs when ``jaxprc.numpy`` is imported (``import jaxprc`` does).
"""
from __future__ import annotations

from jaxprc.ir.tracing import Tracer, get_aval


_JNP = None


def _numpy():
    global _JNP
    if _JNP is None:       # imported on first use (jaxprc.numpy imports this module)
        import jaxprc.numpy as jnp
        _JNP = jnp
    return _JNP


def _binary(name: str, reflected: bool = False):
    def op(self, other):
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
    "repeat", "sort", "argsort", "nonzero", "diagonal", "trace", "ptp")}
_METHODS.update(reshape=_reshape, transpose=_transpose, astype=_astype, round=_round,
                flatten=_method("ravel"), copy=_copy)

_PROPERTIES = {
    "T": lambda self: _numpy().transpose(self),
    "mT": lambda self: _numpy().matrix_transpose(self),
    "at": _at,
    "itemsize": lambda self: self.dtype.itemsize,
    "real": lambda self: _numpy().real(self),
    "imag": lambda self: _numpy().imag(self),
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
    try:
        from jaxprc.runtime import Array
    except ImportError:       # the runtime is optional for tracing alone
        return
    install_on(Array)
    import jaxprc.numpy as jnp
    jnp.ndarray = Array

