"""Output shapes, dtypes and weak types of jaxprc.numpy / jaxprc.nn against JAX's (x64 off).

Each case is (function of a numpy-like module, argument specs). A spec is a
type string ("f32[3]", "~f32[]" for a weakly typed array, "bf16[2,3]") that
becomes an abstract argument on both sides, or a Python scalar passed as a
constant. JAX's answer comes from ``jax.eval_shape``, ours from
``jaxprc.eval_shape``; when JAX rejects a case, jaxprc must reject it too.
"""
import itertools
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.nn as jxnn
import jaxprc.numpy as xnp

DTYPES = {"bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "u8": np.uint8,
          "u16": np.uint16, "u32": np.uint32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
          "f32": np.float32, "c64": np.complex64}


def parse_spec(spec):
    m = re.fullmatch(r"(~?)(\w+)\[([\d,]*)\]", spec)
    weak, dtype, dims = m.groups()
    return tuple(int(d) for d in dims.split(",") if d), np.dtype(DTYPES[dtype]), bool(weak)


class NS:
    """The two libraries behind one name: ``m.np`` is jax.numpy or jaxprc.numpy, ``m.nn`` alike."""

    def __init__(self, np_mod, nn_mod):
        self.np, self.nn = np_mod, nn_mod


JAX, OURS = NS(jnp, jax.nn), NS(xnp, jxnn)


def evaluate(lib, struct_cls, eval_shape, fn, specs):
    arrays = [s for s in specs if isinstance(s, str)]
    structs = [struct_cls(*parse_spec(s)[:2], weak_type=parse_spec(s)[2]) for s in arrays]

    def f(*xs):
        it = iter(xs)
        args = [next(it) if isinstance(s, str) else s for s in specs]
        return fn(lib, *args)
    out = eval_shape(f, *structs)
    return [(tuple(o.shape), np.dtype(o.dtype), bool(o.weak_type)) for o in jax.tree_util.tree_leaves(out)] \
        if lib is JAX else [(tuple(o.shape), np.dtype(o.dtype), bool(o.weak_type))
                            for o in jaxprc.tree_util.tree_leaves(out)]


# --------------------------------------------------------------------- the table
CASES = []


def case(name, fn, *specs):
    CASES.append(pytest.param(fn, specs, id=f"{name}({', '.join(map(str, specs))})"))


BINARY_TYPES = [
    ("f32[3]", "f32[3]"), ("f32[2,3]", "f32[3]"), ("f32[3]", 1), ("f32[3]", 1.0), ("i32[3]", 1.0),
    ("i32[3]", 2), ("i8[3]", "u8[3]"), ("u8[3]", "i32[3]"), ("f16[3]", 1.0), ("bf16[3]", "f16[3]"),
    ("bf16[3]", 2), ("i32[3]", "f16[]"), ("bool[3]", 1), ("bool[3]", 1.0), ("~f32[3]", 1),
    ("~i32[]", 2.0), ("u32[3]", "i32[3]"), (1, 2.0), ("i16[3]", "u16[3]"), ("u8[3]", 3),
]
for op in ("add", "subtract", "multiply", "true_divide", "maximum", "equal", "less", "power"):
    for a, b in BINARY_TYPES:
        case(op, lambda m, x, y, op=op: getattr(m.np, op)(x, y), a, b)
for op in ("floor_divide", "remainder", "arctan2", "logaddexp", "minimum", "not_equal"):
    for a, b in BINARY_TYPES[::3]:
        case(op, lambda m, x, y, op=op: getattr(m.np, op)(x, y), a, b)
for op in ("add", "multiply", "maximum", "equal", "remainder", "fmod"):
    for a, b in [("~f16[3]", 1), (2.0, "~bf16[2]"), ("bool[3]", True)]:   # weak non-default dtypes
        case(op, lambda m, x, y, op=op: getattr(m.np, op)(x, y), a, b)
for op in ("bitwise_and", "bitwise_or", "left_shift", "right_shift", "logical_and"):
    for a, b in [("i32[3]", "i32[3]"), ("u8[3]", 1), ("bool[3]", "bool[3]"), ("i8[3]", "u8[3]")]:
        case(op, lambda m, x, y, op=op: getattr(m.np, op)(x, y), a, b)

UNARY_TYPES = ["f32[3]", "i32[3]", "u8[3]", "bool[3]", "f16[2]", "bf16[2]", "~f32[3]", "~i32[]", 1, 1.0]
for op in ("sin", "exp", "sqrt", "abs", "negative", "floor", "sign", "isnan", "isfinite", "square",
           "reciprocal", "logical_not", "round", "log1p", "tanh"):
    for t in UNARY_TYPES if op in ("sin", "abs", "floor", "isnan", "square") else UNARY_TYPES[::2]:
        case(op, lambda m, x, op=op: getattr(m.np, op)(x), t)
for t in ("i8[3]", "bool[3]", "u16[2]", "~i32[]", 1, True):
    case("bitwise_count", lambda m, x: m.np.bitwise_count(x), t)
# Constants inside JAX's functions are strongly typed (_constant_like), or weak only next to a weakly
# typed scalar (lax._const): weak arrays give strong results here.
for op in ("isinf", "signbit", "rint", "log2", "log10", "deg2rad", "sinc", "nan_to_num", "isposinf", "isneginf"):
    for t in (1, 1.0, True, "~f32[3]", "~i32[]", "i32[3]", "bool[3]", "f16[2]", "c64[2]", "~c64[]"):
        case(op, lambda m, x, op=op: getattr(m.np, op)(x), t)
case("round", lambda m, x: m.np.round(x), "bool[3]")
for t in ("~f32[3]", "c64[3]", "~c64[]"):
    case("round_decimals", lambda m, x: m.np.round(x, 2), t)
for t in ("c64[3]", "~c64[]", 1j):
    case("round", lambda m, x: m.np.round(x), t)
for op in ("hypot", "heaviside", "float_power", "logaddexp", "logaddexp2", "power", "copysign", "arctan2",
           "less", "greater_equal"):
    for a, b in [("~f32[3]", 1), ("~f32[3]", 2.0), ("~i32[]", 2.0), (1, 2.0), ("~f32[3]", "~f32[3]"),
                 ("f16[3]", 1.0), ("~f16[3]", "~f32[3]"), ("~i32[3]", "~i32[3]"), ("c64[3]", "c64[3]"),
                 ("f32[3]", "~c64[]")]:
        case(op, lambda m, x, y, op=op: getattr(m.np, op)(x, y), a, b)

for op in ("sum", "mean", "prod", "max", "argmax", "all", "any", "var", "std", "cumsum", "cumprod"):
    for t, axis in [("f32[2,3]", None), ("i8[2,3]", 0), ("u8[4]", -1), ("bool[2,3]", 1), ("f16[3]", None),
                    ("~f32[3]", 0), ("i32[2,3]", (0, 1))]:
        if op in ("argmax", "cumsum", "cumprod") and isinstance(axis, tuple):
            continue
        case(op, lambda m, x, op=op, axis=axis: getattr(m.np, op)(x, axis=axis), t)
case("sum_keepdims", lambda m, x: m.np.sum(x, axis=1, keepdims=True), "f32[2,3]")
case("mean_keepdims", lambda m, x: m.np.mean(x, axis=0, keepdims=True), "i32[2,3]")
case("sum_dtype", lambda m, x: m.np.sum(x, dtype=m.np.float16), "i32[2,3]")
for op in ("nansum", "nanprod", "nanmean", "nanmax", "nanmin"):
    for t, axis in [("f32[2,3]", None), ("i8[2,3]", 0), ("bool[2,3]", 1), ("f16[3]", None), ("~f32[3]", 0)]:
        case(op, lambda m, x, op=op, axis=axis: getattr(m.np, op)(x, axis=axis), t)
for op in ("cumulative_sum", "cumulative_prod"):
    for t, kw in [("f32[2,3]", {"axis": 1}), ("i8[4]", {}), ("bool[2,3]", {"axis": 0, "include_initial": True}),
                  ("~f32[3]", {"include_initial": True}), ("u8[3]", {"dtype": "float16"}), ("f32[2,3]", {}),
                  ("f32[]", {})]:
        case(op, lambda m, x, op=op, kw=kw: getattr(m.np, op)(x, **kw), t)

for a, b in [("f32[2,3]", "f32[3,4]"), ("i32[3]", "f32[3]"), ("bf16[2,3]", "bf16[3]"), ("i8[3]", "u8[3]"),
             ("f32[5,2,3]", "f32[3,4]"), ("~f32[3]", "~f32[3]"), ("f16[3]", "f32[3]")]:
    case("dot", lambda m, x, y: m.np.dot(x, y), a, b)
    case("matmul", lambda m, x, y: m.np.matmul(x, y), a, b)
case("matmul_batch", lambda m, x, y: x @ y, "f32[2,1,3,4]", "f32[5,4,2]")
case("einsum", lambda m, x, y: m.np.einsum("ij,jk->ki", x, y), "f32[2,3]", "i32[3,4]")
case("einsum_batch", lambda m, x, y: m.np.einsum("bij,bjk->bik", x, y), "f16[2,2,3]", "f16[2,3,4]")
case("einsum_trace", lambda m, x: m.np.einsum("ii", x), "f32[3,3]")
case("tensordot", lambda m, x, y: m.np.tensordot(x, y, axes=([1, 0], [0, 1])), "f32[2,3,4]", "f32[3,2]")
case("outer", lambda m, x, y: m.np.outer(x, y), "i32[3]", "f32[2]")
case("inner", lambda m, x, y: m.np.inner(x, y), "f32[2,3]", "f32[4,3]")

SHAPE_CASES = [
    ("reshape", lambda m, x: m.np.reshape(x, (3, -1)), "f32[2,3]"),
    ("ravel", lambda m, x: m.np.ravel(x), "~f32[2,3]"),
    ("transpose", lambda m, x: m.np.transpose(x, (2, 0, 1)), "i8[2,3,4]"),
    ("swapaxes", lambda m, x: m.np.swapaxes(x, 0, 2), "f32[2,3,4]"),
    ("moveaxis", lambda m, x: m.np.moveaxis(x, 0, -1), "f32[2,3,4]"),
    ("squeeze", lambda m, x: m.np.squeeze(x), "f32[1,3,1]"),
    ("expand_dims", lambda m, x: m.np.expand_dims(x, (0, 2)), "f32[3]"),
    ("concatenate", lambda m, x, y: m.np.concatenate([x, y], axis=1), "i32[2,3]", "f32[2,1]"),
    ("concatenate_weak", lambda m, x, y: m.np.concatenate([x, y]), "~f32[2]", "bf16[3]"),
    ("stack", lambda m, x, y: m.np.stack([x, y], axis=-1), "u8[3]", "i8[3]"),
    ("hstack", lambda m, x, y: m.np.hstack([x, y]), "f32[3]", "f32[2]"),
    ("vstack", lambda m, x, y: m.np.vstack([x, y]), "f32[3]", "f32[3]"),
    ("split", lambda m, x: m.np.split(x, 3, axis=1), "f32[2,6]"),
    ("split_idx", lambda m, x: m.np.split(x, [1, 4]), "f32[6]"),
    ("tile", lambda m, x: m.np.tile(x, (2, 1, 3)), "f32[2,3]"),
    ("repeat", lambda m, x: m.np.repeat(x, 2, axis=0), "bool[2,3]"),
    ("repeat_flat", lambda m, x: m.np.repeat(x, 3), "f32[2,3]"),
    ("broadcast_to", lambda m, x: m.np.broadcast_to(x, (4, 2, 3)), "~f32[3]"),
    ("flip", lambda m, x: m.np.flip(x, 1), "f32[2,3]"),
    ("roll", lambda m, x: m.np.roll(x, 2, axis=1), "f32[2,3]"),
    ("pad", lambda m, x: m.np.pad(x, ((1, 2), (0, 1))), "i32[2,3]"),
    ("pad_edge", lambda m, x: m.np.pad(x, 2, mode="edge"), "f32[3]"),
    ("where", lambda m, c, x, y: m.np.where(c, x, y), "bool[3]", "i32[3]", 1.0),
    ("where_scalars", lambda m, c: m.np.where(c, 1, 2), "bool[2,3]"),
    ("clip", lambda m, x: m.np.clip(x, 0.5, 1), "i32[3]"),
    ("clip_f16", lambda m, x: m.np.clip(x, 0, 1), "f16[3]"),
    ("sort", lambda m, x: m.np.sort(x, axis=0), "f32[3,2]"),
    ("argsort", lambda m, x: m.np.argsort(x), "f32[3,2]"),
    ("take", lambda m, x, i: m.np.take(x, i, axis=1), "f32[3,4]", "i32[2,5]"),
    ("take_along_axis", lambda m, x, i: m.np.take_along_axis(x, i, axis=1), "f32[3,4]", "i32[3,2]"),
    ("diag", lambda m, x: m.np.diag(x), "f32[3]"),
    ("diag2", lambda m, x: m.np.diag(x, 1), "f32[3,4]"),
    ("trace", lambda m, x: m.np.trace(x), "i8[3,3]"),
    ("triu", lambda m, x: m.np.triu(x), "f32[3,3]"),
    ("tril", lambda m, x: m.np.tril(x, -1), "~f32[3,3]"),
    ("norm", lambda m, x: m.np.linalg.norm(x), "f32[3,4]"),
    ("norm_int", lambda m, x: m.np.linalg.norm(x, axis=1), "i32[3,4]"),
    ("norm_inf", lambda m, x: m.np.linalg.norm(x, ord=np.inf), "f16[4]"),
    ("getitem_slice", lambda m, x: x[1:, ::-2], "f32[3,4]"),
    ("getitem_int", lambda m, x: x[-1], "f32[3,4]"),
    ("getitem_none", lambda m, x: x[None, ..., 0, None], "f32[3,4]"),
    ("getitem_array", lambda m, x, i: x[i], "f32[3,4]", "i32[2,2]"),
    ("getitem_mixed", lambda m, x, i: x[:, i, 1], "f32[3,4,5]", "i32[2]"),
    ("getitem_nonadjacent", lambda m, x, i: x[i, :, i], "f32[3,4,5]", "i32[2]"),
    ("getitem_dynamic", lambda m, x, i: x[i], "f32[3,4]", "i32[]"),
    ("at_set", lambda m, x: x.at[1].set(2), "f32[3,4]"),
    ("at_add_array", lambda m, x, i: x.at[i].add(1.0), "i32[5]", "i32[2]"),
    ("at_max", lambda m, x, v: x.at[:, 0].max(v), "f32[3,4]", "f32[3]"),
    ("astype", lambda m, x: x.astype(m.np.bfloat16), "f32[3]"),
    ("T", lambda m, x: x.T, "f32[2,3]"),
    ("iter", lambda m, x: list(x), "f32[2,3]"),
    ("isclose", lambda m, x, y: m.np.isclose(x, y), "f32[3]", "f32[3]"),
    ("unstack", lambda m, x: m.np.unstack(x, axis=1), "~f32[2,3]"),
    ("meshgrid", lambda m, x, y: m.np.meshgrid(x, y), "f32[3]", "i32[2]"),
    ("meshgrid_ij_sparse", lambda m, x, y: m.np.meshgrid(x, y, indexing="ij", sparse=True), "f32[3]", "f32[2]"),
    ("astype_fn", lambda m, x: m.np.astype(x, m.np.float16), "~f32[3]"),
    ("lax.dot_dimension_numbers", lambda m, x, y: (jax.lax if m is JAX else jaxprc.lax).dot(
        x, y, dimension_numbers=(((2,), (1,)), ((0,), (0,)))), "f32[2,3,4]", "f32[2,4,5]"),
    ("lax.dot_preferred", lambda m, x, y: (jax.lax if m is JAX else jaxprc.lax).dot(
        x, y, preferred_element_type=m.np.float32), "bf16[2,3]", "bf16[3]"),
    ("lax.dot_positional_precision", lambda m, x, y: (jax.lax if m is JAX else jaxprc.lax).dot(x, y, None),
     "f32[2,3]", "f32[3]"),
]
for name, fn, *specs in SHAPE_CASES:
    case(name, fn, *specs)

CREATION_CASES = [
    ("zeros", lambda m: m.np.zeros((2, 3))), ("ones_i", lambda m: m.np.ones(3, m.np.int32)),
    ("full", lambda m: m.np.full((2,), 1.0)), ("full_int", lambda m: m.np.full((2,), 3, m.np.uint8)),
    ("arange", lambda m: m.np.arange(5)), ("arange_f", lambda m: m.np.arange(1.0, 3.0, 0.5)),
    ("linspace", lambda m: m.np.linspace(0, 1, 5)), ("eye", lambda m: m.np.eye(3, 4, k=1)),
    ("identity", lambda m: m.np.identity(2, m.np.int8)), ("array_scalar", lambda m: m.np.array(1.0)),
    ("asarray_int", lambda m: m.np.asarray(3)), ("array_list", lambda m: m.np.array([1, 2.0])),
    ("float32_call", lambda m: m.np.float32(2)), ("tri", lambda m: m.np.tri(3)),
]
for name, fn in CREATION_CASES:
    case(name, fn)
case("zeros_like", lambda m, x: m.np.zeros_like(x), "~f32[3]")
case("ones_like_dtype", lambda m, x: m.np.ones_like(x, dtype=m.np.int8), "f32[3]")
case("full_like", lambda m, x: m.np.full_like(x, 2.5), "i32[3]")

for op, kw in [("relu", {}), ("sigmoid", {}), ("softplus", {}), ("gelu", {}), ("gelu", {"approximate": False}),
               ("log_softmax", {}), ("softmax", {"axis": 0}), ("logsumexp", {"axis": 1})]:
    for t in ("f32[2,3]", "bf16[2,3]", "i32[2,3]", "~f32[2,3]"):
        case(f"nn.{op}", lambda m, x, op=op, kw=kw: getattr(m.nn, op)(x, **kw), t)
case("nn.one_hot", lambda m, x: m.nn.one_hot(x, 4), "i32[3]")
case("nn.one_hot_dtype", lambda m, x: m.nn.one_hot(x, 4, dtype=m.np.bfloat16, axis=0), "u8[2,3]")
case("result_type", lambda m, x: m.np.zeros((), m.np.result_type(x, 1.0, m.np.int8)), "i16[]")


def test_table_is_large_enough():
    assert len(CASES) >= 150


@pytest.mark.sample(3)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("fn,specs", CASES)
def test_matches_jax(fn, specs):
    try:
        expected = evaluate(JAX, jax.ShapeDtypeStruct, jax.eval_shape, fn, specs)
    except Exception as e:  # noqa: BLE001  (JAX rejects the case: so must we)
        with pytest.raises(Exception):
            evaluate(OURS, jaxprc.ShapeDtypeStruct, jaxprc.eval_shape, fn, specs)
        return
    got = evaluate(OURS, jaxprc.ShapeDtypeStruct, jaxprc.eval_shape, fn, specs)
    assert got == expected


@pytest.mark.parametrize("a,b", list(itertools.product(
    [np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.float16, ml_dtypes.bfloat16, np.float32, int, float],
    repeat=2)))
def test_result_type_matches_jax(a, b):
    assert xnp.result_type(a, b) == jnp.result_type(a, b)
    assert xnp.promote_types(a, b) == jnp.promote_types(a, b)
