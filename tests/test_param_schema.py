"""Param schemas (jaxprc.ir.params): every built-in primitive declares its params' kinds, and the
verifier (so the parser) rejects a param of the wrong kind before any typing rule, pass or
lowering sees it."""
from __future__ import annotations

import inspect
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.experimental import checkify
from jaxprc import lax
from jaxprc.ad_checkpoint import checkpoint_name
from jaxprc.ir import ClosedJaxpr, JaxprTypeError, ParseError, parse, pp_jaxpr, verify
from jaxprc.ir.core import Primitive, ShapedArray
from jaxprc.ir.params import Int, OneOf, ParamError, Tuple, check_params, required_params

ROOT = pathlib.Path(__file__).resolve().parent.parent
F32 = np.float32


def builtin_primitives() -> list[Primitive]:
    return [getattr(lax, n) for n in sorted(dir(lax))
            if n.endswith("_p") and isinstance(getattr(lax, n), Primitive)]


def test_every_builtin_primitive_has_a_schema():
    prims = builtin_primitives()
    assert len(prims) > 100
    assert [p.name for p in prims if p.param_schema is None] == []


def test_schema_names_the_params_of_the_typing_rule():
    """Where the typing rule names its params (keyword-only, no ``**params``), the schema names
    exactly those; the others are covered by the corpus below."""
    checked = 0
    for prim in builtin_primitives():
        sig = inspect.signature(prim.abstract_eval_rule)
        kinds = [p.kind for p in sig.parameters.values()]
        if inspect.Parameter.VAR_KEYWORD in kinds:
            continue
        named = {n for n, p in sig.parameters.items() if p.kind == inspect.Parameter.KEYWORD_ONLY}
        assert set(prim.param_schema) == named, prim.name
        checked += 1
    assert checked > 30


# ------------------------------------------------------------------ corpus
# One small program per primitive that has params, the primitive at top level.

def _custom_jvp():
    @jx.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
    return f


def _custom_vjp():
    @jx.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (f(x), jnp.cos(x)), lambda r, g: (r * g,))
    return f


def _gather_scatter(x):
    i = jnp.array([0, 2])
    return (x[i], x.at[i].set(1.0), x.at[i].add(1.0), x.at[i].mul(2.0), x.at[i].min(0.0),
            x.at[i].max(0.0))


CORPUS = {
    "elementwise": (lambda x: (lax.round(x), lax.integer_pow(x, 3), lax.convert_element_type(x, np.int32),
                               lax.bitcast_convert_type(x, np.int32)), [(3,)]),
    "shapes": (lambda x: (lax.broadcast_in_dim(x, (2, 3), (1,)), lax.reshape(x, (3, 1)),
                          lax.transpose(x[None], (1, 0)), lax.squeeze(x[None], (0,)), lax.rev(x, (0,)),
                          lax.pad(x, 0.0, ((1, 1, 0),)), lax.concatenate([x, x], 0),
                          lax.iota(np.int32, 3)), [(3,)]),
    "reductions": (lambda x: (lax.reduce_sum(x, (0,)), lax.reduce_prod(x, (0,)), lax.reduce_max(x, (0,)),
                              lax.reduce_min(x, (0,)), jnp.all(x > 0), jnp.any(x > 0),
                              lax.reduce_xor(x > 0, (0,)), jnp.argmax(x), jnp.argmin(x)), [(3,)]),
    "cumulative": (lambda x: (lax.cumsum(x), lax.cumprod(x), lax.cummax(x), lax.cummin(x),
                              lax.cumlogsumexp(x)), [(3,)]),
    "sort_dot_slice": (lambda x: (lax.sort(x), lax.dot_general(x, x, (((0,), (0,)), ((), ()))),
                                  lax.slice(x, (0,), (2,), (1,)), lax.dynamic_slice(x, (1,), (2,)),
                                  lax.dynamic_update_slice(x, x[:1], (1,))), [(3,)]),
    "gather_scatter": (_gather_scatter, [(3,)]),
    "check": (lambda x: checkify.debug_check(x[0] > 0, "{} and {y}", x, y=x[1]), [(3,)]),
    "control_flow": (lambda x: (lax.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x[0]),
                                lax.scan(lambda c, a: (c + a, c), x[0], x),
                                lax.cond(x[0] > 0, jnp.sin, jnp.cos, x)), [(3,)]),
    "calls": (lambda x: (jx.jit(jnp.sin)(x), checkpoint_name(x, "h"),
                         jx.checkpoint(jnp.sin)(x)), [(3,)]),
    "remat_grad": (jx.grad(jx.checkpoint(jnp.sin)), [()]),      # a differentiated checkpoint
    "custom_jvp": (lambda x: _custom_jvp()(x), [(3,)]),
    "custom_vjp": (lambda x: _custom_vjp()(x), [(3,)]),
    "custom_lin": (lambda x, t: jx.jvp(_custom_vjp(), (x,), (t,)), [(3,), (3,)]),
    "callbacks": (lambda x: (jx.debug.print("{}", x),
                             jx.pure_callback(np.sin, jx.ShapeDtypeStruct((3,), F32), x),
                             jx.experimental.io_callback(np.cos, jx.ShapeDtypeStruct((3,), F32), x))[1:],
                  [(3,)]),
    "fft": (lambda x: lax.fft(x, lax.FftType.RFFT, (3,)), [(3,)]),
    # traced only (lowering needs a registered handler: tests/test_ffi.py builds one)
    "ffi_call": (lambda x: (jx.ffi.ffi_call("corpus_target", jx.ShapeDtypeStruct((3,), F32), has_side_effect=True,
                                            vmap_method="sequential", input_layouts=[(0,)], output_layouts=(0,),
                                            input_output_aliases={0: 0}, custom_call_api_version=1,
                                            legacy_backend_config="cfg")(x),
                            jx.ffi.ffi_call("corpus_target", jx.ShapeDtypeStruct((3,), F32))(
                                x, scale=np.float32(2.0), n=3, name="s")), [(3,)]),
    "solves": (lambda x: (lax.custom_linear_solve(lambda v: 2.0 * v, x, lambda mv, v: v / 2.0, symmetric=True),
                          lax.custom_root(lambda v: v - x, x, lambda f, v: x, lambda g, y: y)), [(3,)]),
    "top_k_numerics_rng": (lambda x: (lax.top_k(x, 2), lax.reduce_precision(x, 5, 10),
                                      lax.rng_bit_generator(jnp.zeros(4, np.uint32), (2,)),
                                      lax.rng_uniform(x[0], x[1], (2,)),
                                      lax.reduce(x, 1.0, lambda a, b: a * b + b, (0,)),
                                      lax.composite(lambda v, *, k: v * k, "my.scale")(x, k=2)), [(3,)]),
    "linalg": (lambda a: (lax.linalg.triangular_solve(a, a, left_side=True), lax.linalg.qr(a),
                          lax.linalg.eigh(a), lax.linalg.svd(a), lax.linalg.eig(a), lax.linalg.schur(a),
                          lax.linalg.tridiagonal_solve(a[0], a[1], a[2], a),
                          lax.linalg.lu_pivots_to_permutation(lax.convert_element_type(a[0], np.int32), 3)),
               [(3, 3)]),
    "conv_windowed": (lambda x, w: (lax.conv(x, w, (1, 1), "SAME"),
                                    jx.grad(lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2),
                                                                                (1, 1, 1, 1), "SAME") ** 2))(x),
                                    lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "VALID"),
                                    lax.reduce_window(x, jnp.inf, lax.min, (1, 1, 2, 2), (1, 1, 1, 1), "VALID"),
                                    lax.reduce_window(x, 1.0, lax.mul, (1, 1, 2, 2), (1, 1, 1, 1), "VALID"),
                                    jx.jvp(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2),
                                                                       (1, 1, 1, 1), "SAME"), (x,), (x,))[1]),
                      [(1, 2, 3, 3), (2, 2, 2, 2)]),
    # the collectives bound directly (their builders need a shard_map around them)
    "parallel": (lambda x: (jx.shard_map(lambda a: a * 2, mesh=jx.make_mesh((1,), ("i",)), in_specs=jx.P("i"),
                                         out_specs=jx.P("i"))(x),
                            *[p.bind(x, axes=("i",)) for p in (lax.psum_p, lax.pmax_p, lax.pmin_p)],
                            lax.all_gather_p.bind(x, axes=("i",), axis_size=1, all_gather_dimension=0, tiled=True),
                            lax.ppermute_p.bind(x, axes=("i",), perm=((0, 0),)), lax.axis_index_p.bind(axis_name="i"),
                            lax.psum_scatter_p.bind(x, axes=("i",), axis_size=1, scatter_dimension=0, tiled=True),
                            lax.all_to_all_p.bind(x, axes=("i",), axis_size=1, split_axis=0, concat_axis=0),
                            lax.pbroadcast_p.bind(x, axes=("i",), source=0), lax.pvary_p.bind(x, axes=("i",)),
                            lax.all_to_all_p.bind(x, axes=("i",), axis_size=1, split_axis=0, concat_axis=0,
                                                  axis_index_groups=((0,),)),
                            lax.ragged_all_to_all_p.bind(x, x, *[jnp.zeros(1, np.int32)] * 4, axes=("i",),
                                                         axis_index_groups=((0,),))),
                 [(3,)]),
    "sharding": (lambda x: jx.lax.with_sharding_constraint(x, _one_device_sharding()), [(3,)]),
    "dimensions": (lambda x: x * lax.dimensions.dim_as_value_p.bind(dim=3), [(3,)]),
    "exported_call": (lambda x: lax.exported_call.call_exported_p.bind(x, exported=_sin_exported()), [(3,)]),
    "random_gamma": (lambda x: jx.random.random_gamma_p.bind(jnp.zeros((2,), np.uint32), x, log_space=True), [(3,)]),
    "random_gamma_rbg": (lambda x: jx.random.random_gamma_p.bind(jnp.zeros((4,), np.uint32), x, log_space=False,
                                                                 impl="rbg"), [(3,)]),
    "accuracy": (lambda x: [f(x, accuracy=lax.Tolerance(atol=1e-3, ulps=2) if i % 2 else lax.AccuracyMode.HIGHEST)
                            for i, f in enumerate((lax.exp, lax.exp2, lax.log, lax.log1p, lax.expm1, lax.tanh,
                                                   lax.logistic, lax.sin, lax.cos, lax.tan, lax.sqrt, lax.rsqrt,
                                                   lax.cbrt))], [(3,)]),
    "host_local": (lambda x: _host_local_round_trip(x), [(3,)]),
    "custom_batching": (lambda x: _custom_batching(x), [(3,)]),
}


def _custom_batching(x):
    from jaxprc.custom_batching import sequential_vmap
    from jaxprc.custom_derivatives import linear_call
    return sequential_vmap(jnp.sin)(x), linear_call(lambda r, v: v * r, lambda r, ct: ct * r, x, x)


def _host_local_round_trip(x):
    from jaxprc.experimental import multihost_utils as mh
    mesh = jx.make_mesh((1,), ("x",))
    return mh.global_array_to_host_local_array(mh.host_local_array_to_global_array(x, mesh, jx.P("x")),
                                               mesh, jx.P())


def _sin_exported():
    exp = jx.export.export(jx.jit(jnp.sin))(jx.ShapeDtypeStruct((3,), F32))
    return jx.export.deserialize(exp.serialize())


def _one_device_sharding():
    from jaxprc.sharding import NamedSharding, PartitionSpec
    return NamedSharding(jx.make_mesh((1,), ("x",), axis_types=(jx.sharding.AxisType.Auto,)), PartitionSpec("x"))


def _trace(key) -> ClosedJaxpr:
    fun, shapes = CORPUS[key]
    return jx.make_jaxpr(fun)(*[jx.ShapeDtypeStruct(s, F32) for s in shapes])


@pytest.fixture(scope="module")
def corpus() -> dict[str, ClosedJaxpr]:
    return {key: _trace(key) for key in CORPUS}


def test_corpus_covers_every_primitive_with_params(corpus):
    seen = {e.primitive.name for cj in corpus.values() for e in cj.eqns}
    with_params = {p.name for p in builtin_primitives() if p.param_schema}
    assert with_params - seen == set()


def test_corpus_params_are_exactly_the_schema(corpus):
    for cj in corpus.values():
        verify(cj)
        for eqn in cj.eqns:      # (optional params, such as exp's accuracy, may be left out)
            schema = eqn.primitive.param_schema
            assert required_params(schema) <= set(eqn.params) <= set(schema), eqn.primitive.name
    given = {(e.primitive.name, p) for cj in corpus.values() for e in cj.eqns for p in e.params}
    every = {(p.name, n) for p in builtin_primitives() for n in (p.param_schema or ())}
    assert every - given == set()       # every param, optional ones included, appears somewhere


def _wrong_kind(checker):
    """A value of the wrong kind for ``checker``: a float, or a string where a float fits."""
    for value in (2.5, "bogus"):
        if checker.problem(value) is not None:
            return value
    raise AssertionError(f"no wrong value for {checker}")


def _mutations(corpus):
    for key, cj in corpus.items():
        for k, eqn in enumerate(cj.eqns):
            for name, checker in sorted(eqn.primitive.param_schema.items()):
                yield key, k, eqn.primitive.name, name, _wrong_kind(checker)


def _with_params(cj: ClosedJaxpr, k: int, params: dict) -> ClosedJaxpr:
    eqns = list(cj.eqns)
    eqns[k] = eqns[k].replace(params=params)
    j = cj.jaxpr
    return ClosedJaxpr(type(j)(j.constvars, j.invars, j.outvars, eqns), cj.consts)


def _mutated(cj: ClosedJaxpr, k: int, name: str, value) -> ClosedJaxpr:
    return _with_params(cj, k, {**cj.eqns[k].params, name: value})


def _round_trips(cj) -> bool:
    try:
        parse(pp_jaxpr(cj))
    except ParseError:       # opaque callables (custom_vjp's bwd) have no text form
        return False
    return True


def test_wrong_kind_params_are_rejected_by_verify_and_parse(corpus):
    parsed_cases = 0
    for key, k, prim, name, bad in _mutations(corpus):
        program = _mutated(corpus[key], k, name, bad)
        with pytest.raises(JaxprTypeError) as info:
            verify(program)
        assert f"primitive '{prim}'" in str(info.value) and f"param {name}=" in str(info.value)
        if not _round_trips(corpus[key]):
            continue
        text = pp_jaxpr(program)
        with pytest.raises(ParseError) as info:
            parse(text)
        e = info.value
        assert f"{prim}: param {name}=" in str(e), str(e)
        line = text.splitlines()[e.line - 1]
        assert line[e.column - 1:].startswith(f"{name}="), str(e)    # located at the param
        parsed_cases += 1
    assert parsed_cases > 80


def test_missing_and_unexpected_params_are_named():
    program = _trace("cumulative")
    assert program.eqns[0].primitive.name == "cumsum"
    with pytest.raises(JaxprTypeError, match="cumsum lacks param.*'reverse'"):
        verify(_with_params(program, 0, {"axis": 0}))
    with pytest.raises(ParseError, match="cumsum got unexpected param.*'axes'") as info:
        parse("{ lambda ; a:f32[3]. let b:f32[3] = cumsum[axes=0 axis=0 reverse=False] a in (b,) }")
    assert info.value.column == 44       # at "axes"


# ------------------------------------------------------------------ checkers

@pytest.mark.parametrize("value", [0.0, True, np.bool_(True), 2 ** 63, -2 ** 63 - 1, "1", None, float("inf")])
def test_int_is_a_real_int64(value):
    assert Int().problem(value) is not None


@pytest.mark.parametrize("value", [0, -1, 2 ** 63 - 1, -2 ** 63, np.int64(5), np.uint8(3)])
def test_int_accepts_ints(value):
    assert Int().problem(value) is None


def test_nested_checkers_say_where():
    checker = Tuple(Int(min=0))
    assert checker.problem((1, -1)) == "item 1 (-1) is out of range [0, 2**63 - 1]"
    assert checker.problem([1]) == "not a tuple"
    assert OneOf(None, checker).problem(None) is None


def test_user_primitive_without_schema_is_unchecked():
    prim = Primitive("test_param_schema_free")
    prim.def_abstract_eval(lambda x, **params: x)
    check_params(prim, {"anything": object()})
    prim.def_params(k=Int(min=1))
    with pytest.raises(ParamError, match=r"test_param_schema_free: param k=0: out of range \[1,"):
        check_params(prim, {"k": 0})


# -------------------------------------------------- hostile programs, CLI

HOSTILE = ["dot_general_precision_int", "dot_general_precision_type", "reduce_sum_float_axis",
           "slice_infinite_stride", "integer_pow_infinite", "cumsum_float_axis", "scan_huge_length"]


def test_hostile_programs_fail_cleanly_on_the_command_line():
    """`jaxprc check` and `jaxprc lower` on each: non-zero exit, one located message, no
    traceback, no crash (these used to abort in LLVM or raise raw errors in lowering)."""
    procs = {}
    for stem in HOSTILE:
        path = str(ROOT / "tests" / "malformed" / f"{stem}.jaxpr")
        for command in ("check", "lower"):
            procs[stem, command] = subprocess.Popen(
                [sys.executable, "-m", "jaxprc", command, path], cwd=ROOT, text=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for (stem, command), p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 1, (stem, command, p.returncode, err)
        assert "Traceback" not in err and err.startswith("jaxprc "), err
        assert f"{stem}.jaxpr: line " in err and "param " in err, err
