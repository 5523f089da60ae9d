"""Structural primitives: sorting, argmax/argmin and cumulative ops.

Params that describe axes are Python ints (``lax`` normalises what users
pass). The shape and slicing primitives live in ``jaxprc.lax.shapes`` and
``jaxprc.lax.slicing``.
"""
from __future__ import annotations

import numpy as np

from ..core import JaxprTypeError, Primitive, ShapedArray
from .elementwise import ANY, INTEGRAL, IS_FLOAT, KIND_NAMES, NUM, ORDERED, fmt_types


def type_error(name: str, avals, expected: str, **params) -> JaxprTypeError:
    """The one-paragraph typing error: primitive, operand types, params, what was expected."""
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    with_params = f" with {shown}" if shown else ""
    return JaxprTypeError(f"{name} got operands ({fmt_types(avals)}){with_params}; expected {expected}")


def check_axes(name: str, aval: ShapedArray, axes, what: str = "axes", **params) -> None:
    """``axes`` are distinct valid dimensions of ``aval``."""
    if len(set(axes)) != len(axes) or any(not 0 <= a < aval.ndim for a in axes):
        raise type_error(name, [aval], f"{what} to be distinct dimensions in [0, {aval.ndim})",
                         **{what: axes}, **params)


# ------------------------------------------------------------------------ sort
sort_p = Primitive("sort")
sort_p.multiple_results = True


@sort_p.def_abstract_eval
def _sort_rule(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise JaxprTypeError("sort requires at least one operand")
    shape = operands[0].shape
    if any(x.shape != shape for x in operands):
        raise type_error("sort", operands, "operands of equal shapes", dimension=dimension)
    if not 0 <= dimension < len(shape):
        raise type_error("sort", operands, f"dimension in [0, {len(shape)})", dimension=dimension)
    if not 1 <= num_keys <= len(operands):
        raise type_error("sort", operands, f"1 <= num_keys <= {len(operands)}", num_keys=num_keys)
    return list(operands)


# -------------------------------------------------------------- argmax/argmin
def _arg_reduction(name: str) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axes, index_dtype):
        params = dict(axes=axes, index_dtype=np.dtype(index_dtype).name)
        if len(axes) != 1:
            raise type_error(name, [x], "exactly one axis", **params)
        check_axes(name, x, axes, index_dtype=params["index_dtype"])
        if x.shape[axes[0]] == 0:
            raise type_error(name, [x], "a non-empty reduced axis", **params)
        if not ORDERED(x.dtype) or not INTEGRAL(index_dtype):
            raise type_error(name, [x], f"{KIND_NAMES[ORDERED]} operand and an integer index_dtype",
                             **params)
        return ShapedArray([s for i, s in enumerate(x.shape) if i != axes[0]], index_dtype)

    prim.def_abstract_eval(rule)
    return prim


argmax_p = _arg_reduction("argmax")
argmin_p = _arg_reduction("argmin")


# ----------------------------------------------------------- cumulative ops
def _cumulative(name: str, accepts) -> Primitive:
    prim = Primitive(name)

    def rule(x, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise type_error(name, [x], f"axis in [0, {x.ndim})", axis=axis)
        if not accepts(x.dtype):
            raise type_error(name, [x], KIND_NAMES[accepts])
        return x

    prim.def_abstract_eval(rule)
    return prim


cumsum_p = _cumulative("cumsum", NUM)
cumprod_p = _cumulative("cumprod", NUM)
cummax_p = _cumulative("cummax", ANY)     # complex: by (real, imag), as in JAX
cummin_p = _cumulative("cummin", ANY)
cumlogsumexp_p = _cumulative("cumlogsumexp", IS_FLOAT)
