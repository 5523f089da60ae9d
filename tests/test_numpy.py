"""jaxprc.numpy, jaxprc.nn and the array operators: traced types, numbers against numpy, errors.

Numbers run eagerly (one cached XLA executable per primitive); the traced
jaxprs are checked with the verifier and for their output types.
"""
import warnings

import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.nn as nn
import jaxprc.numpy as jnp
from jaxprc.ir.core import ShapedArray
from jaxprc.ir.verify import verify

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 4)).astype(np.float32)
B = RNG.normal(size=(4, 5)).astype(np.float32)
V = RNG.normal(size=(4,)).astype(np.float32)
I = np.array([[3, -1, 0, 7], [2, 5, -4, 1], [0, 0, 9, -8]], np.int32)
POS = np.abs(A) + 0.5


def close(ours, expected, rtol=1e-5, atol=1e-6):
    ours = np.asarray(ours)
    expected = np.asarray(expected)
    assert ours.shape == expected.shape, (ours.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(ours.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(ours, expected)


def out_types(fn, *args):
    """The traced output avals (and the jaxpr verified)."""
    cj = jaxprc.make_jaxpr(fn)(*args)
    verify(cj)
    return [a.str_short() for a in cj.out_avals]


# ------------------------------------------------------------- elementwise

SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], np.float32)
Z = (A + 1j * np.round(A)).astype(np.complex64)   # complex values, some with equal real parts


UNARY = [
    ("sin", np.sin, A), ("cos", np.cos, A), ("tan", np.tan, A), ("exp", np.exp, A), ("log", np.log, POS),
    ("sqrt", np.sqrt, POS), ("abs", np.abs, A), ("negative", np.negative, A), ("sign", np.sign, I),
    ("floor", np.floor, A), ("ceil", np.ceil, A), ("round", np.round, A * 3), ("tanh", np.tanh, A),
    ("arcsin", np.arcsin, A / 4), ("arctan", np.arctan, A), ("sinh", np.sinh, A), ("cosh", np.cosh, A),
    ("arcsinh", np.arcsinh, A), ("log1p", np.log1p, POS), ("expm1", np.expm1, A), ("log2", np.log2, POS),
    ("log10", np.log10, POS), ("exp2", np.exp2, A), ("square", np.square, I), ("reciprocal", np.reciprocal, POS),
    ("cbrt", np.cbrt, A), ("trunc", np.trunc, A * 3), ("deg2rad", np.deg2rad, A), ("isnan", np.isnan, A),
    ("isfinite", np.isfinite, A), ("logical_not", np.logical_not, I), ("invert", np.invert, I),
    ("signbit", np.signbit, A), ("rint", np.rint, A * 3), ("bitwise_count", np.bitwise_count, I),
    ("square", np.square, I > 0), ("rint", np.rint, I), ("signbit", np.signbit, I),
    ("signbit", np.signbit, I > 0), ("isposinf", np.isposinf, SPECIAL), ("isneginf", np.isneginf, SPECIAL),
    ("isinf", np.isinf, SPECIAL), ("nan_to_num", np.nan_to_num, SPECIAL),
]


@pytest.mark.parametrize("name,ref,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_numpy(name, ref, x):
    close(getattr(jnp, name)(x), ref(x), rtol=2e-5, atol=2e-6)


BINARY = [
    ("add", np.add, A, V), ("subtract", np.subtract, A, 1.5), ("multiply", np.multiply, I, 3),
    ("divide", np.divide, A, POS), ("true_divide", np.true_divide, I, 4), ("power", np.power, POS, A),
    ("maximum", np.maximum, A, V), ("minimum", np.minimum, I, 0), ("arctan2", np.arctan2, A, B[:, :4].T[:3]),
    ("floor_divide", np.floor_divide, I, 3), ("floor_divide", np.floor_divide, I, -3),
    ("floor_divide", np.floor_divide, A * 4, 1.5), ("remainder", np.remainder, I, 3),
    ("remainder", np.remainder, I, -3), ("remainder", np.remainder, A * 4, 1.5), ("fmod", np.fmod, I, 3),
    ("hypot", np.hypot, A, V), ("logaddexp", np.logaddexp, A, V), ("equal", np.equal, I, 0),
    ("not_equal", np.not_equal, I, 0), ("less", np.less, A, V), ("less_equal", np.less_equal, I, 1),
    ("greater", np.greater, A, 0.0), ("greater_equal", np.greater_equal, I, 2),
    ("bitwise_and", np.bitwise_and, I, 6), ("bitwise_or", np.bitwise_or, I, 6), ("bitwise_xor", np.bitwise_xor, I, 6),
    ("left_shift", np.left_shift, I, 2), ("right_shift", np.right_shift, I, 1),
    ("logical_and", np.logical_and, I, I > 0), ("logical_or", np.logical_or, I, 0), ("power", np.power, I, 3),
    ("power", np.power, np.abs(I), np.array([0, 1, 2, 3], np.int32)), ("copysign", np.copysign, A, -V),
    ("hypot", np.hypot, SPECIAL, SPECIAL[::-1]), ("hypot", np.hypot, np.float32(3e30), np.float32(4e30)),
    ("heaviside", np.heaviside, SPECIAL, 0.5), ("float_power", np.float_power, POS, A),
    ("logaddexp2", np.logaddexp2, A, V),
]


@pytest.mark.parametrize("name,ref,x,y", BINARY, ids=[f"{b[0]}{k}" for k, b in enumerate(BINARY)])
def test_binary_matches_numpy(name, ref, x, y):
    expected = ref(x, y)
    if expected.dtype == np.float64:       # numpy widens Python scalars; JAX keeps float32
        expected = expected.astype(np.float32)
    if expected.dtype == np.int64:
        expected = expected.astype(np.int32)
    close(getattr(jnp, name)(x, y), expected, rtol=2e-5, atol=2e-6)


def test_where_clip_and_friends():
    close(jnp.where(A > 0, A, 0.0), np.where(A > 0, A, 0.0))
    close(jnp.where(I > 0, I, V), np.where(I > 0, I, V).astype(np.float32))
    close(jnp.clip(A, -0.5, 0.5), np.clip(A, -0.5, 0.5))
    close(jnp.clip(I, max=2), np.minimum(I, 2))
    close(jnp.nan_to_num(np.array([np.nan, np.inf, 1.0], np.float32)),
          np.nan_to_num(np.array([np.nan, np.inf, 1.0], np.float32)))
    close(jnp.isinf(np.array([np.inf, -np.inf, 1.0], np.float32)), [True, True, False])


# --------------------------------------------------------------- promotion

@pytest.mark.parametrize("fn,args,expected", [
    (jnp.add, (ShapedArray((3,), np.float16), 1.0), ["f16[3]"]),
    (jnp.add, (ShapedArray((3,), np.float16, weak_type=True), 1), ["~f16[3]"]),
    (jnp.fmod, (ShapedArray((3,), np.bool_), True), ["i32[3]"]),
    (jnp.add, (ShapedArray((3,), np.int32), 1.5), ["~f32[3]"]),
    (jnp.multiply, (ShapedArray((3,), np.int8), ShapedArray((3,), np.uint8)), ["i16[3]"]),
    (jnp.add, (ShapedArray((2, 3), np.float32), ShapedArray((3,), ml_dtypes.bfloat16)), ["f32[2,3]"]),
    (jnp.sin, (ShapedArray((3,), np.int32),), ["f32[3]"]),
    (jnp.sin, (ShapedArray((), np.int32, weak_type=True),), ["~f32[]"]),
    (jnp.true_divide, (ShapedArray((3,), np.uint8), 2), ["f32[3]"]),
    (jnp.maximum, (ShapedArray((3,), np.bool_), 2), ["~i32[3]"]),
    (jnp.add, (ShapedArray((3,), np.uint32), ShapedArray((3,), np.int32)), ["i32[3]"]),
    (jnp.add, (ShapedArray((3,), ml_dtypes.bfloat16), ShapedArray((3,), np.float16)), ["f32[3]"]),
])
def test_traced_promotion(fn, args, expected):
    structs = [jaxprc.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in args
               if isinstance(a, ShapedArray)]
    consts = [a for a in args if not isinstance(a, ShapedArray)]
    assert out_types(lambda *xs: fn(*xs, *consts), *structs) == expected


def test_python_scalars_trace_as_literals_and_broadcast_explicitly():
    text = str(jaxprc.make_jaxpr(lambda x: x * 2.0 + jnp.ones((2, 3)))(jnp.ones(3)))
    assert "broadcast_in_dim" in text and "2.0" in text
    assert "convert_element_type" not in text


def test_result_type_and_dtype_objects():
    assert jnp.result_type(jnp.int8, 1.0) == np.float32     # weak float meets int: default float
    assert jnp.result_type(np.float16, 1.0) == np.float16
    assert jnp.promote_types(jnp.int8, jnp.uint8) == np.int16
    assert jnp.promote_types(jnp.bfloat16, jnp.float16) == np.float32
    assert np.dtype(jnp.float32) == np.float32 and jnp.float32 == np.float32
    x = jnp.float16(3)
    assert x.dtype == np.float16 and not x.weak_type
    assert jnp.asarray(1.0).weak_type and not jnp.asarray(1.0, jnp.float32).weak_type
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating) and not jnp.issubdtype(jnp.int8, jnp.floating)


def test_x64_switch_changes_defaults():
    jaxprc.config.update("jax_enable_x64", True)
    try:
        assert jnp.result_type(1.0) == np.float64
        assert out_types(lambda: jnp.arange(3)) == ["i64[3]"]
        assert out_types(lambda x: x + 1.0, np.ones(2, np.float32)) == ["f32[2]"]
    finally:
        jaxprc.config.update("jax_enable_x64", False)
    assert jnp.result_type(1.0) == np.float32


# -------------------------------------------------------------- reductions

@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "var", "std", "all", "any"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 1), False), (-1, False)])
def test_reductions_match_numpy(name, axis, keepdims):
    x = A if name not in ("all", "any") else A > 0
    close(getattr(jnp, name)(x, axis=axis, keepdims=keepdims),
          getattr(np, name)(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-6)


def test_reduction_dtypes_and_extras():
    assert out_types(lambda x: jnp.sum(x), np.ones(3, np.int8)) == ["i32[]"]
    assert out_types(lambda x: jnp.mean(x, 0), np.ones((2, 3), np.int32)) == ["f32[3]"]
    assert out_types(lambda x: jnp.sum(x), np.ones(3, np.float16)) == ["f16[]"]
    assert out_types(lambda x: jnp.argmax(x, 1), np.ones((2, 3), np.float32)) == ["i32[2]"]
    close(jnp.argmax(A, axis=1), np.argmax(A, axis=1))
    close(jnp.argmin(A), np.argmin(A))
    close(jnp.argmax(A, axis=0, keepdims=True), np.argmax(A, axis=0, keepdims=True))
    close(jnp.cumsum(A, axis=1), np.cumsum(A, axis=1))
    close(jnp.cumprod(I), np.cumprod(I).astype(np.int32))
    close(jnp.cumsum(I > 0, axis=0), np.cumsum(I > 0, axis=0).astype(np.int32))
    close(jnp.var(A, axis=0, ddof=1), np.var(A, axis=0, ddof=1))
    close(jnp.sum(A, axis=1, where=A > 0), np.sum(A, axis=1, where=A > 0))
    close(jnp.max(A, axis=0, initial=0.5), np.max(A, axis=0, initial=0.5))


# ---------------------------------------------------------------- creation

def test_creation_matches_numpy():
    close(jnp.zeros((2, 3)), np.zeros((2, 3), np.float32))
    close(jnp.ones(3, jnp.int32), np.ones(3, np.int32))
    close(jnp.full((2, 2), 7, jnp.int8), np.full((2, 2), 7, np.int8))
    close(jnp.arange(5), np.arange(5, dtype=np.int32))
    close(jnp.arange(1.0, 3.0, 0.5), np.arange(1.0, 3.0, 0.5, dtype=np.float32))
    close(jnp.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    close(jnp.linspace(-1, 2, 4, endpoint=False), np.linspace(-1, 2, 4, endpoint=False, dtype=np.float32))
    close(jnp.linspace(np.zeros(2), np.ones(2), 3, axis=1), np.linspace(np.zeros(2), np.ones(2), 3, axis=1))
    close(jnp.eye(3, 4, k=1), np.eye(3, 4, k=1, dtype=np.float32))
    close(jnp.identity(2, jnp.int32), np.identity(2, np.int32))
    close(jnp.tri(3, k=-1), np.tri(3, k=-1, dtype=np.float32))
    close(jnp.zeros_like(I), np.zeros_like(I))
    close(jnp.full_like(A, 2.5), np.full_like(A, 2.5))
    close(jnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int32))
    assert jnp.array([1, 2.0]).dtype == np.float32


def test_array_of_traced_values_stacks():
    assert out_types(lambda x: jnp.array([x, 2.0 * x, 1.0]), np.float32(1)) == ["f32[3]"]


# ------------------------------------------------------------------ products

def test_products_match_numpy():
    C = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    close(jnp.dot(A, B), A @ B, rtol=1e-5)
    close(jnp.dot(A, V), A @ V, rtol=1e-5)
    close(jnp.dot(V, V), V @ V, rtol=1e-5)
    close(jnp.dot(C, B), np.dot(C, B), rtol=1e-5)
    close(jnp.matmul(C, B), C @ B, rtol=1e-5)
    close(jnp.matmul(V, B), V @ B, rtol=1e-5)
    close(jnp.matmul(C, V), C @ V, rtol=1e-5)
    close(jnp.matmul(C[:, None], np.stack([B, B])), C[:, None] @ np.stack([B, B]), rtol=1e-5)
    close(jnp.tensordot(C, B, axes=1), np.tensordot(C, B, axes=1), rtol=1e-5)
    close(jnp.tensordot(C, A.T, axes=([1, 2], [1, 0])), np.tensordot(C, A.T, axes=([1, 2], [1, 0])), rtol=1e-5)
    close(jnp.outer(V, V[:3]), np.outer(V, V[:3]))
    close(jnp.inner(A, A), np.inner(A, A), rtol=1e-5)
    close(jnp.kron(A[:2, :2], I[:2, :3]), np.kron(A[:2, :2], I[:2, :3]), rtol=1e-5)
    close(jnp.vdot(A, A), np.vdot(A, A), rtol=1e-5)


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->", [(3, 4), (3, 4)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk->k", [(2, 3, 4)]), ("i,i->i", [(3,), (3,)]),
])
def test_einsum_matches_numpy(spec, shapes):
    ops = [RNG.normal(size=s).astype(np.float32) for s in shapes]
    close(jnp.einsum(spec, *ops), np.einsum(spec, *ops), rtol=1e-4, atol=1e-5)


def test_misaligned_dot_is_a_clear_error():
    with pytest.raises(TypeError, match=r"shapes \(3, 4\) and \(3, 4\) are not aligned"):
        jnp.dot(A, A)
    with pytest.raises(TypeError, match="matmul"):
        jaxprc.make_jaxpr(lambda a, b: a @ b)(A, A)


# ------------------------------------------------------------------ shapes

def test_shape_ops_match_numpy():
    C = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    close(jnp.reshape(C, (4, -1)), C.reshape(4, -1))
    close(jnp.asarray(C).reshape(6, 4), C.reshape(6, 4))
    close(jnp.ravel(C), C.ravel())
    close(jnp.transpose(C), C.T)
    close(jnp.transpose(C, (1, 0, 2)), C.transpose(1, 0, 2))
    close(jnp.swapaxes(C, 0, 2), np.swapaxes(C, 0, 2))
    close(jnp.moveaxis(C, 0, -1), np.moveaxis(C, 0, -1))
    close(jnp.moveaxis(C, [0, 1], [-1, 0]), np.moveaxis(C, [0, 1], [-1, 0]))
    close(jnp.squeeze(C[:1, :, :1]), np.squeeze(C[:1, :, :1]))
    close(jnp.expand_dims(C, (0, -1)), np.expand_dims(C, (0, -1)))
    close(jnp.concatenate([C, C], axis=1), np.concatenate([C, C], axis=1))
    close(jnp.concatenate([C, C], axis=None), np.concatenate([C, C], axis=None))
    close(jnp.stack([A, A], axis=1), np.stack([A, A], axis=1))
    close(jnp.hstack([V, V]), np.hstack([V, V]))
    close(jnp.hstack([A, A]), np.hstack([A, A]))
    close(jnp.vstack([V, V]), np.vstack([V, V]))
    for got, want in zip(jnp.split(C, 2, axis=2), np.split(C, 2, axis=2)):
        close(got, want)
    for got, want in zip(jnp.split(V, [1, 3]), np.split(V, [1, 3])):
        close(got, want)
    for got, want in zip(jnp.array_split(np.arange(7), 3), np.array_split(np.arange(7), 3)):
        close(got, want.astype(np.int32))
    close(jnp.tile(A, (2, 1, 2)), np.tile(A, (2, 1, 2)))
    close(jnp.tile(V, 3), np.tile(V, 3))
    close(jnp.repeat(A, 2, axis=1), np.repeat(A, 2, axis=1))
    close(jnp.repeat(A, 2), np.repeat(A, 2))
    close(jnp.repeat(V, [1, 0, 2, 1]), np.repeat(V, [1, 0, 2, 1]))
    close(jnp.broadcast_to(V, (3, 4)), np.broadcast_to(V, (3, 4)))
    close(jnp.flip(C, (0, 2)), np.flip(C, (0, 2)))
    close(jnp.flip(C), np.flip(C))
    close(jnp.roll(C, 2, axis=2), np.roll(C, 2, axis=2))
    close(jnp.roll(C, -5), np.roll(C, -5))
    close(jnp.roll(C, (1, 2), axis=(0, 1)), np.roll(C, (1, 2), axis=(0, 1)))
    for mode in ("constant", "edge", "wrap", "reflect", "symmetric"):
        close(jnp.pad(A, ((1, 2), (3, 1)), mode=mode), np.pad(A, ((1, 2), (3, 1)), mode=mode))
    close(jnp.pad(I, 1, constant_values=9), np.pad(I, 1, constant_values=9))
    close(jnp.diff(C, axis=1), np.diff(C, axis=1))
    assert jnp.shape(C) == (2, 3, 4) and jnp.ndim(C) == 3 and jnp.size(C) == 24


def test_broadcasting_error_names_shapes():
    # As JAX: operands of different ranks fail in rank promotion (ValueError), of one rank in the
    # operation (TypeError).
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(3, 4\), \(3,\)\] "
                                         r"\(at .*test_numpy.py:\d+\)"):
        jnp.add(A, V[:3])
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(3, 4\), \(1, 3\)\. "
                                        r"\(at .*test_numpy.py:\d+\)"):
        jnp.add(A, V[None, :3])
    with pytest.raises(TypeError, match="cannot reshape"):
        jnp.reshape(A, (5, -1))


# -------------------------------------------------------------- selection

def test_sorting_and_diagonals_match_numpy():
    close(jnp.sort(A), np.sort(A))
    close(jnp.sort(A, axis=0), np.sort(A, axis=0))
    close(jnp.sort(A, axis=None), np.sort(A, axis=None))
    close(jnp.argsort(A, axis=1), np.argsort(A, axis=1, kind="stable"))
    close(jnp.argsort(np.array([3, 1, 3, 1, 2])), np.argsort(np.array([3, 1, 3, 1, 2]), kind="stable"))
    close(jnp.argsort(A, axis=0, descending=True), np.argsort(-A, axis=0, kind="stable"))
    close(jnp.diag(V), np.diag(V))
    close(jnp.diag(V, k=2), np.diag(V, k=2))
    close(jnp.diag(V, k=-1), np.diag(V, k=-1))
    close(jnp.diag(A), np.diag(A))
    close(jnp.diag(A, 1), np.diag(A, 1))
    close(jnp.diag(A, -2), np.diag(A, -2))
    close(jnp.diagonal(np.arange(24).reshape(2, 3, 4), 1, 1, 2), np.diagonal(np.arange(24).reshape(2, 3, 4), 1, 1, 2))
    close(jnp.trace(A), np.trace(A))
    close(jnp.trace(I, 1), np.trace(I, 1))
    close(jnp.triu(A), np.triu(A))
    close(jnp.triu(A, 1), np.triu(A, 1))
    close(jnp.tril(A, -1), np.tril(A, -1))
    close(jnp.searchsorted(np.array([1, 3, 5, 7]), np.array([0, 3, 6, 9])),
          np.searchsorted(np.array([1, 3, 5, 7]), np.array([0, 3, 6, 9])))


def test_take_and_take_along_axis():
    idx = np.array([[0, 2], [1, -1]])
    close(jnp.take(A, idx, axis=1), np.take(A, idx, axis=1))
    close(jnp.take(A, np.array([5, 0])), np.take(A, np.array([5, 0])))
    close(jnp.take(A, np.array([0, 7]), axis=1), np.stack([A[:, 0], np.full(3, np.nan, np.float32)], axis=1))
    close(jnp.take(A, np.array([0, 7]), axis=1, mode="clip"), np.take(A, np.array([0, 7]), axis=1, mode="clip"))
    order = np.argsort(A, axis=1)
    close(jnp.take_along_axis(A, order, axis=1), np.take_along_axis(A, order, axis=1))
    close(jnp.take_along_axis(A, order[:, :2], axis=1), np.take_along_axis(A, order[:, :2], axis=1))
    close(jnp.take_along_axis(A, np.argsort(A, axis=0), axis=0), np.sort(A, axis=0))


# --------------------------------------------------------------- indexing

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
INDEXES = [
    1, -1, (0, 2), (slice(None), 1), (slice(1, None), slice(None, None, 2)), (slice(None, None, -1),),
    (slice(3, 0, -2), Ellipsis, 1), (None, 1), (Ellipsis, None), (1, None, Ellipsis, None), (slice(5, 9),),
    (np.array([0, 2]),), (np.array([[0, 1], [2, -1]]),), ([0, 2], [1, 3]), (slice(None), np.array([0, 3]), 1),
    (np.array([0, 1]), slice(None), np.array([1, 4])), (1, slice(None), np.array([0, 4, 2])),
    (np.array([True, False, True]),), (X[:, :, 0] > 20,), (Ellipsis, np.array([-1, 0])),
    (np.array([0, 2]), None, slice(1, 3)), (slice(None), None, np.array([1, 2]), slice(None)),
]


@pytest.mark.parametrize("idx", INDEXES, ids=[repr(i) for i in range(len(INDEXES))])
def test_getitem_matches_numpy(idx):
    close(jnp.asarray(X)[idx], X[idx])
    structs = jaxprc.ShapeDtypeStruct(X.shape, X.dtype)
    if not any(isinstance(i, np.ndarray) and i.dtype == bool for i in (idx if isinstance(idx, tuple) else (idx,))):
        assert out_types(lambda x: x[idx], structs) == [f"f32[{','.join(map(str, X[idx].shape))}]"]


def test_getitem_with_traced_indices():
    f = jaxprc.jit(lambda x, i, j: x[i, :, j])
    close(f(X, 2, -1), X[2, :, -1])
    g = jaxprc.jit(lambda x, idx: x[idx])
    close(g(X, np.array([2, -3, 1])), X[np.array([2, -3, 1])])
    assert "dynamic_slice" in str(jaxprc.make_jaxpr(lambda x, i: x[i])(X, 1))
    assert "gather" in str(jaxprc.make_jaxpr(lambda x, i: x[i])(X, np.array([1])))


def test_getitem_errors():
    assert np.array_equal(jnp.asarray(A)[3], A[-1])      # static indices clamp, as JAX's gathers do
    with pytest.raises(IndexError, match="out of bounds"):
        jnp.ones(0)[0]                                   # nothing to clamp to
    with pytest.raises(IndexError, match="too many indices"):
        jnp.asarray(A)[0, 0, 0]
    with pytest.raises(jaxprc.ConcretizationTypeError, match="boolean indices must be concrete"):
        jaxprc.jit(lambda x: x[x > 0])(A)


AT_CASES = [(1,), (-1, Ellipsis), (1, 2), (slice(None), 2), (np.array([0, 2, 0]),), (Ellipsis, np.array([1, -1])), (A > 0,),
            (slice(None, None, -1), 0)]


@pytest.mark.parametrize("idx", AT_CASES, ids=[str(k) for k in range(len(AT_CASES))])
def test_at_updates_match_numpy(idx):
    x = jnp.asarray(A)
    expected = A.copy()
    expected[idx] = 7.0
    close(x.at[idx].set(7.0), expected)
    expected = A.copy()
    np.add.at(expected, idx, 1.5)
    close(x.at[idx].add(1.5), expected)
    expected = A.copy()
    np.multiply.at(expected, idx, 2.0)
    close(x.at[idx].mul(2.0), expected)
    expected = A.copy()
    np.maximum.at(expected, idx, 0.0)
    close(x.at[idx].max(0.0), expected)
    expected = A.copy()
    np.minimum.at(expected, idx, 0.0)
    close(x.at[idx].min(0.0), expected)
    close(x.at[idx].get(), A[idx])


def test_at_under_jit_with_traced_index():
    f = jaxprc.jit(lambda x, i, v: x.at[i].add(v))
    expected = A.copy()
    expected[1] += V
    close(f(A, 1, V), expected)
    expected = A.copy()
    np.add.at(expected, (slice(None), np.array([0, 0, 3])), 1.0)
    close(jaxprc.jit(lambda x, i: x.at[:, i].add(1.0))(A, np.array([0, 0, 3])), expected)


@pytest.mark.parametrize("i", [0, 2, -1, -3, 3, -4])
def test_at_row_update_with_traced_index_is_one_window_scatter(i):
    """``x.at[i].set(row)``: a single scatter of a whole row (XLA makes it a dynamic-update-slice);
    out-of-bounds rows are dropped, negative ones count from the end."""
    f = lambda x, i, v: x.at[i].set(v)
    program = jaxprc.make_jaxpr(f)(A, i, V)
    scatters = [e for e in program.jaxpr.eqns if e.primitive.name == "scatter"]
    assert len(scatters) == 1 and scatters[0].invars[2].aval.shape == A.shape[1:], program
    assert not any(e.primitive.name in ("iota", "gather") for e in program.jaxpr.eqns), program
    expected = A.copy()
    if -A.shape[0] <= i < A.shape[0]:
        expected[i] = V
    close(jaxprc.jit(f)(A, i, V), expected)


# ------------------------------------------------------------------- linalg

@pytest.mark.parametrize("ord,axis", [(None, None), (2, None), (1, None), (np.inf, None), (-np.inf, None),
                                      (0, None), (3, None), (None, 1), (1, 0), ("fro", None)])
def test_norm_matches_numpy(ord, axis):
    x = V if axis is None and ord not in ("fro",) else A
    close(jnp.linalg.norm(x, ord=ord, axis=axis), np.linalg.norm(x, ord=ord, axis=axis), rtol=1e-5)


@pytest.mark.parametrize("ord", [1, -1, np.inf, -np.inf, "fro", None])
def test_matrix_norm_matches_numpy(ord):
    close(jnp.linalg.norm(A, ord=ord), np.linalg.norm(A, ord=ord), rtol=1e-5)
    close(jnp.linalg.norm(A, ord=ord, keepdims=True, axis=(1, 0)),
          np.linalg.norm(A, ord=ord, keepdims=True, axis=(1, 0)), rtol=1e-5)
    C = np.stack([A, -2 * A])
    close(jnp.linalg.norm(C, ord=ord, axis=(2, 1)), np.linalg.norm(C, ord=ord, axis=(2, 1)), rtol=1e-5)


# ----------------------------------------------------------------------- nn

def _np_logsumexp(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def test_nn_matches_formulas():
    x = np.concatenate([A.ravel(), [0.0, 30.0, -30.0]]).astype(np.float32)
    close(nn.relu(x), np.maximum(x, 0))
    close(nn.sigmoid(x), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5)
    close(nn.softplus(x), np.logaddexp(x, 0), rtol=1e-5)
    close(nn.logsumexp(A, axis=1), _np_logsumexp(A, 1), rtol=1e-5)
    close(nn.logsumexp(A), _np_logsumexp(A.ravel(), 0), rtol=1e-5)
    close(nn.log_softmax(A), A - _np_logsumexp(A, 1)[:, None], rtol=1e-5, atol=1e-6)
    close(nn.softmax(A, axis=0), np.exp(A) / np.exp(A).sum(0), rtol=1e-5)
    close(nn.softmax(np.array([1000.0, 1000.0], np.float32)), [0.5, 0.5])
    erf = np.vectorize(__import__("math").erf)
    close(nn.gelu(A, approximate=False), A * (1 + erf(A / np.sqrt(2))) / 2, rtol=1e-5, atol=1e-6)
    close(nn.gelu(A), 0.5 * A * (1 + np.tanh(np.sqrt(2 / np.pi) * (A + 0.044715 * A ** 3))), rtol=1e-5, atol=1e-6)
    close(nn.one_hot(np.array([0, 2, 5]), 3), np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0]], np.float32))
    close(nn.one_hot(np.array([1, 0]), 3, axis=0), np.eye(3, dtype=np.float32)[[1, 0]].T)
    close(nn.silu(A), A / (1 + np.exp(-A)), rtol=1e-5)
    close(nn.leaky_relu(A), np.where(A >= 0, A, 0.01 * A), rtol=1e-6)
    close(nn.elu(A), np.where(A > 0, A, np.expm1(A)), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ array methods

def test_operators_on_tracers_and_arrays():
    def f(x, y):
        return (x + 1, 2 - x, x * y, x / 2, 1 / x, x // 2, x % 2, x ** 2, 2 ** x, -x, +x, abs(x),
                x > y, x <= 1, x == y, x != 1, x @ y.T)
    ours = jaxprc.jit(f)(POS, A)
    theirs = f(POS, A)
    for o, t in zip(ours, theirs):
        close(o, np.asarray(t, dtype=np.asarray(o).dtype), rtol=1e-5)
    eager = f(jnp.asarray(POS), jnp.asarray(A))
    for o, t in zip(eager, theirs):
        close(o, np.asarray(t, dtype=np.asarray(o).dtype), rtol=1e-5)
    i = jnp.asarray(I)
    close(i & 6, I & 6)
    close(i | 1, I | 1)
    close(i ^ 3, I ^ 3)
    close(~i, ~I)
    close(i << 1, I << 1)
    close(i >> 1, I >> 1)
    close(3 & i, 3 & I)


def test_methods_and_properties():
    x = jnp.asarray(A)
    assert x.shape == (3, 4) and x.ndim == 2 and x.size == 12 and x.dtype == np.float32
    close(x.T, A.T)
    close(x.reshape(4, 3), A.reshape(4, 3))
    close(x.reshape((2, -1)), A.reshape(2, -1))
    close(x.astype(jnp.int32), A.astype(np.int32))
    close(x.sum(axis=0), A.sum(0))
    close(x.mean(), A.mean())
    close(x.max(1), A.max(1))
    close(x.min(), A.min())
    close(x.prod(0), A.prod(0), rtol=1e-5)
    close(x.argmax(), A.argmax())
    close(x.argmin(0), A.argmin(0))
    close((x > 0).any(), (A > 0).any())
    close((x > 0).all(1), (A > 0).all(1))
    close(x.transpose(), A.T)
    close(x.transpose(1, 0), A.T)
    close(x[None].squeeze(), A)
    close(x.ravel(), A.ravel())
    close(x.flatten(), A.flatten())
    close(x.cumsum(1), A.cumsum(1), rtol=1e-5)
    close(x.clip(0, 0.5), A.clip(0, 0.5))
    close(x.dot(B), A @ B, rtol=1e-5)
    close(x.round(), np.round(A))
    close(x.conj(), A)
    close(x.real, A)
    close(x.imag, np.zeros_like(A))
    close(x.swapaxes(0, 1), A.T)
    close(x.var(0), A.var(0), rtol=1e-5)
    close(x.std(), A.std(), rtol=1e-5)
    rows = list(x)
    assert len(rows) == 3 and len(x) == 3
    close(rows[2], A[2])


def test_methods_on_tracers():
    def f(x):
        return x.T.reshape(-1).sum(), x.astype(jnp.int8).max(0), x.mean(1, keepdims=True), x.at[0].set(1.0)
    assert out_types(f, A) == ["f32[]", "i8[4]", "f32[3,1]", "f32[3,4]"]
    assert out_types(lambda x: [r for r in x], A) == ["f32[4]"] * 3


def test_traced_value_as_python_bool_is_a_concretization_error():
    with pytest.raises(jaxprc.ConcretizationTypeError, match="jnp.where|lax.cond"):
        jaxprc.jit(lambda x: 1.0 if jnp.sum(x) > 0 else 2.0)(A)


def test_eager_equals_jit():
    def f(x, y):
        return jnp.einsum("ij,jk->ik", jnp.tanh(x), y).sum(axis=0) + jnp.linalg.norm(x) * jnp.std(y)
    close(jaxprc.jit(f)(A, B), f(A, B), rtol=1e-5)


def test_complex_comparisons_are_lexicographic_and_arctan2_continues():
    # numpy orders complex numbers by real part, then imaginary part, as JAX does.
    for name in ("less", "less_equal", "greater", "greater_equal"):
        close(getattr(jnp, name)(Z, Z[::-1]), getattr(np, name)(Z, Z[::-1]))
    # numpy has no complex arctan2: check the analytic continuation against a real case and JAX's value.
    close(jnp.arctan2(A.astype(np.complex64), V.astype(np.complex64)).real, np.arctan2(A, V), atol=1e-5)
    z = complex(jnp.arctan2(np.complex64(1 + 1j), np.complex64(1)))
    assert abs(z - (1.0172219 + 0.40235934j)) < 1e-6


# Each part of a complex value on its own: NaN and infinities in either part, halves, and an
# infinite part beside a finite one (which multiplying by 1j would turn into NaN).
Z_SPECIAL = np.array([complex(a, b) for a, b in [(np.nan, np.inf), (-np.inf, np.nan), (1.5, -2.5),
                                                 (np.inf, -np.inf), (0.25, 1e30), (2.5, np.inf),
                                                 (-0.55, 0.45)]], np.complex64)


@pytest.mark.parametrize("kwargs", [{}, dict(nan=1.0, posinf=2.0, neginf=-3.0)])
def test_nan_to_num_of_complex_treats_parts_separately(kwargs):
    got = jnp.nan_to_num(Z_SPECIAL, **kwargs)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(got), np.nan_to_num(Z_SPECIAL, **kwargs))


@pytest.mark.parametrize("fn,decimals", [("round", 0), ("round", 1), ("around", 2), ("rint", None)])
def test_round_of_complex_rounds_both_parts(fn, decimals):
    args = () if decimals is None else (decimals,)
    got = np.asarray(getattr(jnp, fn)(Z_SPECIAL, *args))
    want = getattr(np, fn)(Z_SPECIAL, *args)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got.real, want.real, rtol=1e-6)
    np.testing.assert_allclose(got.imag, want.imag, rtol=1e-6)


def test_strict_dtype_rules_match_jax():
    with pytest.raises(ValueError, match="round does not accept dtype bool"):
        jnp.round(np.array([True, False]))
    with pytest.raises(ValueError, match="hypot is not defined for complex"):
        jnp.hypot(Z, 1.0)
    with pytest.raises(ValueError, match="signbit is not defined for complex"):
        jnp.signbit(Z)
    # lax is as strict as JAX: a Python scalar has its default dtype, whatever the other operand's
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes, got float16, int32"):
        jaxprc.lax.add(np.ones(3, np.float16), 1)
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes"):
        jaxprc.lax.add(np.ones(3, np.int32), 1.5)


def test_float_power_keeps_the_operand_precision():
    assert jnp.float_power(np.ones(3, np.float16), 2.0).dtype == np.float16


def test_nan_reductions_match_numpy():
    x = np.where(A > 0.5, np.nan, A).astype(np.float32)
    x[1] = np.nan
    for name in ("nansum", "nanprod", "nanmean", "nanmax", "nanmin"):
        for axis in (None, 0, 1):
            with warnings.catch_warnings():   # numpy warns about the all-NaN row
                warnings.simplefilter("ignore")
                expected = getattr(np, name)(x, axis=axis)
            close(getattr(jnp, name)(x, axis=axis), expected, rtol=1e-5)
    close(jnp.nansum(I, axis=0), np.nansum(I, axis=0))
    assert jnp.nanmax(x, axis=1, keepdims=True).shape == (3, 1)


def test_cumulative_sum_and_prod_with_include_initial():
    close(jnp.cumulative_sum(I, axis=1, include_initial=True),
          np.concatenate([np.zeros((3, 1), np.int32), np.cumsum(I, axis=1)], axis=1))
    close(jnp.cumulative_prod(POS, axis=0, include_initial=True),
          np.concatenate([np.ones((1, 4), np.float32), np.cumprod(POS, axis=0)]), rtol=1e-5)
    close(jnp.cumulative_sum(V, dtype=jnp.int32), np.cumsum(V.astype(np.int32)))
    with pytest.raises(ValueError, match="explicit axis"):
        jnp.cumulative_sum(I)


def test_unstack_meshgrid_astype_match_numpy():
    for axis in (0, 1, -1):
        parts = jnp.unstack(A, axis=axis)
        assert isinstance(parts, tuple) and len(parts) == A.shape[axis]
        for ours, expected in zip(parts, np.moveaxis(A, axis, 0)):
            close(ours, expected)
    x, y, z = np.arange(3.0), np.arange(4), np.arange(2.0)
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            for ours, expected in zip(jnp.meshgrid(x, y, z, indexing=indexing, sparse=sparse),
                                      np.meshgrid(x, y, z, indexing=indexing, sparse=sparse)):
                close(ours, expected)
    assert jnp.astype(I, jnp.float16).dtype == np.float16
    close(jnp.astype(A, jnp.int32), A.astype(np.int32))


def test_lax_dot_dimension_numbers_and_keystr_options():
    lhs, rhs = RNG.normal(size=(2, 3, 4)).astype(np.float32), RNG.normal(size=(2, 4, 5)).astype(np.float32)
    close(jaxprc.lax.dot(lhs, rhs, dimension_numbers=(((2,), (1,)), ((0,), (0,)))), lhs @ rhs, rtol=1e-5)
    close(jaxprc.lax.dot(A, B, preferred_element_type=np.float32), A @ B, rtol=1e-5)
    with pytest.raises(TypeError):
        jaxprc.lax.dot(A, B, None)        # options are keyword-only, as in JAX 0.10
    ((path, _),), _ = jaxprc.tree_util.tree_flatten_with_path({"a": [{"b": 1}]})
    assert jaxprc.tree_util.keystr(path) == "['a'][0]['b']"
    assert jaxprc.tree_util.keystr(path, simple=True, separator="/") == "a/0/b"


def test_max_and_min_need_initial_without_an_identity():
    # As in JAX: no made-up -inf/iinfo.min for an empty axis or a where mask.
    empty = np.zeros((2, 0), np.float32)
    for fn in (jnp.max, jnp.min, jnp.nanmax, jnp.nanmin, jnp.ptp):
        with pytest.raises(ValueError, match="zero-size array"):
            fn(empty, axis=1)
        with pytest.raises(ValueError, match="zero-size array"):
            jaxprc.jit(fn)(np.zeros((0,), np.float32))
    close(jnp.max(empty, axis=0), np.zeros((0,), np.float32))
    close(jnp.max(empty, axis=1, initial=-1.0), np.full(2, -1.0, np.float32))
    with pytest.raises(ValueError, match="initial"):
        jnp.min(A, where=A > 0)
    close(jnp.min(A, where=A > 0, initial=10.0), np.min(A, where=A > 0, initial=10.0))
    close(nn.softmax(empty), empty)


def test_var_without_degrees_of_freedom_is_nan():
    x = np.array([1.0, 2.0, 4.0], np.float32)
    close(jnp.var(x, ddof=2), np.var(x, ddof=2))
    for ddof in (3, 4):
        assert np.isnan(np.asarray(jnp.var(x, ddof=ddof)))
        assert np.isnan(np.asarray(jaxprc.jit(lambda v: jnp.std(v, ddof=ddof))(x)))


def test_searchsorted_puts_nan_last():
    a = np.array([-1.0, -0.0, 0.0, 1.0, np.nan], np.float32)
    v = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf], np.float32)
    for side in ("left", "right"):
        close(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side))
        close(jaxprc.jit(lambda a, v: jnp.searchsorted(a, v, side=side))(a, v), np.searchsorted(a, v, side=side))


def test_take_along_axis_clip_counts_negative_indices_from_the_end():
    idx = np.array([[0, 5], [-1, -3]])
    expected = np.take_along_axis(V.reshape(2, 2), np.clip(np.where(idx < 0, idx + 2, idx), 0, 1), axis=1)
    close(jnp.take_along_axis(V.reshape(2, 2), idx, axis=1, mode="clip"), expected)
    # take's "clip" clamps negative indices to 0, as JAX's does.
    close(jnp.take(V, np.array([-1, 9]), mode="clip"), V[[0, 3]])


def test_linspace_retstep_has_the_bounds_shape():
    _, step = jnp.linspace(2.0, 3.0, 5, retstep=True)
    assert step.shape == () and float(step) == 0.25
    assert np.isnan(float(jnp.linspace(2.0, 3.0, 1, retstep=True)[1]))    # undefined, as in JAX
    close(jnp.linspace(2.0, 3.0, 1), np.linspace(2.0, 3.0, 1, dtype=np.float32))
    close(jnp.linspace(np.array([0.0, 1.0]), np.array([1.0, 3.0]), 3, retstep=True, axis=1)[1],
          np.array([0.5, 1.0], np.float32))


def test_division_by_zero_and_infinity_gives_jaxs_values():
    f32 = lambda *v: np.array(v, np.float32)
    x, y = f32(1.0, -1.0, 1.0, -1.0, 5.5), f32(0.0, 0.0, -0.0, np.inf, -2.0)
    for fn in (jnp.floor_divide, jaxprc.jit(jnp.floor_divide)):
        np.testing.assert_array_equal(fn(x, y), f32(np.inf, -np.inf, -np.inf, -1.0, -3.0))
    ints, zeros = np.array([5, -5, 7], np.int32), np.zeros(3, np.int32)
    for fn in (jnp.remainder, jnp.fmod, jaxprc.jit(jnp.remainder)):       # XLA alone gives x % 0 == x
        np.testing.assert_array_equal(fn(ints, zeros), zeros)
    np.testing.assert_array_equal(jnp.remainder(ints, np.int32(-2)), np.remainder(ints, -2))
