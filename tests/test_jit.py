"""jit, make_jaxpr, eval_shape, jaxpr_as_fun and eager execution, end to end through XLA."""
import numpy as np
import pytest

import jaxprc as jx
from jaxprc.engine import dispatch
from jaxprc import lax, runtime
from jaxprc.ir import PRIMITIVES, Primitive, ShapedArray
from jaxprc.engine.lowering import register_lowering


@pytest.fixture
def counters(monkeypatch):
    """Counts lowerings and XLA compilations made while the test runs."""
    counts = {"lower": 0, "compile": 0}
    real_lower, real_compile = dispatch.lower_jaxpr, runtime.compile

    def lower(*a, **k):
        counts["lower"] += 1
        return real_lower(*a, **k)

    def compile_(*a, **k):
        counts["compile"] += 1
        return real_compile(*a, **k)

    monkeypatch.setattr(dispatch, "lower_jaxpr", lower)
    monkeypatch.setattr(runtime, "compile", compile_)
    return counts


def _entries(f) -> int:
    """Entries of ``jit(f)``'s Python cache (one per traced signature; jaxlib's C++ cache, which
    ``_cache_size`` counts as in JAX, keys numpy and device arguments apart)."""
    return getattr(f, "_jit", f)._cache_size()


def _affine(a, b):
    return lax.add(lax.mul(a, b), 1.0)


def _x(n=4, dtype=np.float32):
    return np.arange(n, dtype=dtype) - 1.5


# ---------------------------------------------------------------- caching

def test_second_call_neither_traces_nor_lowers_nor_compiles(counters):
    traces = []

    def f(a, b):
        traces.append(1)
        return _affine(a, b)

    jf = jx.jit(f)
    a, b = jx.device_put(_x()), jx.device_put(np.full(4, 2, np.float32))
    first = jf(a, b)
    assert (len(traces), counters["lower"], counters["compile"]) == (1, 1, 1)
    for _ in range(3):
        again = jf(a, b)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(first))
    np.testing.assert_array_equal(np.asarray(first), _x() * 2 + 1)
    # numpy inputs of the same type share the entry
    jf(_x(), np.full(4, 2, np.float32))
    assert (len(traces), counters["lower"], counters["compile"], _entries(jf)) == (1, 1, 1, 1)


def test_jit_of_the_same_function_again_shares_the_cache(counters):
    traces = []

    def f(a):
        traces.append(1)
        return a * 2.

    for _ in range(3):                 # `jit(f)(x)` in a loop compiles once, as in JAX
        np.testing.assert_array_equal(np.asarray(jx.jit(f)(_x())), _x() * 2)
    assert (len(traces), counters["compile"]) == (1, 1)
    jx.jit(f, static_argnums=0)(3.)    # other options: caches of their own
    assert len(traces) == 2
    jx.jit(lambda a: f(a))(_x())       # another function
    assert len(traces) == 3


def test_cache_keys_on_shape_dtype_weak_type_and_structure(counters):
    traces = []

    def f(a, b):
        traces.append(1)
        return a * b + 1.0          # operators promote the Python scalar (lax.add would refuse f16 + 1.0)

    jf = jx.jit(f)
    jf(_x(), _x())
    jf(_x(5), _x(5))                                 # new shape
    jf(_x().astype(np.float16), _x().astype(np.float16))  # new dtype
    s1 = jf(np.float32(2), np.float32(3))            # strong scalars
    s2 = jf(2.0, 3.0)                                 # weak scalars: a new entry
    assert not s1.weak_type and s2.weak_type and float(s2) == 7.0
    jf(2.0, 3.0)
    assert len(traces) == counters["compile"] == _entries(jf) == 5

    g = jx.jit(lambda t: lax.add(t[0], t[1]))
    g((_x(), _x()))
    g([_x(), _x()])                                   # tuple vs list: new structure
    assert _entries(g) == 2


def test_x64_flag_is_part_of_the_key():
    jf = jx.jit(lambda a: lax.mul(a, 2.0))
    assert jf(1.0).dtype == np.float32
    jx.config.update("jax_enable_x64", True)
    try:
        assert jf(1.0).dtype == np.float64
    finally:
        jx.config.update("jax_enable_x64", False)
    assert jf(1.0).dtype == np.float32


def test_device_put_inside_jit_is_the_identity():
    jf = jx.jit(lambda a: lax.mul(jx.device_put(a), 2.0))
    np.testing.assert_array_equal(np.asarray(jf(_x())), 2 * _x())


def test_pytree_inputs_and_outputs():
    @jx.jit
    def f(params, x):
        return {"y": lax.add(lax.mul(params["w"], x), params["b"]), "pair": (x, params["b"])}

    params = {"w": np.float32(3), "b": np.float32(1)}
    out = f(params, np.float32(2))
    assert set(out) == {"y", "pair"} and float(out["y"]) == 7.0
    assert isinstance(out["pair"], tuple) and float(out["pair"][1]) == 1.0


# ------------------------------------------------------------ static args

def test_static_argnums_and_argnames(counters):
    traces = []

    def f(x, n, *, scale=1.0):
        traces.append((n, scale))
        for _ in range(n):        # Python control flow on a static value
            x = lax.mul(x, scale)
        return x

    jf = jx.jit(f, static_argnums=1, static_argnames="scale")
    assert float(jf(np.float32(2), 3, scale=2.0)) == 16.0
    assert float(jf(np.float32(3), 3, scale=2.0)) == 24.0
    assert float(jf(np.float32(2), 1, scale=2.0)) == 4.0
    assert traces == [(3, 2.0), (1, 2.0)]
    assert float(jf(np.float32(2), n=1, scale=2.0)) == 4.0   # static by name too (a new entry, as in JAX)
    assert float(jf(np.float32(2), 1, scale=3.0)) == 6.0
    assert len(traces) == 4


def test_static_argnames_resolve_to_positions():
    jf = jx.jit(lambda x, axis: lax.reduce_sum(x, (axis,)), static_argnames="axis")
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(jf(m, 1)), m.sum(1))
    np.testing.assert_array_equal(np.asarray(jf(m, axis=0)), m.sum(0))


def test_traced_value_in_python_control_flow_is_a_clear_error():
    def f(x):
        return x if lax.gt(x, 0.0) else lax.neg(x)

    with pytest.raises(jx.ConcretizationTypeError, match="static_argnums"):
        jx.jit(f)(1.0)
    with pytest.raises(jx.errors.TracerBoolConversionError):      # JAX's jax.errors names
        jx.vmap(f)(np.ones(2, np.float32))
    with pytest.raises(jx.errors.TracerIntegerConversionError):
        jx.jit(lambda x, i: [x, x][i])(np.ones(2, np.float32), 1)
    with pytest.raises(jx.errors.ConcretizationTypeError, match=r"try using `x.astype\(int\)`"):   # as JAX
        jx.jit(lambda x, i: x[int(i)])(np.ones(2, np.float32), 1)
    assert issubclass(jx.errors.NonConcreteBooleanIndexError, jx.errors.ConcretizationTypeError)


def test_unhashable_static_argument():
    jf = jx.jit(lambda x, cfg: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static"):
        jf(1.0, [1, 2])


# --------------------------------------------------------------- donation

def _takes_a_mode(x, mode, *rest, scale=None):
    return x


@pytest.mark.parametrize("call,where,value,fixes", [
    (lambda t: t(_takes_a_mode)(1.0, "fast"), "'mode' (args[1])", "'fast' of type str",
     "static_argnums=1 or static_argnames='mode'"),
    (lambda t: t(_takes_a_mode)(1.0, 2.0, 3.0, ["a", None]), "args[3][0]", "'a' of type str",
     "static_argnums=3"),
    (lambda t: t(_takes_a_mode)(1.0, 2.0, scale={"s": "x"}), "'scale' (kwargs['scale']['s'])",
     "'x' of type str", "static_argnames='scale'"),
])
@pytest.mark.parametrize("transform", [jx.jit, jx.make_jaxpr, lambda f: jx.jit(lambda *a, **k: f(*a, **k))])
def test_non_array_argument_error_names_argument_line_value_and_fixes(transform, call, where, value, fixes):
    with pytest.raises(TypeError) as e:
        call(transform)
    message = str(e.value)
    assert f"called at {__file__}:{call.__code__.co_firstlineno}:" in message
    assert value in message and "is not a valid JAX type" in message and "pass an array" in message
    if transform in (jx.jit, jx.make_jaxpr):    # the wrapper's own parameters have other names
        assert f"Argument {where} of '_takes_a_mode'" in message and fixes in message


def test_non_array_argument_error_on_a_warm_jit_and_inside_a_trace():
    jf = jx.jit(_takes_a_mode)
    jf(1.0, 2.0)                                      # a cached signature: the fast path runs first
    with pytest.raises(TypeError, match=r"Argument 'mode' \(args\[1\]\) of '_takes_a_mode'"):
        jf(1.0, "fast")
    with pytest.raises(TypeError, match=r"Argument 'mode' \(args\[1\]\) of '_takes_a_mode'"):
        jx.make_jaxpr(lambda x: jf(x, "fast"))(1.0)
    np.testing.assert_array_equal(jx.jit(_takes_a_mode, static_argnames="mode")(1.0, "fast"), 1.0)


def test_donate_argnums_deletes_the_donated_input():
    jf = jx.jit(lambda a, b: lax.add(a, b), donate_argnums=0)
    a, b = jx.device_put(_x(256)), jx.device_put(_x(256))
    out = jf(a, b)
    np.testing.assert_array_equal(np.asarray(out), 2 * _x(256))
    assert a.is_deleted() and not b.is_deleted()
    with pytest.raises(runtime.DeletedArrayError):
        np.asarray(a)
    with pytest.raises(runtime.DeletedArrayError, match="argument 0 of 'jit_<lambda>'.*donated"):
        jf(a, b)
    lowered = jf.lower(_x(256), _x(256))
    assert "tf.aliasing_output" in lowered.as_text() or "buffer_donor" in lowered.as_text()


def test_a_copy_made_with_jnp_array_outlives_the_donated_original():
    a = jx.device_put(_x(256))
    copy, view = jx.numpy.array(a), jx.numpy.asarray(a)      # copy=True by default, as in JAX
    jx.jit(lambda a: a * 2, donate_argnums=0)(a)
    assert view.is_deleted() and not copy.is_deleted()
    np.testing.assert_array_equal(np.asarray(copy), _x(256))
    assert "copy" in str(jx.make_jaxpr(jx.numpy.array)(1.0))
    assert "copy" not in str(jx.make_jaxpr(lambda x: jx.numpy.array(x, copy=False))(1.0))


def test_a_donated_input_no_output_can_reuse_warns_and_stays_alive():
    jf = jx.jit(lambda a: a.sum(), donate_argnums=0)
    a = jx.device_put(_x())
    with pytest.warns(UserWarning, match=r"donated buffers were not usable: f32\[4\]"):
        jf(a)
    np.testing.assert_array_equal(np.asarray(a), _x())


# ------------------------------------------------------------- nested jit

def test_nested_jit_is_a_call_in_the_outer_jaxpr():
    inner = jx.jit(lambda a: lax.reduce_sum(lax.sin(a), (0,)))

    def outer(a):
        return lax.mul(inner(a), 2.0)

    cj = jx.make_jaxpr(outer)(_x())
    assert [e.primitive.name for e in cj.eqns] == ["jit", "mul"]
    sub = cj.eqns[0].params["jaxpr"]
    assert [e.primitive.name for e in sub.eqns] == ["sin", "reduce_sum"]
    expected = 2 * np.sin(_x()).sum()
    np.testing.assert_allclose(float(jx.jit(outer)(_x())), expected, rtol=1e-6)
    np.testing.assert_allclose(float(outer(_x())), expected, rtol=1e-6)   # eager: inner runs jit
    assert "func.call" in jx.jit(outer).lower(_x()).as_text() or "call @" in jx.jit(outer).lower(_x()).as_text()


def test_eager_binding_of_the_jit_primitive_runs_its_jaxpr(counters):
    cj = jx.make_jaxpr(lambda a: jx.jit(lambda b: lax.exp(b))(a))(_x())
    run = jx.jaxpr_as_fun(cj)
    np.testing.assert_allclose(np.asarray(run(_x())[0]), np.exp(_x()), rtol=1e-6)
    compiles = counters["compile"]
    run(_x())
    assert counters["compile"] == compiles            # the jit equation's executable is cached


def test_nested_jit_closing_over_an_outer_tracer():
    def outer(a, b):
        return jx.jit(lambda c: lax.mul(c, b))(a)

    np.testing.assert_array_equal(np.asarray(jx.jit(outer)(_x(), _x())), _x() * _x())


def test_jit_of_a_function_with_large_and_small_constants():
    big = np.linspace(0, 1, 1000, dtype=np.float32)
    small = np.array([1, 2, 3], np.float32)
    jf = jx.jit(lambda x: (lax.add(x, big), lax.mul(lax.slice(x, (0,), (3,)), small)))
    x = np.ones(1000, np.float32)
    y, z = jf(x)
    np.testing.assert_array_equal(np.asarray(y), x + big)
    np.testing.assert_array_equal(np.asarray(z), small)
    text = jf.lower(x).as_text()
    assert "dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>" in text  # small: a constant
    assert text.count("tensor<1000xf32>") >= 1


# ------------------------------------------------------------ AOT: lower

def test_lower_as_text_and_compile():
    lowered = jx.jit(_affine).lower(_x(), _x())
    text = lowered.as_text()
    assert text.startswith("module @jit__affine") and "func.func public @main" in text
    assert "stablehlo.multiply" in text and "loc(" not in text
    assert "test_jit.py" in lowered.as_text(debug_info=True)
    compiled = lowered.compile()
    hlo = compiled.as_text()
    assert hlo.startswith("HloModule jit__affine") and "multiply" in hlo
    np.testing.assert_array_equal(np.asarray(compiled(_x(), _x())), _x() * _x() + 1)
    with pytest.raises(TypeError, match="(?m)Argument 'a' compiled with float32.4. and called with float32.5.\n"
                                        "Argument 'b' compiled with float32.4. and called with float32.5.$"):
        compiled(_x(5), _x(5))


def test_compiled_takes_the_lowered_non_static_arguments_in_their_structure():
    f = jx.jit(lambda x, n, y=1.: x * n + y, static_argnums=1)
    compiled = f.lower(_x(), 2, y=3.).compile()
    np.testing.assert_array_equal(np.asarray(compiled(_x(), y=3.)), _x() * 2 + 3)
    for args, kwargs in [((_x(), 2), dict(y=3.)), (((_x(),),), dict(y=3.)), ((_x(),), {})]:
        with pytest.raises(TypeError, match="Function compiled with input pytree does not match the input pytree"):
            compiled(*args, **kwargs)


def test_lower_accepts_shape_dtype_structs():
    spec = jx.ShapeDtypeStruct((2, 3), np.float32)
    text = jx.jit(lambda a: lax.sin(a)).lower(spec).as_text()
    assert "tensor<2x3xf32>" in text and "stablehlo.sine" in text


# ----------------------------------------------------------------- errors

def test_xla_compile_error_names_the_function_and_process_stays_usable():
    broken_p = Primitive("test_jit_broken_custom_call")
    broken_p.def_abstract_eval(lambda x: x)

    def lowering(ctx, x):
        from jaxlib.mlir.dialects import stablehlo as hlo
        return hlo.CustomCallOp([x.type], [x], call_target_name="no_such_kernel").results

    register_lowering(broken_p, lowering)
    try:
        def uses_broken(a):
            return broken_p.bind(a)

        with pytest.raises(jx.XlaCompileError, match="jit_uses_broken.*no_such_kernel"):
            jx.jit(uses_broken)(_x())
        assert float(jx.jit(lambda a: lax.reduce_sum(a, (0,)))(np.ones(3, np.float32))) == 3.0
    finally:
        PRIMITIVES.pop("test_jit_broken_custom_call", None)


def test_user_primitive_without_impl_still_raises_not_implemented():
    p = Primitive("test_jit_no_impl")
    p.def_abstract_eval(lambda x: x)
    try:
        with pytest.raises(NotImplementedError, match="test_jit_no_impl"):
            p.bind(np.ones(2, np.float32))
    finally:
        PRIMITIVES.pop("test_jit_no_impl", None)


# ------------------------------------------------------ eager == jit

PROGRAMS = {
    "affine": (lambda a, b: _affine(a, b), 2),
    "transcendental": (lambda a, b: lax.add(lax.exp(lax.sin(a)), lax.tanh(b)), 2),
    "reduce": (lambda a, b: lax.reduce_sum(lax.mul(a, b), (0,)), 2),
    "compare_select": (lambda a, b: lax.select(lax.gt(a, b), a, b), 2),
    "convert": (lambda a, b: lax.convert_element_type(lax.mul(a, b), np.int32), 2),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eager_equals_jit(name):
    fun, nargs = PROGRAMS[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(5).astype(np.float32) for _ in range(nargs)]
    eager = fun(*[jx.device_put(a) for a in args])
    jitted = jx.jit(fun)(*args)
    assert isinstance(eager, jx.Array) and isinstance(jitted, jx.Array)
    assert (eager.dtype, eager.shape, eager.weak_type) == (jitted.dtype, jitted.shape, jitted.weak_type)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-6, atol=1e-6)


def test_eager_execution_caches_one_executable_per_signature(counters):
    host = np.arange(21, dtype=np.float32).reshape(3, 1, 7)   # a shape no other test uses
    a = jx.device_put(host)
    before = counters["compile"]
    lax.cosh(a)
    out = lax.cosh(a)
    lax.cosh(host)
    assert counters["compile"] == before + 1
    np.testing.assert_allclose(np.asarray(out), np.cosh(host), rtol=1e-6)
    lax.cosh(host.reshape(7, 1, 3))
    assert counters["compile"] == before + 2


def test_eager_weak_types_and_x64_canonicalisation():
    w = lax.mul(jx.device_put(2.0), jx.device_put(3.0))
    assert w.weak_type and w.dtype == np.float32 and float(w) == 6.0
    r = lax.add(np.float64(1.5), np.float64(2.0))
    assert r.dtype == np.float32 and not r.weak_type


# ----------------------------------------------------- make_jaxpr & friends

def test_make_jaxpr_with_pytrees_shape_structs_and_static_args():
    def f(p, x, n):
        return {"out": lax.mul(lax.add(p["a"], x), float(n))}

    spec = jx.ShapeDtypeStruct((3,), np.float32)
    cj, shape = jx.make_jaxpr(f, static_argnums=2, return_shape=True)({"a": spec}, spec, 4)
    assert [a.str_short() for a in cj.in_avals] == ["f32[3]", "f32[3]"]
    assert [e.primitive.name for e in cj.eqns][0] == "add"
    assert shape == {"out": jx.ShapeDtypeStruct((3,), np.float32)}
    assert "4.0" in str(cj)


def test_make_jaxpr_captures_array_constants():
    const = np.arange(3, dtype=np.float32)
    cj = jx.make_jaxpr(lambda x: lax.add(x, const))(np.ones(3, np.float32))
    assert len(cj.consts) == 1 and len(cj.jaxpr.constvars) == 1
    np.testing.assert_array_equal(np.asarray(jx.jaxpr_as_fun(cj)(np.ones(3, np.float32))[0]), const + 1)


def test_eval_shape_runs_nothing(counters):
    out = jx.eval_shape(lambda a, b: (lax.dot_general(a, b, (((1,), (0,)), ((), ()))), 1.0),
                        jx.ShapeDtypeStruct((2, 3), np.float32), np.zeros((3, 5), np.float32))
    assert out == (jx.ShapeDtypeStruct((2, 5), np.float32), jx.ShapeDtypeStruct((), np.float32, True))
    assert counters == {"lower": 0, "compile": 0}


def test_jaxpr_as_fun_runs_eagerly_and_under_jit():
    cj = jx.make_jaxpr(_affine)(_x(), _x())
    fun = jx.jaxpr_as_fun(cj)
    eager = fun(_x(), _x())[0]
    jitted = jx.jit(fun)(_x(), _x())[0]
    np.testing.assert_array_equal(np.asarray(eager), _x() * _x() + 1)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))
    assert str(jx.make_jaxpr(fun)(_x(), _x())) == str(cj)


def test_shaped_aval_of_arrays():
    a = jx.device_put(1.0)
    assert jx.ir.get_aval(a) == ShapedArray((), np.float32, weak_type=True)
