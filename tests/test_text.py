"""The text form: printer layout and determinism, parser round trips per primitive, param kinds,
constants, @name definitions (recursive ones included), and located parse errors (the corpus in
tests/malformed/)."""
import enum
import math
import pathlib
import re
from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest

from jaxprc import lax
from jaxprc.ir import (PRIMITIVES, ClosedJaxpr, Eqn, Jaxpr, Literal, Primitive, ShapedArray, Thunk, Var,
                       param_type, trace_to_jaxpr)
from jaxprc import lax as prims
from jaxprc.ir import Effect, HostCallback
from jaxprc.sharding import ShardingParam
from jaxprc.lax import control_flow as cf
from jaxprc.ir.shape_poly import symbolic_shape
from jaxprc.ir.equality import alpha_equivalent, structural_hash
from jaxprc.ir.parser import ParseError, parse
from jaxprc.ir.verify import verify
from roundtrip import assert_round_trip

f32, i32, bf16 = np.dtype("float32"), np.dtype("int32"), np.dtype(ml_dtypes.bfloat16)


def trace(fun, *avals):
    def flat(*xs):
        out = fun(*xs)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return trace_to_jaxpr(flat, list(avals))


def sa(shape, dtype=f32, weak=False):
    return ShapedArray(shape, dtype, weak)



# ------------------------------------------------------------------- layout

def test_layout_matches_jax_style():
    cj = trace(lambda x, y: lax.mul_p.bind(x, lax.broadcast_in_dim(y, (3,), ())), sa((3,)), sa(()))
    assert str(cj) == ("{ lambda ; a:f32[3] b:f32[]. let\n"
                       "    c:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] b\n"
                       "    d:f32[3] = mul a c\n"
                       "  in (d,) }")


def test_short_jaxpr_prints_on_one_line():
    cj = trace(lambda x: lax.sin_p.bind(x), sa((3,)))
    assert str(cj) == "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"


def test_constvars_before_semicolon_values_after_with():
    c = np.array([1.0, -0.0, np.inf], np.float32)
    cj = trace(lambda x: lax.add_p.bind(x, c), sa((3,)))
    text = str(cj)
    assert text.startswith("{ lambda a:f32[3]; b:f32[3]. let")
    assert text.endswith(" } with a = [1.0, -0.0, inf]")
    back = assert_round_trip(cj)
    assert np.asarray(back.consts[0]).tobytes() == c.tobytes()


def test_weak_literal_prints_with_tilde():
    cj = trace(lambda x: lax.mul_p.bind(x, 2.0), sa(()))
    assert "mul a 2.0:~f32[]" in str(cj)
    assert_round_trip(cj)


def test_names_skip_reserved_words_and_continue_past_z():
    def chain(x):
        for _ in range(800):
            x = lax.neg_p.bind(x)
        return x
    text = str(trace(chain, sa(())))
    binders = re.findall(r"(\w+):f32\[\]", text)
    assert binders[:3] == ["a", "b", "c"] and binders[26:28] == ["ba", "bb"]
    assert len(set(binders)) == len(binders)
    assert not {"in", "inf", "nan"} & set(binders)
    assert_round_trip(trace(chain, sa(())))


def test_printing_is_deterministic_and_alpha_invariant():
    f = lambda x, y: [lax.add_p.bind(lax.sin_p.bind(x), y), lax.cos_p.bind(y)]
    a, b = trace(f, sa((2,)), sa((2,))), trace(f, sa((2,)), sa((2,)))
    assert str(a) == str(a) == str(b)
    assert alpha_equivalent(a, b) and a == b and hash(a) == hash(b)
    c = trace(lambda x, y: [lax.add_p.bind(lax.sin_p.bind(y), x), lax.cos_p.bind(y)],
              sa((2,)), sa((2,)))
    assert not alpha_equivalent(a, c) and str(a) != str(c)


# --------------------------------------------------------- per primitive

X3 = sa((3,))
ELEMENTWISE_BY_KIND = {
    "float": ["neg", "sign", "floor", "ceil", "exp", "exp2", "log", "log1p", "expm1", "tanh",
              "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
              "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "square", "abs", "erf", "erfc", "erf_inv",
              "lgamma", "digamma", "stop_gradient", "copy", "is_finite", "bessel_i0e", "bessel_i1e"],
    "float2": ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
               "eq", "ne", "lt", "le", "gt", "ge", "igamma", "igammac", "igamma_grad_a", "zeta",
               "polygamma"],
    "float3": ["regularized_incomplete_beta"],
    "int": ["not", "population_count", "clz"],
    "int2": ["and", "or", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical"],
    "complex": ["real", "imag", "conj"],
    "float2 to complex": ["complex"],
}


@pytest.mark.parametrize("name,avals", [
    (n, {"float": [X3], "float2": [X3, X3], "float3": [X3, X3, X3], "int": [sa((3,), i32)], "int2": [sa((3,), i32)] * 2,
         "complex": [sa((3,), np.complex64)], "float2 to complex": [X3, X3]}[k])
    for k, ns in ELEMENTWISE_BY_KIND.items() for n in ns])
def test_elementwise_round_trip(name, avals):
    prim = PRIMITIVES[name]
    assert_round_trip(trace(lambda *xs: prim.bind(*xs), *avals))


def _structural_cases():
    x23 = sa((2, 3))
    idx = sa((2, 1), i32)
    gdn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                     start_index_map=(0,), operand_batching_dims=(),
                                     start_indices_batching_dims=())
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,), operand_batching_dims=(),
                                      scatter_indices_batching_dims=())
    return {
        "round": (lambda x: lax.round(x), [X3]),
        "integer_pow": (lambda x: lax.integer_pow(x, -3), [X3]),
        "convert_element_type": (lambda x: lax.convert_element_type(x, bf16), [X3]),
        "bitcast_convert_type": (lambda x: lax.bitcast_convert_type(x, i32), [X3]),
        "clamp": (lambda x: lax.clamp(0.0, x, 1.0), [X3]),
        "select_n": (lambda p, x, y: lax.select_n(p, x, y), [sa((3,), bool), X3, X3]),
        "broadcast_in_dim": (lambda x: lax.broadcast_in_dim(x, (2, 3), (1,)), [X3]),
        "reshape": (lambda x: lax.reshape(x, (3, 2)), [x23]),
        "transpose": (lambda x: lax.transpose(x, (1, 0)), [x23]),
        "squeeze": (lambda x: lax.squeeze(x, (0,)), [sa((1, 3))]),
        "rev": (lambda x: lax.rev(x, (0, 1)), [x23]),
        "pad": (lambda x: lax.pad(x, 0.0, ((1, -1, 0), (0, 2, 1))), [x23]),
        "concatenate": (lambda x, y: lax.concatenate([x, y], 0), [x23, x23]),
        "slice": (lambda x: lax.slice(x, (0, 1), (2, 3), (1, 2)), [x23]),
        "dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i, i), (1, 2)), [x23, sa((), i32)]),
        "dynamic_update_slice": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)),
                                 [x23, sa((1, 2)), sa((), i32)]),
        "gather": (lambda x, i: lax.gather(x, i, gdn, (1, 3), mode=lax.GatherScatterMode.CLIP),
                   [x23, idx]),
        "scatter-add": (lambda x, i, u: lax.scatter_add(x, i, u, sdn), [x23, idx, sa((2, 3))]),
        "iota": (lambda: lax.iota(i32, 4), []),
        "dim_as_value": (lambda x: lax.dim_as_value(x.shape[0]), [sa(symbolic_shape("b, 3"))]),
        "sort": (lambda x, y: lax.sort((x, y), num_keys=1), [X3, X3]),
        "argmax": (lambda x: lax.argmax(x, 1, i32), [x23]),
        "cumsum": (lambda x: lax.cumsum(x, 1, reverse=True), [x23]),
        "reduce_max": (lambda x: lax.reduce_max(x, (0, 1)), [x23]),
        "dot_general": (lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                     preferred_element_type=f32), [x23, sa((3, 2))]),
        **{name: (lambda x, i, u, prim=PRIMITIVES[name]: prim.bind(
            x, i, u, dimension_numbers=sdn, indices_are_sorted=False, unique_indices=False,
            mode=lax.GatherScatterMode.FILL_OR_DROP), [x23, idx, sa((2, 3))])
           for name in ("scatter", "scatter-mul", "scatter-min", "scatter-max")},
        **{name: (lambda x, prim=PRIMITIVES[name]: prim.bind(x, axis=0, reverse=False), [x23])
           for name in ("cumprod", "cummax", "cummin", "cumlogsumexp")},
        **{name: (lambda x, prim=PRIMITIVES[name]: prim.bind(x, axes=(1,)), [x23])
           for name in ("reduce_sum", "reduce_prod", "reduce_min")},
        **{name: (lambda x, prim=PRIMITIVES[name]: prim.bind(x, axes=(0,)), [sa((2,), bool)])
           for name in ("reduce_and", "reduce_or", "reduce_xor")},
        "argmin": (lambda x: PRIMITIVES["argmin"].bind(x, axes=(0,), index_dtype=i32), [x23]),
        "checkpoint": (lambda x: PRIMITIVES["checkpoint"].bind(
            x, jaxpr=trace(lambda y: lax.exp_p.bind(y), X3), prevent_cse=True, policy=None), [X3]),
        "name": (lambda x: prims.name_p.bind(x, name="hidden"), [X3]),
        "cond": (lambda p, x: cf.cond(p, lambda a: lax.sin_p.bind(a), lambda a: a, x),
                 [sa((), bool), X3]),
        "while": (lambda x: cf.while_loop(lambda c: lax.lt(c[0], 3), lambda c: (c[0] + 1, c[1] * 2.0),
                                          (0, x)), [X3]),
        "scan": (lambda x: cf.scan(lambda c, a: (c + a, c * a), 0.0, x), [X3]),
        # callbacks as read from text: by name, without a Python function
        "debug_callback": (lambda x: prims.debug_callback_p.bind(
            x, callback=HostCallback("show"), effect=Effect.ordered_debug, partitioned=False), [X3]),
        "pure_callback": (lambda x: prims.pure_callback_p.bind(
            x, callback=HostCallback("f"), result_avals=(sa((2,), i32),), vmap_method="expand_dims", device=3), [X3]),
        "io_callback": (lambda x: prims.io_callback_p.bind(
            x, callback=HostCallback("g"), result_avals=(), ordered=False, device=None), [X3]),
        "fft": (lambda x: lax.fft(x, lax.FftType.IRFFT, (2, 4)), [sa((2, 3), np.complex64)]),
        "custom_linear_solve": (lambda x: cf.custom_linear_solve(lambda v: v * 2.0, x, lambda mv, v: v / 2.0),
                                [X3]),
        "custom_root": (lambda x: cf.custom_root(lambda v: v - x, x, lambda f, v: x, lambda g, y: y), [X3]),
        "top_k": (lambda x: lax.top_k(x, 2, axis=0), [x23]),
        "check": (lambda x: prims.check_p.bind(
            lax.gt(x[0], 0.0), np.int32(7), x, kinds=("FailedCheckError",), payload_counts=(1,), codes=(7,),
            messages=(prims.ErrorMessage("FailedCheckError", "x = {x}", "((), {'x': 0})"),), debug=False), [X3]),
        "reduce_precision": (lambda x: lax.reduce_precision(x, 5, 10), [X3]),
        "mulhi": (lambda x, y: lax.mulhi(x, y), [sa((3,), i32), sa((3,), i32)]),
        "optimization_barrier": (lambda x, y: lax.optimization_barrier((x, y)), [X3, x23]),
        "create_token": (lambda: lax.create_token(), []),
        "after_all": (lambda x: lax.after_all(lax.create_token(), lax.create_token()), [X3]),
        "rng_bit_generator": (lambda k: lax.rng_bit_generator(k, (2, 3), np.uint8, lax.RandomAlgorithm.RNG_PHILOX),
                              [sa((4,), np.dtype(np.uint32))]),
        "rng_uniform": (lambda a, b: lax.rng_uniform(a, b, (4,)), [sa(()), sa(())]),
        "composite": (lambda x: lax.composite(lambda v, *, k: v * k, "my.scale", 1)(x, k=2.5), [X3]),
        "reduce": (lambda x: lax.reduce(x, 1.0, lambda a, b: a * b + b, (0,)), [x23]),
        **{name: (lambda a, f=f: f(a), [sa((2, 3, 3))]) for name, f in _LINALG.items()},
        "triangular_solve": (lambda a, b: lax.linalg.triangular_solve(a, b, lower=True, transpose_a=True),
                             [sa((3, 3)), sa((2, 3))]),
        "tridiagonal_solve": (lambda d, b: lax.linalg.tridiagonal_solve(d, d, d, b), [X3, sa((3, 2))]),
        "householder_product": (lambda a, t: lax.linalg.householder_product(a, t), [sa((3, 2)), sa((2,))]),
        "lu_pivots_to_permutation": (lambda p: lax.linalg.lu_pivots_to_permutation(p, 4), [sa((3,), i32)]),
        "conv_general_dilated": (lambda x, w: lax.conv_general_dilated(
            x, w, (1, 2), ((1, 0), (0, -1)), (1, 2), (2, 1), ("NHWC", "HWIO", "NHWC"), feature_group_count=2,
            precision=lax.Precision.HIGH), [sa((1, 4, 5, 4)), sa((2, 2, 2, 6))]),
        **{name: (lambda x, init=init, op=op: lax.reduce_window(x, init, op, (1, 2), (1, 2), ((0, 1), (1, 0)),
                                                                 (1, 2), (1, 1)), [x23])
           for name, init, op in [("reduce_window_sum", 0.0, lax.add), ("reduce_window_max", -np.inf, lax.max),
                                  ("reduce_window_min", np.inf, lax.min),
                                  ("reduce_window", 1.0, lax.mul)]},
        **{name: (lambda t, x, prim=PRIMITIVES[name], extra=extra: prim.bind(
            t, x, select_prim="ge", window_dimensions=(1, 2), window_strides=(1, 1), padding=((0, 0), (0, 1)),
            **extra),
            [sa((2, 3)) if name == "select_and_scatter_add" else x23, x23])
           for name, extra in [("select_and_gather_add", dict(base_dilation=(1, 1), window_dilation=(1, 1))),
                               ("select_and_scatter_add", {})]},
        "random_gamma": (lambda k, a: PRIMITIVES["random_gamma"].bind(k, a, log_space=False),
                         [sa((2,), np.uint32), X3]),
        "random_gamma_grad": (lambda a, x: prims.random_gamma_grad(a, x), [X3, X3]),
        **{name: (_parallel, [sa((2, 3))])
           for name in ("shard_map", "psum", "pmax", "pmin", "all_gather", "ppermute", "axis_index",
                        "psum_scatter", "all_to_all", "pbroadcast", "pvary")},
        "ragged_all_to_all": (lambda x: _parallel_mesh(lambda a: prims.ragged_all_to_all(
            a, a, *[prims.full((1,), 0, np.int32)] * 4, axis_name="i", axis_index_groups=[[0]]))(x), [sa((2, 3))]),
        "sharding_constraint": (lambda x: prims.sharding_constraint_p.bind(x, sharding=ShardingParam(
            ("x", "y"), (1, 1), ("Auto", "Explicit"), (0,), (("y", "x"),))), [sa((3, 2))]),
        **{name: (lambda x, p=getattr(prims, name + "_p"): p.bind(x, global_mesh=ShardingParam(
            ("x", "y"), (1, 1), ("Auto", "Explicit"), (0,), ()), pspec=(("y", "x"), ())), [sa((3, 2))])
           for name in ("host_local_array_to_global_array", "global_array_to_host_local_array")},
        # a custom_vmap rule as read from text: by name, without a Python function
        "custom_vmap_call": (lambda x, t: prims.custom_vmap_call_p.bind(
            x, t, call=trace(lambda a, b: [lax.sin_p.bind(a), lax.mul_p.bind(lax.cos_p.bind(a), b)], X3, X3),
            rule=_VmapRule("f_rule", num_consts=0, jvps=((0, 1, 1),))), [X3, X3]),
        "linear_call": (lambda r, x: _linear_call(lambda r, v: v * r, lambda r, ct: ct * r, r, x), [X3, X3]),
    }


def _VmapRule(*args, **kwargs):
    from jaxprc.lax.custom_batching import VmapRule
    return VmapRule(*args, **kwargs)


def _linear_call(*args):
    from jaxprc.custom_derivatives import linear_call
    return linear_call(*args)


_LINALG = {"cholesky": lambda a: lax.linalg.cholesky(a), "lu": lambda a: lax.linalg.lu(a),
           "qr": lambda a: lax.linalg.qr(a, full_matrices=False), "eigh": lambda a: lax.linalg.eigh(a),
           "svd": lambda a: lax.linalg.svd(a, compute_uv=False), "eig": lambda a: lax.linalg.eig(a),
           "schur": lambda a: lax.linalg.schur(a), "hessenberg": lambda a: lax.linalg.hessenberg(a),
           "geqrf": lambda a: lax.linalg.geqrf(a)}


def _parallel_mesh(body):
    import jaxprc as jx
    from jaxprc.sharding import PartitionSpec as PS
    return jx.shard_map(body, mesh=jx.make_mesh((1,), ("i",)), in_specs=PS("i"), out_specs=PS("i"))


def _parallel(x):
    import jaxprc as jx
    from jaxprc.sharding import PartitionSpec as PS
    body = lambda a: (prims.psum(a, "i"), prims.pmax(a, "i"), prims.pmin(a, "i"),  # noqa: E731
                      prims.all_gather(a, "i"), prims.ppermute(a, "i", [(0, 0)]),
                      lax.expand_dims(prims.axis_index("i"), (0,)),
                      prims.psum_scatter(a, "i", tiled=True), prims.all_to_all(a, "i", 0, 1, tiled=True),
                      prims.pbroadcast(a, "i", 0), prims.pcast(prims.psum(a, "i"), "i", to="varying"))
    return jx.shard_map(body, mesh=jx.make_mesh((1,), ("i",)), in_specs=PS("i"),
                        out_specs=(PS("i"),) * 10)(x)


@pytest.mark.parametrize("name", sorted(_structural_cases()))
def test_structural_and_control_flow_round_trip(name):
    fun, avals = _structural_cases()[name]
    cj = trace(fun, *avals)
    assert any(e.primitive.name == name or name in str(e) for e in cj.eqns), str(cj)
    assert_round_trip(cj)


def test_every_registered_primitive_is_covered():
    covered = {n for ns in ELEMENTWISE_BY_KIND.values() for n in ns} | set(_structural_cases())
    missing = {"jit", "custom_jvp_call_jaxpr", "custom_vjp_call_jaxpr", "custom_lin",   # tested below
               "call_exported",     # its module has no text form: test_export checks parse refuses it
               "ffi_call"}          # round-trips (and runs) in tests/test_ffi.py, beside its C++ handler
    builtin = {p.name for p in vars(prims).values() if isinstance(p, Primitive)}
    assert not builtin - covered - missing, sorted(builtin - covered - missing)


def test_nested_call_and_sub_jaxpr_scopes():
    inner = trace(lambda x: lax.cos_p.bind(x), X3)
    cj = trace(lambda x: PRIMITIVES["jit"].bind(x, jaxpr=inner, name="inner")[0], X3)
    text = str(cj)
    assert "jaxpr={ lambda ; c:f32[3]. let d:f32[3] = cos c in (d,) }" in text
    assert 'name="inner"' in text
    assert_round_trip(cj)


# --------------------------------------------------------------- param kinds

probe_p = PRIMITIVES.get("test_text_probe")
if probe_p is None:
    probe_p = Primitive("test_text_probe")
    probe_p.def_abstract_eval(lambda x, **params: x)


@param_type
class ProbeMode(enum.Enum):
    FAST = 1
    SLOW = 2


@param_type
class ProbeRecord(NamedTuple):
    dims: tuple
    mode: ProbeMode
    scale: float


PARAM_VALUES = {
    "ints": (0, -7, 2**62), "bools": (True, False), "none": None,
    "floats": (1.5, -0.0, 0.0, math.inf, -math.inf, 1e-300, 1.0000000000000002),
    "nan": math.nan, "string": 'a "quoted"\nline\\ é', "empty": (), "one": (3,),
    "nested": ((1, (2, ())), ((),)), "dtypes": (f32, bf16, np.dtype(bool), np.dtype(np.uint8)),
    "enum": ProbeMode.SLOW, "record": ProbeRecord(dims=(0, 1), mode=ProbeMode.FAST, scale=0.5),
    "avals": (sa((2, 3)), sa((), f32, True)), "complex": 1 - 2j,
}


def test_every_param_kind_round_trips():
    cj = trace(lambda x: probe_p.bind(x, **PARAM_VALUES), X3)
    back = assert_round_trip(cj)
    params = back.eqns[0].params
    for k, v in PARAM_VALUES.items():
        got = params[k]
        if k == "nan":
            assert math.isnan(got)
        else:
            assert got == v and type(got) is type(v), k
    assert math.copysign(1, params["floats"][1]) == -1
    text = str(cj)
    assert "enum=ProbeMode.SLOW" in text and "record=ProbeRecord(dims=(0, 1), mode=ProbeMode.FAST" in text
    assert "dtypes=(f32, bf16, bool, u8)" in text and "floats=(1.5, -0.0, 0.0, inf, -inf" in text


def test_float_params_compare_bitwise():
    a = trace(lambda x: probe_p.bind(x, v=0.0), X3)
    b = trace(lambda x: probe_p.bind(x, v=-0.0), X3)
    n1 = trace(lambda x: probe_p.bind(x, v=math.nan), X3)
    n2 = trace(lambda x: probe_p.bind(x, v=float("nan")), X3)
    assert not alpha_equivalent(a, b)
    assert alpha_equivalent(n1, n2) and structural_hash(n1) == structural_hash(n2)


@pytest.mark.parametrize("dtype,values", [
    (f32, [0.1, -0.0, np.nan, np.inf, -np.inf, 3.4028235e38, 1e-45]),
    (bf16, [0.1, -0.0, np.nan, 1e38, 3.0]),
    (np.float16, [0.1, 65504.0, 6e-8]),
    (np.int8, [-128, 127]), (np.uint32, [0, 2**32 - 1]), (bool, [True, False]),
    (np.complex64, [1 - 2j, complex(-0.0, np.inf)]),
])
def test_literals_and_consts_of_every_dtype_round_trip_bitwise(dtype, values):
    dtype = np.dtype(dtype)
    arr = np.array(values, dtype)
    lits = [Literal(v, sa((), dtype)) for v in arr]
    x = Var(sa(arr.shape, dtype))
    c = Var(sa(arr.shape, dtype))
    eqns = [Eqn(lax.copy_p, [lit], [Var(sa((), dtype))], {}) for lit in lits]
    j = Jaxpr([c], [x], [c, *[e.outvars[0] for e in eqns], *lits], eqns)
    cj = ClosedJaxpr(j, [arr])
    back = assert_round_trip(cj)
    assert back.consts[0].tobytes() == arr.tobytes() or dtype.kind in "fc" and np.array_equal(
        back.consts[0], arr, equal_nan=True)
    for lit, e in zip(lits, back.eqns):
        got = e.invars[0].val
        assert np.asarray(got).tobytes() == np.asarray(lit.val).tobytes() or np.isnan(got)


def test_large_empty_and_scalar_constants_round_trip():
    big = np.random.default_rng(0).standard_normal((40, 50)).astype(bf16)
    consts = [big, np.zeros((2, 0), np.int32), np.array(-0.0, np.float32)]
    constvars = [Var(sa(c.shape, c.dtype)) for c in consts]
    cj = ClosedJaxpr(Jaxpr(constvars, [], constvars, []), consts)
    text = str(cj)
    assert 'b64"' in text and "[[], []]" in text and "c = -0.0" in text
    back = assert_round_trip(cj)
    for got, want in zip(back.consts, consts):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


# ---------------------------------------------------------- @definitions

rule_p = PRIMITIVES.get("test_text_rule_call")
if rule_p is None:
    rule_p = Primitive("test_text_rule_call")
    rule_p.def_abstract_eval(lambda x, **params: x)


def _recursive_rule_program():
    """f's rule jaxpr calls f again (a rule referring to itself), and refers to a second rule."""
    thunks = {}

    def make_rule():
        return trace(lambda x: lax.cos_p.bind(rule_p.bind(x, rule=thunks["f"], other=thunks["g"])), X3)
    thunks["f"] = Thunk(make_rule, name="f_jvp")
    thunks["g"] = Thunk(lambda: trace(lambda x: lax.neg_p.bind(x), X3), name="f_jvp")
    return trace(lambda x: rule_p.bind(x, rule=thunks["f"], other=thunks["g"]), X3)


def test_thunks_print_as_definitions_once_and_recursion_terminates():
    cj = _recursive_rule_program()
    text = str(cj)
    assert text == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = test_text_rule_call[other=@f_jvp rule=@f_jvp_1] a\n"
        "  in (b,) }"
        "\n\n@f_jvp = { lambda ; a:f32[3]. let b:f32[3] = neg a in (b,) }"
        "\n\n@f_jvp_1 = { lambda ; a:f32[3]. let\n"
        "    b:f32[3] = test_text_rule_call[other=@f_jvp rule=@f_jvp_1] a\n"
        "    c:f32[3] = cos b\n"
        "  in (c,) }")
    back = parse(text)
    thunk = back.eqns[0].params["rule"]
    assert isinstance(thunk, Thunk) and not thunk.forced
    inner = thunk()
    assert inner.eqns[0].params["rule"] is thunk        # the cycle, resolved lazily
    assert str(back) == text
    verify(back)
    assert alpha_equivalent(back, cj) and structural_hash(back) == structural_hash(cj)


def test_unforced_thunks_compare_by_identity():
    t = Thunk(lambda: trace(lambda x: x, X3), name="r")
    u = Thunk(lambda: trace(lambda x: x, X3), name="r")
    a = trace(lambda x: rule_p.bind(x, rule=t), X3)
    b = trace(lambda x: rule_p.bind(x, rule=u), X3)
    assert alpha_equivalent(a, trace(lambda x: rule_p.bind(x, rule=t), X3))
    assert not alpha_equivalent(a, b)
    t(), u()
    assert alpha_equivalent(a, b)


class _Traceable:
    """A callable param that can give its jaxpr (like a traced custom_vjp bwd)."""
    name = "bwd"

    def __call__(self, *args):
        return args

    def to_jaxpr(self):
        return trace(lambda x: lax.neg_p.bind(x), X3)


def test_callable_with_to_jaxpr_is_a_definition_and_plain_callable_is_opaque():
    cj = trace(lambda x: rule_p.bind(x, rule=_Traceable()), X3)
    text = str(cj)
    assert "rule=@bwd" in text and "@bwd = { lambda ; a:f32[3]. let b:f32[3] = neg a in (b,) }" in text
    assert isinstance(parse(text).eqns[0].params["rule"], Thunk)

    def user_bwd(res, ct):
        return ct
    opaque = str(trace(lambda x: rule_p.bind(x, rule=user_bwd), X3))
    assert "rule=<" in opaque and "user_bwd" in opaque
    with pytest.raises(ParseError, match="cannot be read back"):
        parse(opaque)


# ---------------------------------------------------------------- errors

def test_parse_error_is_located_with_caret():
    text = "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n    c:f32[3] = mul b zz\n  in (c,) }"
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    assert (e.line, e.column) == (3, 22)
    assert str(e) == ("line 3, column 22: undefined variable 'zz'; expected a variable bound earlier "
                      "in this jaxpr (sub-jaxprs see only their own binders)\n"
                      "    c:f32[3] = mul b zz\n" + " " * 21 + "^")


MALFORMED = sorted(pathlib.Path(__file__).parent.joinpath("malformed").glob("*.jaxpr"))


def test_malformed_corpus_is_not_empty():
    assert len(MALFORMED) >= 15


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_malformed_corpus(path):
    """Each file's first line: ``# expect: LINE:COLUMN message fragment``."""
    text = path.read_text()
    m = re.match(r"# expect: (\d+):(\d+) (.+)\n", text)
    assert m, f"{path.name} lacks its '# expect: L:C fragment' header"
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    assert (e.line, e.column) == (int(m[1]), int(m[2])), str(e)
    assert m[3] in str(e), str(e)
    assert "Traceback" not in str(e) and "lark" not in str(e).lower()
    src, caret = str(e).split("\n")[-2:]     # the offending line, then a caret under the column
    assert src == text.splitlines()[e.line - 1] and caret == " " * (e.column - 1) + "^", str(e)


@pytest.mark.parametrize("text,line,column", [
    ("", 1, 1), ("  \n\n ", 1, 1), ("@undefined", 1, 1), ("(" * 5000, 1, 1),
    ("{ lambda ; a:f32[3]. let b:f32[3] = sin \u03b1 in (b,) }", 1, 41),
    ("{ lambda ; a:f32[3]. let b:f32[3] = sin\x00 a in (b,) }", 1, 40),
    ("{ lambda ; a:f32[3]. let\n b:f32[3] = sin a in (b,)", 2, 26),
], ids=["empty", "blank", "reference_only", "deep_parens", "unicode", "nul", "unterminated"])
def test_hostile_texts_are_located_parse_errors(text, line, column):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert str(info.value).endswith("\n" + " " * (column - 1) + "^")


# ------------------------------------------------------- custom-rule nodes

def _custom_jvp_program():
    """A custom_jvp node whose rule calls the custom function again (a recursive rule)."""
    fun = trace(lambda x: lax.sin_p.bind(x), X3)
    box = {}

    def call(x):
        return prims.custom_jvp_call_jaxpr_p.bind(x, fun_jaxpr=fun, jvp_jaxpr_thunk=box["jvp"],
                                                 num_consts=0, symbolic_zeros=False)[0]

    def jvp_rule():
        return trace(lambda x, t: [call(x), lax.mul_p.bind(lax.cos_p.bind(x), t)], X3, X3)
    box["jvp"] = Thunk(jvp_rule, name="f_jvp")
    return trace(lambda x: lax.reduce_sum_p.bind(call(x), axes=(0,)), X3)


def test_custom_jvp_node_with_recursive_rule_round_trips():
    cj = _custom_jvp_program()
    text = str(cj)
    assert "jvp_jaxpr_thunk=@f_jvp" in text and text.count("@f_jvp = {") == 1
    back = parse(text)
    rule = back.eqns[0].params["jvp_jaxpr_thunk"]
    assert rule().eqns[0].params["jvp_jaxpr_thunk"] is rule
    assert str(back) == text
    verify(back)
    assert alpha_equivalent(back, cj)


def test_custom_vjp_and_custom_lin_round_trip():
    fun = trace(lambda x: lax.sin_p.bind(x), X3)
    fwd = Thunk(lambda: trace(lambda x: [lax.sin_p.bind(x), lax.cos_p.bind(x)], X3), name="f_fwd")
    cj = trace(lambda x: prims.custom_vjp_call_jaxpr_p.bind(
        x, fun_jaxpr=fun, fwd_jaxpr_thunk=fwd, bwd=_Traceable(), num_consts=0,
        out_trees=("PyTreeDef(*)",), symbolic_zeros=False)[0], X3)
    back = assert_round_trip(cj)
    assert isinstance(back.eqns[0].params["bwd"], Thunk)
    lin = trace(lambda r, t: prims.custom_lin_p.bind(r, t, num_res=1, bwd=_Traceable(),
                                                     out_avals=(X3,), symbolic_zeros=False)[0], X3, X3)
    assert "out_avals=(f32[3],)" in str(lin)
    assert_round_trip(lin)
