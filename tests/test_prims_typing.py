"""Typing rules of the structural, reduction and linear-algebra primitives (and of ``complex``, the
elementwise primitive whose result dtype differs from its operands'), and lax's output types.

Each primitive has accept cases (operand types and params -> result types)
and reject cases (a JaxprTypeError naming the primitive and the operand
types). Both are checked on ``abstract_eval`` directly and through tracing.
The lax cases check traced output types (shape, dtype, weak type), including
Python-scalar weak typing, and the errors lax raises itself.
"""

import numpy as np
import pytest

from jaxprc import lax
from jaxprc.ir import JaxprTypeError, PARAM_TYPES, ShapedArray, trace_to_jaxpr
from jaxprc.ir import dtypes as dt
from jaxprc.lax import cumulative, reductions, shapes, slicing, sorting
from jaxprc.lax.slicing import (GatherDimensionNumbers as GDN, GatherScatterMode,
                                ScatterDimensionNumbers as SDN)


def T(text: str) -> ShapedArray:
    """A type from its text form: ``f32[2,3]``, ``~f32[]`` (weak)."""
    weak = text.startswith("~")
    name, dims = text.lstrip("~")[:-1].split("[")
    shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    return ShapedArray(shape, dt.FROM_SHORT_NAME[name], weak)


def types(texts: str) -> list[ShapedArray]:
    return [T(t) for t in texts.split()]


def P(name):
    from jaxprc.ir import PRIMITIVES
    return PRIMITIVES[name]


GATHER = dict(dimension_numbers=GDN((1,), (0,), (0,)), slice_sizes=(1, 3), indices_are_sorted=False,
              unique_indices=False, mode=GatherScatterMode.CLIP, fill_value=None)
SCATTER = dict(dimension_numbers=SDN((1,), (0,), (0,)), indices_are_sorted=False, unique_indices=False,
               mode=GatherScatterMode.FILL_OR_DROP)
SCATTER_NAMES = ["scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"]
MATMUL = dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None, preferred_element_type=None)
BMM = dict(dimension_numbers=(((2,), (1,)), ((0,), (0,))), precision=None, preferred_element_type=None)

# (primitive name, operand types, params, result types)
ACCEPT = [
    ("broadcast_in_dim", "f32[3]", dict(shape=(2, 3), broadcast_dimensions=(1,)), "f32[2,3]"),
    ("broadcast_in_dim", "~f32[]", dict(shape=(4,), broadcast_dimensions=()), "~f32[4]"),
    ("broadcast_in_dim", "i32[1,3]", dict(shape=(5, 3), broadcast_dimensions=(0, 1)), "i32[5,3]"),
    ("reshape", "f32[2,3]", dict(new_sizes=(3, 2), dimensions=None), "f32[3,2]"),
    ("reshape", "~bf16[6]", dict(new_sizes=(1, 6, 1), dimensions=None), "~bf16[1,6,1]"),
    ("reshape", "f32[0,3]", dict(new_sizes=(3, 0), dimensions=None), "f32[3,0]"),
    ("transpose", "f32[2,3,4]", dict(permutation=(2, 0, 1)), "f32[4,2,3]"),
    ("squeeze", "f32[1,3,1]", dict(dimensions=(0, 2)), "f32[3]"),
    ("rev", "~f32[2,3]", dict(dimensions=(0, 1)), "~f32[2,3]"),
    ("pad", "f32[3] f32[]", dict(padding_config=((1, 2, 1),)), "f32[8]"),
    ("pad", "f32[4,2] f32[]", dict(padding_config=((-1, 0, 0), (0, 0, 0))), "f32[3,2]"),
    ("pad", "~f32[3] ~f32[]", dict(padding_config=((0, 0, 0),)), "~f32[3]"),
    ("pad", "f32[0] f32[]", dict(padding_config=((1, 1, 5),)), "f32[2]"),
    ("concatenate", "f32[2,3] f32[2,1]", dict(dimension=1), "f32[2,4]"),
    ("concatenate", "~f32[2] f32[3]", dict(dimension=0), "f32[5]"),
    ("slice", "f32[10,4]", dict(start_indices=(1, 0), limit_indices=(8, 4), strides=(3, 1)), "f32[3,4]"),
    ("slice", "f32[5]", dict(start_indices=(2,), limit_indices=(2,), strides=None), "f32[0]"),
    ("dynamic_slice", "f32[5,4] i32[] i32[]", dict(slice_sizes=(2, 4)), "f32[2,4]"),
    ("dynamic_slice", "~f32[5] u8[]", dict(slice_sizes=(0,)), "~f32[0]"),
    ("dynamic_update_slice", "f32[5,4] f32[2,4] i32[] i32[]", {}, "f32[5,4]"),
    ("dynamic_update_slice", "~f32[5] ~f32[2] i32[]", {}, "f32[5]"),
    ("dynamic_update_slice", "~f32[5] ~f32[2] ~i32[]", {}, "~f32[5]"),
    ("gather", "f32[5,3] i32[2,1]", GATHER, "f32[2,3]"),
    ("gather", "f32[5,3] i32[4,7,1]", dict(GATHER, dimension_numbers=GDN((2,), (0,), (0,))), "f32[4,7,3]"),
    ("gather", "f32[5,3] i32[2,2]", dict(GATHER, dimension_numbers=GDN((), (0, 1), (0, 1)), slice_sizes=(1, 1)),
     "f32[2]"),
    ("gather", "f32[4,5] i32[4,1]",
     dict(GATHER, dimension_numbers=GDN((1,), (), (1,), (0,), (0,)), slice_sizes=(1, 2)), "f32[4,2]"),
    *[(name, "f32[5,3] i32[2,1] f32[2,3]", SCATTER, "f32[5,3]") for name in SCATTER_NAMES],
    ("scatter-add", "~f32[5] i32[1] ~f32[]",
     dict(SCATTER, dimension_numbers=SDN((), (0,), (0,))), "~f32[5]"),
    ("iota", "", dict(dtype=dt.int32, shape=(2, 3), dimension=1), "i32[2,3]"),
    ("iota", "", dict(dtype=dt.float32, shape=(4,), dimension=0), "f32[4]"),
    ("sort", "f32[2,3] i32[2,3]", dict(dimension=1, is_stable=True, num_keys=1), "f32[2,3] i32[2,3]"),
    ("sort", "~f32[4]", dict(dimension=0, is_stable=False, num_keys=1), "~f32[4]"),
    ("argmax", "f32[2,3]", dict(axes=(1,), index_dtype=dt.int32), "i32[2]"),
    ("argmin", "~i8[4,2]", dict(axes=(0,), index_dtype=dt.int16), "i16[2]"),
    *[(name, "~f32[2,3]", dict(axis=1, reverse=True), "~f32[2,3]")
      for name in ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]],
    ("cumsum", "i32[4]", dict(axis=0, reverse=False), "i32[4]"),
    ("reduce_sum", "f32[2,3,4]", dict(axes=(0, 2)), "f32[3]"),
    ("reduce_sum", "~f32[3]", dict(axes=(0,)), "~f32[]"),
    ("reduce_sum", "f32[3]", dict(axes=()), "f32[3]"),
    ("reduce_prod", "c64[3,2]", dict(axes=(1,)), "c64[3]"),
    ("reduce_max", "bf16[2,2]", dict(axes=(0, 1)), "bf16[]"),
    ("reduce_min", "u8[2,5]", dict(axes=(1,)), "u8[2]"),
    ("reduce_and", "bool[4]", dict(axes=(0,)), "bool[]"),
    ("reduce_or", "i32[4]", dict(axes=(0,)), "i32[]"),
    ("reduce_xor", "bool[2,4]", dict(axes=(1,)), "bool[2]"),
    ("dot_general", "f32[2,3] f32[3,4]", MATMUL, "f32[2,4]"),
    ("dot_general", "f32[5,2,3] f32[5,3,4]", BMM, "f32[5,2,4]"),
    ("dot_general", "bf16[2,3] bf16[3]", dict(MATMUL, preferred_element_type=dt.float32), "f32[2]"),
    ("dot_general", "~f32[3] ~f32[3]", dict(MATMUL, dimension_numbers=(((0,), (0,)), ((), ()))), "~f32[]"),
    ("dot_general", "~bf16[3] ~bf16[3]", dict(MATMUL, dimension_numbers=(((0,), (0,)), ((), ())),
                                              preferred_element_type=dt.float32), "~f32[]"),
    ("dot_general", "i8[2] i8[3]", dict(MATMUL, dimension_numbers=(((), ()), ((), ()))), "i8[2,3]"),
    ("complex", "f32[2,3] f32[2,3]", {}, "c64[2,3]"),
    ("complex", "f64[3] f64[3]", {}, "c128[3]"),
    ("complex", "~f32[] ~f32[]", {}, "~c64[]"),
    ("complex", "~f32[3] f32[3]", {}, "c64[3]"),
]

# (primitive name, operand types, params, a fragment of the expected message)
REJECT = [
    ("broadcast_in_dim", "f32[3]", dict(shape=(2, 4), broadcast_dimensions=(1,)), "size of result dimension"),
    ("broadcast_in_dim", "f32[3]", dict(shape=(3,), broadcast_dimensions=()), "one broadcast dimension"),
    ("broadcast_in_dim", "f32[1,1]", dict(shape=(3, 3), broadcast_dimensions=(1, 0)), "strictly increasing"),
    ("reshape", "f32[2,3]", dict(new_sizes=(4,), dimensions=None), "6 elements"),
    ("reshape", "f32[2,3]", dict(new_sizes=(3, 2), dimensions=(1, 0)), "dimensions=None"),
    ("transpose", "f32[2,3]", dict(permutation=(0, 0)), "permutation"),
    ("squeeze", "f32[2,3]", dict(dimensions=(0,)), "size 1"),
    ("squeeze", "f32[1,3]", dict(dimensions=(2,)), "distinct dimensions"),
    ("rev", "f32[2,3]", dict(dimensions=(0, 0)), "distinct dimensions"),
    ("pad", "f32[3] i32[]", dict(padding_config=((1, 1, 0),)), "padding value"),
    ("pad", "f32[3] f32[]", dict(padding_config=((1, 1, 0), (0, 0, 0))), "triple per dimension"),
    ("pad", "f32[3] f32[]", dict(padding_config=((-3, -1, 0),)), "non-negative"),
    ("concatenate", "f32[2,3] f32[3,3]", dict(dimension=1), "equal shapes except"),
    ("concatenate", "f32[2] i32[2]", dict(dimension=0), "equal dtypes"),
    ("concatenate", "f32[2]", dict(dimension=1), "dimension in"),
    ("slice", "f32[5]", dict(start_indices=(3,), limit_indices=(6,), strides=None), "limit <= size"),
    ("slice", "f32[5]", dict(start_indices=(0,), limit_indices=(5,), strides=(0,)), "strides >= 1"),
    ("slice", "f32[5,2]", dict(start_indices=(0,), limit_indices=(5,), strides=None), "per dimension"),
    ("dynamic_slice", "f32[5] f32[]", dict(slice_sizes=(2,)), "integer scalars"),
    ("dynamic_slice", "f32[5] i32[]", dict(slice_sizes=(6,)), "slice size"),
    ("dynamic_slice", "f32[5,2] i32[]", dict(slice_sizes=(1, 1)), "per dimension"),
    ("dynamic_update_slice", "f32[5] f32[6] i32[]", {}, "no larger"),
    ("dynamic_update_slice", "f32[5] i32[2] i32[]", {}, "operand's dtype"),
    ("dynamic_update_slice", "f32[5] f32[2] i32[1]", {}, "integer scalars"),
    ("gather", "f32[5,3] f32[2,1]", GATHER, "integer indices"),
    ("gather", "f32[5,3] i32[2,2]", GATHER, "index vector"),
    ("gather", "f32[5,3] i32[2,1]", dict(GATHER, slice_sizes=(1, 4)), "slice size"),
    ("gather", "f32[5,3] i32[2,1]", dict(GATHER, slice_sizes=(2, 3)), "collapsed_slice_dims"),
    ("gather", "f32[5,3] i32[2,1]", dict(GATHER, dimension_numbers=GDN((2,), (0,), (0,))), "offset_dims"),
    *[(name, "f32[5,3] i32[2,1] f32[3,3]", SCATTER, "update scatter dimensions") for name in SCATTER_NAMES],
    ("scatter-add", "f32[5,3] i32[2,1] i32[2,3]", SCATTER, "updates of the operand's dtype"),
    ("scatter", "f32[5,3] i32[2,1] f32[2,4]", SCATTER, "windows no larger"),
    ("scatter", "f32[5,3] i32[2,1] f32[2,3]", dict(SCATTER, dimension_numbers=SDN((1,), (), (0,))),
     "update_window_dims"),
    ("iota", "", dict(dtype=dt.int32, shape=(3,), dimension=1), "dimension in"),
    ("iota", "", dict(dtype=dt.bool_, shape=(3,), dimension=0), "numeric dtype"),
    ("sort", "f32[2,3] f32[3,2]", dict(dimension=0, is_stable=True, num_keys=1), "equal shapes"),
    ("sort", "f32[3]", dict(dimension=0, is_stable=True, num_keys=2), "num_keys"),
    ("sort", "f32[3]", dict(dimension=1, is_stable=True, num_keys=1), "dimension in"),
    ("argmax", "f32[2,3]", dict(axes=(0, 1), index_dtype=dt.int32), "exactly one axis"),
    ("argmax", "f32[2,3]", dict(axes=(1,), index_dtype=dt.float32), "integer index_dtype"),
    ("argmin", "c64[3]", dict(axes=(0,), index_dtype=dt.int32), "ordered"),
    ("argmin", "f32[0,3]", dict(axes=(0,), index_dtype=dt.int32), "non-empty"),
    ("cumsum", "f32[3]", dict(axis=1, reverse=False), "axis in"),
    ("cumsum", "bool[3]", dict(axis=0, reverse=False), "numeric"),
    ("cummax", "f32[3]", dict(axis=2, reverse=False), "axis in"),
    ("cummin", "f32[3]", dict(axis=-2, reverse=False), "axis in"),
    ("reduce_max", "c64[3]", dict(axes=(0, 0)), "distinct dimensions"),
    ("reduce_min", "f32[3]", dict(axes=(1,)), "distinct dimensions"),
    ("cumprod", "bool[3]", dict(axis=0, reverse=False), "numeric"),
    ("cumlogsumexp", "i32[3]", dict(axis=0, reverse=False), "floating"),
    ("reduce_sum", "f32[3]", dict(axes=(1,)), "distinct dimensions"),
    ("reduce_sum", "bool[3]", dict(axes=(0,)), "numeric"),
    ("reduce_prod", "f32[3,3]", dict(axes=(0, 0)), "distinct dimensions"),
    ("reduce_and", "f32[3]", dict(axes=(0,)), "boolean or integer"),
    ("reduce_or", "f32[3]", dict(axes=(0,)), "boolean or integer"),
    ("reduce_xor", "f32[3]", dict(axes=(0,)), "boolean or integer"),
    ("dot_general", "f32[2,3] f32[4,3]", MATMUL, "contracting dimensions"),
    ("dot_general", "f32[2,3] f16[3,4]", MATMUL, "equal dtypes"),
    ("dot_general", "f32[5,2,3] f32[6,3,4]", BMM, "batch dimensions"),
    ("dot_general", "f32[2,3] f32[3,4]", dict(MATMUL, dimension_numbers=(((2,), (0,)), ((), ()))), "distinct lhs"),
    ("dot_general", "f32[2,3] f32[3,4]", dict(MATMUL, dimension_numbers=(((1,), (0,)), ((1,), (0,)))),
     "distinct lhs"),
    ("complex", "f16[3] f16[3]", {}, "subtypes of float32, float64"),
    ("complex", "bf16[3] bf16[3]", {}, "subtypes of float32, float64"),
    ("complex", "i32[3] i32[3]", {}, "subtypes of float32, float64"),
    ("complex", "c64[3] c64[3]", {}, "subtypes of float32, float64"),
    ("complex", "f32[3] f64[3]", {}, "the same dtypes"),
    ("complex", "f32[3] f32[2]", {}, "incompatible shapes for broadcasting"),
    ("complex", "f32[3]", {}, "2 operand(s)"),
]

MY_PRIMITIVES = [p for mod in (shapes, slicing, reductions, cumulative, sorting, lax.contractions)
                 for p in vars(mod).values()
                 if type(p).__name__ == "Primitive"]


def _trace(prim, avals, params):
    """Bind ``prim`` on tracers of ``avals``; the traced jaxpr's output types."""
    def f(*xs):
        out = prim.bind(*xs, **params)
        return list(out) if prim.multiple_results else [out]
    return trace_to_jaxpr(f, avals).jaxpr.out_avals


def _case_id(case):
    return f"{case[0]}({case[1]})"


@pytest.mark.parametrize("name,ins,params,outs", ACCEPT, ids=map(_case_id, ACCEPT))
def test_accept(name, ins, params, outs):
    prim, avals, expected = P(name), types(ins), types(outs)
    direct = prim.abstract_eval(*avals, **params)
    assert (list(direct) if prim.multiple_results else [direct]) == expected
    assert _trace(prim, avals, params) == expected


@pytest.mark.parametrize("name,ins,params,fragment", REJECT, ids=map(_case_id, REJECT))
def test_reject(name, ins, params, fragment):
    prim, avals = P(name), types(ins)
    for check in (lambda: prim.abstract_eval(*avals, **params), lambda: _trace(prim, avals, params)):
        with pytest.raises(JaxprTypeError) as info:
            check()
        message = str(info.value)
        assert name in message and fragment in message
        assert all(a.str_short() in message for a in avals), message


@pytest.mark.parametrize("prim", MY_PRIMITIVES, ids=str)
def test_every_primitive_has_accept_and_reject_cases(prim):
    assert any(c[0] == prim.name for c in ACCEPT)
    assert any(c[0] == prim.name for c in REJECT)


def test_param_types_registered():
    for cls in (GDN, SDN, GatherScatterMode):
        assert PARAM_TYPES[cls.__name__] is cls
    assert P("sort").multiple_results


# ----------------------------------------------------------------------- lax
F16, F32, I32 = dt.float16, dt.float32, dt.int32
DN = GDN((1,), (0,), (0,))
IDX = np.array([[0], [2]], np.int32)

# (description, function, input types, output types)
LAX = [
    ("add weak + python float stays weak", lambda x: lax.add(x, 1.0), "~f32[3]", "~f32[3]"),
    ("pow takes a python int exponent", lambda x: lax.pow(x, 2), "bf16[2]", "bf16[2]"),
    ("sub two python floats is weak", lambda: lax.sub(1.0, 2.0), "", "~f32[]"),
    ("complex python float adapts", lambda x: lax.complex(x, 1.0), "f32[3]", "c64[3]"),
    ("complex two python floats is weak", lambda: lax.complex(1.0, 2.0), "", "~c64[]"),
    ("complex rank-0 operand broadcasts", lambda x, y: lax.complex(x, y), "f32[] f32[2]", "c64[2]"),
    ("rank-0 operand broadcasts", lambda x, y: lax.div(x, y), "f32[] f32[2,3]", "f32[2,3]"),
    ("comparison gives bool", lambda x: lax.lt(x, 0.0), "~f32[3]", "~bool[3]"),  # weak in, weak out (as JAX)
    ("max with numpy array", lambda x: lax.max(x, np.zeros(3, np.float32)), "f32[3]", "f32[3]"),
    ("bitwise_and python int", lambda x: lax.bitwise_and(x, 3), "i32[4]", "i32[4]"),
    ("shift_left", lambda x, y: lax.shift_left(x, y), "i32[2] i32[2]", "i32[2]"),
    ("bitwise_not", lambda x: lax.bitwise_not(x), "bool[2]", "bool[2]"),
    ("integer_pow", lambda x: lax.integer_pow(x, 3), "~f32[2]", "~f32[2]"),
    ("round to even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), "f32[2]", "f32[2]"),
    ("unary on python float", lambda: lax.sin(1.0), "", "~f32[]"),
    ("abs of complex", lambda x: lax.abs(x), "c64[2]", "f32[2]"),
    ("convert_element_type", lambda x: lax.convert_element_type(x, np.int8), "~f32[2]", "i8[2]"),
    ("convert_element_type canonicalizes", lambda x: lax.convert_element_type(x, np.float64), "i32[2]",
     "f32[2]"),
    ("convert_element_type drops weak", lambda x: lax.convert_element_type(x, np.float32), "~f32[2]",
     "f32[2]"),
    ("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, np.int32), "f32[2]", "i32[2]"),
    ("clamp python bounds", lambda x: lax.clamp(0.0, x, 1.0), "f32[3]", "f32[3]"),
    ("select", lambda p, x: lax.select(p, x, 0.0), "bool[3] f32[3]", "f32[3]"),
    ("select_n int32", lambda w, x, y: lax.select_n(w, x, y), "i32[3] f32[3] f32[3]", "f32[3]"),
    ("stop_gradient pytree", lambda x, i: lax.stop_gradient((x, [i])), "f32[2] i32[]", "f32[2] i32[]"),
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, [4, 3], [1]), "~f32[3]", "~f32[4,3]"),
    ("broadcast", lambda x: lax.broadcast(x, (2, 1)), "f32[3]", "f32[2,1,3]"),
    ("broadcast_to_rank", lambda x: lax.broadcast_to_rank(x, 3), "f32[3]", "f32[1,1,3]"),
    ("reshape with dimensions", lambda x: lax.reshape(x, (6,), (1, 0)), "f32[2,3]", "f32[6]"),
    ("transpose negative", lambda x: lax.transpose(x, (-1, 0)), "f32[2,3]", "f32[3,2]"),
    ("squeeze negative", lambda x: lax.squeeze(x, (-1,)), "f32[2,1]", "f32[2]"),
    ("expand_dims", lambda x: lax.expand_dims(x, (0, -1)), "f32[2]", "f32[1,2,1]"),
    ("collapse", lambda x: lax.collapse(x, 1), "f32[2,3,4]", "f32[2,12]"),
    ("rev", lambda x: lax.rev(x, (-1,)), "f32[2,3]", "f32[2,3]"),
    ("pad python value", lambda x: lax.pad(x, 0.0, [(1, 1, 1)]), "f16[3]", "f16[7]"),
    ("concatenate", lambda x, y: lax.concatenate([x, y], -1), "f32[2,1] f32[2,3]", "f32[2,4]"),
    ("slice", lambda x: lax.slice(x, (1,), (5,), (2,)), "f32[6]", "f32[2]"),
    ("slice_in_dim None and negative", lambda x: lax.slice_in_dim(x, None, -1, axis=1), "f32[2,5]",
     "f32[2,4]"),
    ("index_in_dim", lambda x: lax.index_in_dim(x, -1, 1, keepdims=False), "f32[2,5]", "f32[2]"),
    ("dynamic_slice static", lambda x: lax.dynamic_slice(x, (1, -2), (1, 2)), "f32[3,4]", "f32[1,2]"),
    ("dynamic_slice traced", lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 4)), "f32[3,4] i32[]",
     "f32[2,4]"),
    ("dynamic_slice index array", lambda x, i: lax.dynamic_slice(x, i, (2, 2)), "f32[3,4] i32[2]",
     "f32[2,2]"),
    ("dynamic_slice_in_dim", lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), "f32[3,4] i32[]",
     "f32[3,2]"),
    ("dynamic_index_in_dim", lambda x, i: lax.dynamic_index_in_dim(x, i, 0, False), "f32[3,4] i32[]",
     "f32[4]"),
    ("dynamic_update_slice", lambda x, u: lax.dynamic_update_slice(x, u, (0, 1)), "f32[3,4] f32[2,2]",
     "f32[3,4]"),
    ("dynamic_update_slice_in_dim", lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, 0),
     "f32[3,4] f32[1,4] i32[]", "f32[3,4]"),
    ("dynamic_update_index_in_dim", lambda x, u: lax.dynamic_update_index_in_dim(x, u, 2, 0),
     "f32[3,4] f32[4]", "f32[3,4]"),
    ("gather", lambda x: lax.gather(x, IDX, DN, (1, 3), mode="clip"), "f32[5,3]", "f32[2,3]"),
    ("scatter_add", lambda x, u: lax.scatter_add(x, IDX, u, SDN((1,), (0,), (0,))), "f32[5,3] f32[2,3]",
     "f32[5,3]"),
    ("scatter python update", lambda x: lax.scatter(x, IDX, 0.0, SDN((), (0,), (0,))), "f32[5]", "f32[5]"),
    ("scatter_mul/min/max", lambda x, u: (lax.scatter_mul(x, IDX, u, SDN((1,), (0,), (0,))),
                                          lax.scatter_min(x, IDX, u, SDN((1,), (0,), (0,))),
                                          lax.scatter_max(x, IDX, u, SDN((1,), (0,), (0,)))),
     "i32[5,3] i32[2,3]", "i32[5,3] i32[5,3] i32[5,3]"),
    ("iota", lambda: lax.iota(np.int64, 4), "", "i32[4]"),
    ("broadcasted_iota", lambda: lax.broadcasted_iota(np.float32, (2, 3), -1), "", "f32[2,3]"),
    ("sort single", lambda x: lax.sort(x), "~f32[3]", "~f32[3]"),
    ("sort tuple", lambda x, y: lax.sort((x, y), dimension=0, num_keys=2), "f32[3] i32[3]", "f32[3] i32[3]"),
    ("sort_key_val", lambda k, v: lax.sort_key_val(k, v), "i32[3] f32[3]", "i32[3] f32[3]"),
    ("argmax", lambda x: lax.argmax(x, -1, np.int32), "f32[2,3]", "i32[2]"),
    ("argmin canonical index dtype", lambda x: lax.argmin(x, 0, np.int64), "f32[2,3]", "i32[3]"),
    ("cumsum", lambda x: lax.cumsum(x, -1, reverse=True), "~f32[2,3]", "~f32[2,3]"),
    ("cumlogsumexp/cumprod/cummax/cummin",
     lambda x: (lax.cumlogsumexp(x), lax.cumprod(x), lax.cummax(x), lax.cummin(x)),
     "f32[3]", "f32[3] f32[3] f32[3] f32[3]"),
    ("reduce_sum negative axes", lambda x: lax.reduce_sum(x, (-1, 0)), "f32[2,3,4]", "f32[3]"),
    ("reduce_max weak", lambda x: lax.reduce_max(x, [0]), "~f32[2]", "~f32[]"),
    ("reduce_prod/min", lambda x: (lax.reduce_prod(x, (0,)), lax.reduce_min(x, (0,))), "i32[2]",
     "i32[] i32[]"),
    ("reduce_and/or/xor", lambda x: (lax.reduce_and(x, (0,)), lax.reduce_or(x, (0,)),
                                     lax.reduce_xor(x, (0,))), "bool[2]", "bool[] bool[] bool[]"),
    ("dot_general lists", lambda x, y: lax.dot_general(x, y, ([[1], [0]], [[], []])), "f32[2,3] f32[3]",
     "f32[2]"),
    ("dot_general preferred", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                           preferred_element_type=np.float32),
     "bf16[2,3] bf16[3,5]", "f32[2,5]"),
    ("dot matrix-vector", lambda x, y: lax.dot(x, y), "f32[2,3] f32[3]", "f32[2]"),
    ("dot vector-vector", lambda x, y: lax.dot(x, y), "f32[3] f32[3]", "f32[]"),
    ("full weak", lambda: lax.full((2,), 1.0), "", "~f32[2]"),
    ("full dtype", lambda: lax.full((2,), 1, np.float16), "", "f16[2]"),
    ("full traced value", lambda v: lax.full((2, 2), v), "i32[]", "i32[2,2]"),
    ("full_like", lambda x: lax.full_like(x, 2), "bf16[3]", "bf16[3]"),
    ("full_like keeps weak", lambda x: lax.full_like(x, 2), "~f32[3]", "~f32[3]"),
    ("full_like dtype and shape", lambda x: lax.full_like(x, 2, np.int32, (4,)), "f32[3]", "i32[4]"),
    ("zeros_like_array", lambda x: lax.zeros_like_array(x), "u8[2,2]", "u8[2,2]"),
]


@pytest.mark.parametrize("fn,ins,outs", [c[1:] for c in LAX], ids=[c[0] for c in LAX])
def test_lax_output_types(fn, ins, outs):
    def flat(*xs):
        out = fn(*xs)
        from jaxprc.ir.tree_util import tree_leaves
        return tree_leaves(out)
    closed = trace_to_jaxpr(flat, types(ins) if ins else [])
    assert [a.str_short() for a in closed.jaxpr.out_avals] == outs.split()


def test_lax_python_scalar_is_a_weak_literal():
    eqn, = trace_to_jaxpr(lambda x: [lax.mul(x, 2.0)], [T("f32[]")]).jaxpr.eqns
    literal = eqn.invars[1]
    assert literal.aval == T("~f32[]") and literal.val == 2.0


def test_lax_skips_no_op_equations():
    closed = trace_to_jaxpr(lambda x: [lax.reshape(lax.transpose(lax.convert_element_type(x, np.float32),
                                                                  (0, 1)), (2, 3))], [T("f32[2,3]")])
    assert closed.jaxpr.eqns == []


LAX_ERRORS = [
    # a Python scalar has its default dtype (weakly typed), as in JAX: no adapting to the other operand
    ("python float into int", lambda x: lax.add(x, 1.5), "i32[3]", TypeError, "got int32, float32"),
    ("python float with f16", lambda x: lax.add(x, 1.0), "f16[3]", TypeError, "got float16, float32"),
    ("python int with bf16", lambda x: lax.mul(2, x), "bf16[2]", TypeError, "got int32, bfloat16"),
    ("python int with u8", lambda x: lax.bitwise_and(x, 3), "u8[4]", TypeError, "lax.and requires arguments to have the same dtypes, got uint8, int32"),
    ("python bool to add", lambda x: lax.add(x, True), "i32[4]", TypeError, "add does not accept dtype bool at position 1"),
    ("python bounds with f16", lambda x: lax.clamp(0.0, x, 1.0), "f16[3]", TypeError, "lax.clamp requires arguments to have the same dtypes, got float32, float16, float32"),
    ("complex of ints", lambda x: lax.complex(x, 1), "i32[3]", JaxprTypeError, "subtypes of float32, float64"),
    ("mixed dtypes", lambda x, y: lax.add(x, y), "f32[3] f16[3]", JaxprTypeError, "lax.add requires arguments to have the same dtypes, got float32, float16"),
    ("unequal shapes", lambda x, y: lax.mul(x, y), "f32[3] f32[2]", JaxprTypeError, "incompatible shapes for broadcasting"),
    ("axis out of range", lambda x: lax.cumsum(x, 2), "f32[3]", ValueError, "out of bounds"),
    ("dot of rank 3", lambda x: lax.dot(x, x), "f32[2,2,2]", ValueError, "dimension_numbers must be specified"),
    ("full of an array", lambda x: lax.full((3,), x), "f32[2]", TypeError, "scalar fill_value"),
    ("index out of range", lambda x: lax.index_in_dim(x, 3), "f32[3]", IndexError, "out of bounds"),
    ("float start index", lambda x, i: lax.dynamic_slice(x, (i,), (1,)), "f32[3] f32[]", TypeError,
     "integer scalars"),
    ("wrong number of starts", lambda x: lax.dynamic_slice(x, (0,), (1, 1)), "f32[3,3]", ValueError,
     r"Length of slice indices must match number of operand dimensions \(1 vs \(3, 3\)\)"),
    ("bad gather mode", lambda x: lax.gather(x, IDX, DN, (1, 3), mode="wrap"), "f32[5,3]", ValueError,
     "mode"),
    ("repeated expand_dims", lambda x: lax.expand_dims(x, (0, -3)), "f32[3]", ValueError, "repeated"),
    ("bad sort dimension", lambda x: lax.sort(x, dimension=1), "f32[3]", ValueError, "out of bounds"),
]


@pytest.mark.parametrize("fn,ins,error,fragment", [c[1:] for c in LAX_ERRORS], ids=[c[0] for c in LAX_ERRORS])
def test_lax_errors(fn, ins, error, fragment):
    with pytest.raises(error, match=fragment):
        trace_to_jaxpr(lambda *xs: [fn(*xs)], types(ins))


def test_gather_scatter_mode_from_any():
    assert GatherScatterMode.from_any(None) is GatherScatterMode.FILL_OR_DROP
    assert GatherScatterMode.from_any("clip") is GatherScatterMode.CLIP
    assert GatherScatterMode.from_any("promise_in_bounds") is GatherScatterMode.PROMISE_IN_BOUNDS
    assert GatherScatterMode.from_any(GatherScatterMode.CLIP) is GatherScatterMode.CLIP


# ------------------------------------------------------- eager lax, numbers
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
HALVES = np.float32([0.5, 1.5, -0.5, 2.5])
SDN_ROWS = SDN((1,), (0,), (0,))


def _np_scatter_add(x, rows, updates):
    out = x.copy()
    np.add.at(out, rows, updates)
    return out


# (description, lax computation, numpy oracle)
EAGER = [
    ("add python scalar", lambda: lax.add(X, 1.0), lambda: X + 1),
    ("sin", lambda: lax.sin(X), lambda: np.sin(X)),
    ("broadcast_in_dim", lambda: lax.broadcast_in_dim(X[0], (2, 3), (1,)), lambda: np.broadcast_to(X[0], (2, 3))),
    ("reshape", lambda: lax.reshape(X, (3, 2)), lambda: X.reshape(3, 2)),
    ("reshape transposed", lambda: lax.reshape(X, (6,), (1, 0)), lambda: X.T.ravel()),
    ("transpose", lambda: lax.transpose(X, (1, 0)), lambda: X.T),
    ("rev", lambda: lax.rev(X, (1,)), lambda: X[:, ::-1]),
    ("pad interior and negative", lambda: lax.pad(X, 9.0, [(1, 0, 1), (0, -1, 0)]),
     lambda: np.array([[9, 9], X[0, :2], [9, 9], X[1, :2]], np.float32)),
    ("concatenate", lambda: lax.concatenate([X, X[:, :1]], 1), lambda: np.concatenate([X, X[:, :1]], 1)),
    ("slice strided", lambda: lax.slice(X, (0, 0), (2, 3), (1, 2)), lambda: X[:, ::2]),
    ("dynamic_slice negative start", lambda: lax.dynamic_slice(X, (1, -2), (1, 2)), lambda: X[1:, 1:]),
    ("dynamic_slice clamps", lambda: lax.dynamic_slice(X, (1, 2), (2, 2)), lambda: X[:, 1:]),
    ("dynamic_update_slice", lambda: lax.dynamic_update_slice(X, np.ones((1, 2), np.float32), (1, 1)),
     lambda: np.where(np.array([[0, 0, 0], [0, 1, 1]], bool), 1, X)),
    ("gather rows", lambda: lax.gather(X.T, IDX, DN, (1, 2), mode="clip"), lambda: X.T[[0, 2]]),
    ("scatter_add rows", lambda: lax.scatter_add(X.T.copy(), np.int32([[0], [0]]), np.ones((2, 2), np.float32),
                                                 SDN_ROWS),
     lambda: _np_scatter_add(X.T, [0, 0], np.ones((2, 2), np.float32))),
    ("broadcasted_iota", lambda: lax.broadcasted_iota(np.int32, (2, 3), 1), lambda: np.tile(np.arange(3, dtype=np.int32), (2, 1))),
    ("sort", lambda: lax.sort(np.float32([3, 1, 2])), lambda: np.float32([1, 2, 3])),
    ("sort_key_val values", lambda: lax.sort_key_val(np.float32([3, 1, 2]), np.int32([0, 1, 2]))[1],
     lambda: np.int32([1, 2, 0])),
    ("argmax", lambda: lax.argmax(X, 1, np.int32), lambda: X.argmax(1).astype(np.int32)),
    ("argmin", lambda: lax.argmin(X, 0, np.int32), lambda: X.argmin(0).astype(np.int32)),
    ("cumsum reverse", lambda: lax.cumsum(X, 1, reverse=True), lambda: np.cumsum(X[:, ::-1], 1)[:, ::-1]),
    ("cumprod", lambda: lax.cumprod(X, 0), lambda: np.cumprod(X, 0)),
    ("cummax", lambda: lax.cummax(X[::-1].copy(), 0), lambda: np.maximum.accumulate(X[::-1], 0)),
    ("cummin", lambda: lax.cummin(X, 1), lambda: np.minimum.accumulate(X, 1)),
    ("cumlogsumexp", lambda: lax.cumlogsumexp(X, 1), lambda: np.logaddexp.accumulate(X, 1)),
    ("reduce_sum", lambda: lax.reduce_sum(X, (1,)), lambda: X.sum(1)),
    ("reduce_prod", lambda: lax.reduce_prod(X, (0,)), lambda: X.prod(0)),
    ("reduce_max", lambda: lax.reduce_max(X, (1,)), lambda: X.max(1)),
    ("reduce_min", lambda: lax.reduce_min(X, (0, 1)), lambda: X.min()),
    ("reduce_and", lambda: lax.reduce_and(X > -1, (1,)), lambda: (X > -1).all(1)),
    ("reduce_or", lambda: lax.reduce_or(X > 2, (1,)), lambda: (X > 2).any(1)),
    ("reduce_xor", lambda: lax.reduce_xor(np.int32([1, 3, 4]), (0,)), lambda: np.int32(1 ^ 3 ^ 4)),
    ("dot", lambda: lax.dot(X, X.T), lambda: X @ X.T),
    ("dot_general batched", lambda: lax.dot_general(np.stack([X, X]), np.stack([X.T, X.T]),
                                                    (((2,), (1,)), ((0,), (0,)))),
     lambda: np.stack([X @ X.T] * 2)),
    ("select", lambda: lax.select(X > 0, X, 0.0), lambda: np.maximum(X, 0)),
    ("clamp", lambda: lax.clamp(-1.0, X, 1.0), lambda: np.clip(X, -1, 1)),
    ("convert_element_type truncates", lambda: lax.convert_element_type(X, np.int32), lambda: X.astype(np.int32)),
    ("round away from zero", lambda: lax.round(HALVES), lambda: np.float32([1, 2, -1, 3])),
    ("complex", lambda: lax.complex(X, 2.0), lambda: X + 2j),
    ("round to even", lambda: lax.round(HALVES, lax.RoundingMethod.TO_NEAREST_EVEN), lambda: np.round(HALVES)),
    ("full", lambda: lax.full((2,), 3.0), lambda: np.float32([3, 3])),
    ("expand_dims", lambda: lax.expand_dims(X, (1,)), lambda: X[:, None]),
    ("index_in_dim", lambda: lax.index_in_dim(X, -1, 1, False), lambda: X[:, -1]),
]


@pytest.mark.parametrize("fn,oracle", [c[1:] for c in EAGER], ids=[c[0] for c in EAGER])
def test_eager_lax_values(fn, oracle):
    got, want = np.asarray(fn()), np.asarray(oracle())
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_eager_python_scalar_keeps_weak_type():
    assert lax.add(1.0, 2.0).weak_type
    assert lax.full((2,), 1.0).weak_type
    half = lax.add(np.ones(3, np.float16), np.float16(1.0))
    assert half.dtype == np.float16 and not half.weak_type
