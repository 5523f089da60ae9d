"""What the special functions share: JAX's argument promotion and Horner's rule."""
from __future__ import annotations

from ... import lax
from ... import numpy as jnp
from ...ir import dtypes as dt
from ...numpy._util import aval_of, located, promote


def inexact(fn: str, *args, complex_ok: bool = False):
    """``args`` promoted to one inexact dtype and shape (integers and booleans become the default
    float), as jax.scipy.special does; complex operands are an error unless ``complex_ok``."""
    out, dtype, _ = promote(fn, *args, to_inexact=True)
    if dt.is_complex(dtype) and not complex_ok:
        raise ValueError(f"{located(fn)}: complex-valued inputs are not supported (got {dtype.name})")
    out = [jnp.asarray(x) for x in out]
    return out if len(out) > 1 else out[0]


def float32_or_64(fn: str, x):
    """``x`` as an array, which must be float32 or float64 (as JAX's ndtr/ndtri/log_ndtr/spence)."""
    x = jnp.asarray(x)
    dtype = aval_of(x).dtype
    if dtype not in (dt.float32, dt.float64):
        raise TypeError(f"{located(fn)}: x.dtype={dtype.name} is not supported (float32 or float64 only)")
    return x


def polyval(coefficients, x):
    """sum_k c_k x^(n-k) by Horner's rule, highest power first; the constants take x's dtype."""
    out = None
    for c in coefficients:
        out = jnp.full_like(x, float(c)) if out is None else out * x + float(c)
    return out


def dtype_of(x):
    return aval_of(x).dtype


def finfo(x):
    return dt.finfo(dtype_of(x))


def strong(x):
    """``x`` without its weak type: JAX's versions of some functions (ndtr, expi, sici, ...) return
    a strongly typed result even for a Python scalar, through constants of their own dtype."""
    return lax.convert_element_type(x, dtype_of(x))
