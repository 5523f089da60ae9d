"""The small public modules: typing, stages, errors, dlpack, test_util, mesh_utils, compilation_cache,
make_single_device_sharding, optimizers' aliases, monitoring."""
import functools
import types
import typing

import ml_dtypes
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import dlpack, monitoring, stages, test_util
from jaxprc.example_libraries import optimizers
from jaxprc.experimental import mesh_utils
from jaxprc.experimental.compilation_cache import compilation_cache as cc
from multidevice import run_script


# ----------------------------------------------------------------------------- typing

def test_typing_unions_name_what_converts_to_arrays_and_dtypes():
    assert set(typing.get_args(jx.typing.ArrayLike)) == {jx.Array, np.ndarray, np.bool_, np.number, bool, int,
                                                         float, complex}
    assert {str, np.dtype} <= set(typing.get_args(jx.typing.DTypeLike))

    def f(x: jx.typing.ArrayLike, dtype: jx.typing.DTypeLike = None) -> jx.Array:
        return jnp.asarray(x, dtype)
    assert typing.get_type_hints(f)["x"] == jx.typing.ArrayLike
    assert typing.get_args(jx.typing.DTypeLike)[-1].__name__ == "SupportsDType"   # like jnp.float32
    assert jnp.float32.dtype == np.float32


# ----------------------------------------------------------------------------- stages

def _stages_fun(x, n, y=1.0):
    return {"a": jnp.sin(x) * n + y, "b": x.sum()}


F = jx.jit(_stages_fun, static_argnums=1, donate_argnums=0)
X = np.arange(3.0, dtype=np.float32)


def test_jit_is_wrapped_and_its_stages_are_the_public_classes():
    assert isinstance(F, stages.Wrapped) and isinstance(jx.jit(jnp.sin), stages.Wrapped)
    assert not isinstance(_stages_fun, stages.Wrapped)
    traced = F.trace(X, 2, y=3.0)
    lowered = traced.lower()
    compiled = lowered.compile()
    assert isinstance(traced, stages.Traced) and isinstance(lowered, stages.Lowered)
    assert isinstance(compiled, stages.Compiled)
    assert isinstance(F.lower(X, 2, y=3.0), stages.Lowered)
    assert stages.CompilerOptions == dict[str, typing.Union[str, bool]]


def test_stages_describe_the_signature():
    traced = F.trace(X, 2, y=3.0)
    assert traced.fun_name == "_stages_fun" and traced.jaxpr.in_avals[0].shape == (3,)
    for stage in (traced, traced.lower(), traced.lower().compile()):
        (x_info,), kw = stage.args_info
        assert isinstance(x_info, stages.ArgInfo) and x_info.donated and not kw["y"].donated
        assert x_info.shape == (3,) and x_info.dtype == np.float32 and kw["y"].shape == ()
        assert stage.donate_argnums == (0,)
        assert stage.in_tree == jx.tree_util.tree_structure(((X,), {"y": 3.0}))
        assert stage.out_tree == jx.tree_util.tree_structure({"a": 0, "b": 0})
        assert stage.out_info == {"a": jx.ShapeDtypeStruct((3,), np.float32),
                                  "b": jx.ShapeDtypeStruct((), np.float32)}
        assert stage.in_avals[1]["y"].weak_type


def test_traced_runs_and_lowered_speaks_hlo():
    traced = jx.jit(_stages_fun, static_argnums=1).trace(X, 2, y=3.0)
    np.testing.assert_allclose(np.asarray(traced(X, y=3.0)["a"]), np.sin(X) * 2 + 3, rtol=1e-6)
    with pytest.raises(TypeError, match="Function traced with input pytree does not match"):
        traced(X)
    with pytest.raises(ValueError, match="lowering_platforms"):
        traced.lower(lowering_platforms=("tpu",))
    lowered = traced.lower(lowering_platforms=(jx.default_backend(),))
    assert lowered.as_text().startswith("module @jit__stages_fun")
    assert lowered.as_text("hlo").startswith("HloModule jit__stages_fun")
    assert "sine" in lowered.compiler_ir("hlo").as_hlo_text()
    assert lowered.cost_analysis()["transcendentals"] == 3.0
    with pytest.raises(ValueError, match="dialect"):
        lowered.as_text("tosa")
    fast = lowered.compile({"xla_cpu_enable_fast_math": True, "exec_time_optimization_effort": 0.5})
    np.testing.assert_allclose(np.asarray(fast(X, y=3.0)["a"]), np.sin(X) * 2 + 3, rtol=1e-5)
    with pytest.raises(jx.errors.JaxRuntimeError, match="No such compile option: 'no_such_option'"):
        lowered.compile({"no_such_option": 1})
    compiled = lowered.compile()
    assert compiled.runtime_executable() is not None and "sine" in compiled.as_text()
    here = jx.sharding.SingleDeviceSharding(jx.devices()[0])
    assert compiled.input_shardings == ((here,), {"y": here})
    assert compiled.output_shardings == {"a": here, "b": here}
    np.testing.assert_allclose(np.asarray(compiled(X, y=3.0)["b"]), 3.0)


# ----------------------------------------------------------------------------- errors

def test_numpy_conversion_of_a_tracer_raises_tracer_array_conversion_error():
    with pytest.raises(jx.errors.TracerArrayConversionError, match=r"__array__\(\)") as info:
        jx.jit(lambda x: np.asarray(x))(X)
    assert isinstance(info.value, jx.errors.ConcretizationTypeError)      # what jaxprc raised before
    assert isinstance(info.value, jx.errors.JAXTypeError) and isinstance(info.value, TypeError)
    # outside a jit, a transformation on concrete values still reads them (jaxprc's eager tracing)
    assert float(jx.grad(lambda x: float(np.asarray(x)) * x)(2.0)) == 2.0


def test_error_hierarchy():
    e = jx.errors
    assert e.JaxRuntimeError.__module__.startswith("jaxlib") and issubclass(e.JaxRuntimeError, RuntimeError)
    assert issubclass(jx.XlaCompileError, e.JaxRuntimeError) and issubclass(jx.XlaRuntimeError, e.JaxRuntimeError)
    for name in ["ConcretizationTypeError", "TracerArrayConversionError", "TracerBoolConversionError",
                 "TracerIntegerConversionError", "KeyReuseError"]:
        assert issubclass(getattr(e, name), e.JAXTypeError)
    assert issubclass(e.NonConcreteBooleanIndexError, e.JAXIndexError)
    assert issubclass(e.JAXIndexError, IndexError) and issubclass(e.JaxprTypeError, TypeError)
    assert issubclass(e.InconclusiveDimensionOperation, Exception)
    with pytest.raises(e.JAXIndexError, match="boolean indices"):
        jx.jit(lambda x: x[x > 0])(X)


# ----------------------------------------------------------------------------- dlpack

@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.bool_, np.complex64, np.float16])
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)])
def test_dlpack_round_trips_with_numpy(dtype, shape):
    x = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    y = dlpack.from_dlpack(x)
    assert isinstance(y, jx.Array) and y.dtype == dtype and y.shape == shape and not y.weak_type
    back = np.from_dlpack(y)
    np.testing.assert_array_equal(back, x)
    assert not back.flags.writeable          # an export shares the array's memory: numpy may not write


def test_dlpack_narrow_dtypes_and_jaxprc_as_producer():
    a = jnp.arange(4.0).astype(jnp.bfloat16)
    b = dlpack.from_dlpack(a)
    assert b.dtype == ml_dtypes.bfloat16 and np.asarray(b).tolist() == [0, 1, 2, 3]
    assert dlpack.from_dlpack(np.arange(3.0)).dtype == np.float32          # canonical dtypes (x64 off)
    assert jnp.from_dlpack(np.arange(3)).dtype == np.int32
    assert a.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(dlpack.from_dlpack(np.arange(6.0, dtype=np.float32).reshape(2, 3).T),
                                  np.arange(6.0).reshape(2, 3).T)


def test_dlpack_copies_unless_told_not_to():
    for copy in (None, True):
        x = np.arange(64, dtype=np.float32)
        y = dlpack.from_dlpack(x, copy=copy)
        x[:] = -1                           # a later write to the producer never reaches the result
        assert float(y[5]) == 5.0
    x = np.arange(64, dtype=np.float32)
    y = dlpack.from_dlpack(x, copy=False)   # aliasing was asked for (when jaxlib can alias)
    np.testing.assert_array_equal(np.asarray(y * 1), np.arange(64))
    a = jnp.arange(3.0)
    private = np.from_dlpack(a, copy=True)
    np.testing.assert_array_equal(private, [0, 1, 2])
    with pytest.raises(ValueError, match="copy=False"):
        dlpack.from_dlpack(np.arange(3.0), copy=False)       # float64 -> float32 is a copy


def test_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__ and __dlpack_device__"):
        dlpack.from_dlpack([1.0, 2.0])

    class OnTpu:
        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

        def __dlpack_device__(self):
            return (12, 0)
    with pytest.raises(TypeError, match="unsupported device type"):
        dlpack.from_dlpack(OnTpu())
    with pytest.raises(TypeError, match="dtype-like"):
        dlpack.is_supported_dtype(None)
    assert dlpack.is_supported_dtype("bfloat16") and dlpack.is_supported_dtype(jnp.int8)
    assert not dlpack.is_supported_dtype("int4") and not dlpack.is_supported_dtype("float8_e4m3fn")
    a = jnp.arange(3.0)
    with pytest.raises(BufferError, match="dl_device"):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="versions below"):
        a.__dlpack__(max_version=(0, 4))
    a.delete()
    with pytest.raises(jx.runtime.DeletedArrayError):
        a.__dlpack__()


# ----------------------------------------------------------------------------- test_util

def _wrong_sin():
    f = jx.custom_jvp(jnp.sin)
    f.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * jnp.cos(p[0]) * t[0]))
    return f


def test_check_grads_passes_on_correct_derivatives():
    test_util.check_grads(lambda x, y: jnp.sin(x) * y, (np.linspace(-1, 1, 3, dtype=np.float32), 0.7),
                          order=2, modes=("rev",))
    test_util.check_grads(lambda d: jnp.tanh(d["p"]) @ d["q"], ({"p": np.ones((2, 3), np.float32),
                                                                 "q": np.arange(3.0, dtype=np.float32)},),
                          order=1, modes=("lin",))
    test_util.check_jvp(jnp.exp, functools.partial(jx.jvp, jnp.exp), (np.float32(0.5),))
    test_util.check_vjp(jnp.exp, functools.partial(jx.vjp, jnp.exp), (np.float32(0.5),))


@pytest.mark.parametrize("modes", [("fwd",), ("rev",), ("lin",)])
def test_check_grads_fails_on_wrong_derivatives(modes):
    with pytest.raises(AssertionError, match="tangent|cotangent projection"):
        test_util.check_grads(_wrong_sin(), (np.array([0.3, 1.0], np.float32),), order=1, modes=modes)
    # a loose enough tolerance lets it through
    test_util.check_grads(_wrong_sin(), (np.array([0.3, 1.0], np.float32),), order=1, modes=modes,
                          atol=10.0, rtol=10.0)


def test_check_vjp_names_the_projection_and_the_message():
    bad_vjp = lambda x: (jnp.sin(x), lambda ct: (ct,))   # noqa: E731
    with pytest.raises(AssertionError, match="mine cotangent projection"):
        test_util.check_vjp(jnp.sin, bad_vjp, (np.array([0.3, 1.0], np.float32),), err_msg="mine")


# ----------------------------------------------------------------------------- mesh_utils

def _fake_devices(n, slices=1):
    return [types.SimpleNamespace(id=i, process_index=i * slices // n, slice_index=i * slices // n,
                                  device_kind="cpu", platform="cpu") for i in range(n)]


def _ids(mesh):
    return np.vectorize(lambda d: d.id)(mesh).tolist()


def test_create_device_mesh_orders_like_jax_on_cpu():
    devs = _fake_devices(8)
    assert _ids(mesh_utils.create_device_mesh((2, 4), devs)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert _ids(mesh_utils.create_device_mesh([4, 2], devs[::-1])) == [[7, 6], [5, 4], [3, 2], [1, 0]]
    gpus = [types.SimpleNamespace(id=i, device_kind="gpu", platform="gpu") for i in (3, 1, 2, 0)]
    assert _ids(mesh_utils.create_device_mesh((2, 2), gpus)) == [[0, 1], [2, 3]]
    mesh = mesh_utils.create_device_mesh((1,))
    assert mesh.shape == (1,) and mesh[0] == jx.devices()[0]
    assert isinstance(jx.sharding.Mesh(mesh_utils.create_device_mesh((1, 1)), ("a", "b")), jx.sharding.Mesh)
    with pytest.raises(ValueError, match="Number of devices 8 must equal the product of mesh_shape"):
        mesh_utils.create_device_mesh((3, 3), devs)
    with pytest.raises(ValueError, match="sequence of ints"):
        mesh_utils.create_device_mesh(("a",), devs)


def test_device_kind_handlers_are_consulted():
    devs = [types.SimpleNamespace(id=i, device_kind="odd", platform="cpu") for i in range(4)]
    mesh_utils.device_kind_handler_dict["odd"] = lambda shape, d, contiguous_submeshes: (
        np.array(d[::-1], dtype=object).reshape(shape))
    try:
        assert _ids(mesh_utils.create_device_mesh((2, 2), devs)) == [[3, 2], [1, 0]]
    finally:
        del mesh_utils.device_kind_handler_dict["odd"]


def test_create_hybrid_device_mesh():
    devs = _fake_devices(8, slices=2)
    assert _ids(mesh_utils.create_hybrid_device_mesh((2, 2), (2, 1), devs)) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert _ids(mesh_utils.create_hybrid_device_mesh((2, 2, 1), (1, 1, 2), devs)) == [[[0, 4], [1, 5]],
                                                                                      [[2, 6], [3, 7]]]
    assert _ids(mesh_utils.create_hybrid_device_mesh((1, 4), (1, 2), devs, process_is_granule=True)) == [
        list(range(8))]
    with pytest.raises(ValueError, match="slice_index"):
        mesh_utils.create_hybrid_device_mesh((1,), (1,))               # CPU devices have no slices
    assert mesh_utils.create_hybrid_device_mesh((1,), (1,), process_is_granule=True).shape == (1,)
    with pytest.raises(ValueError, match="Number of slices 2 must equal the product of dcn_mesh_shape"):
        mesh_utils.create_hybrid_device_mesh((2, 2), (3, 1), devs)


# ----------------------------------------------------------------------------- small names

def test_make_single_device_sharding_and_optimizer_aliases():
    s = jx.sharding.make_single_device_sharding(jx.devices()[0])
    assert s == jx.sharding.SingleDeviceSharding(jx.devices()[0])
    assert jx.device_put(jnp.ones(2), s).sharding == s
    assert optimizers.Step is int and optimizers.Params is typing.Any
    assert typing.get_args(optimizers.UpdateFn)[0] == [int, typing.Any, optimizers.OptimizerState]
    assert optimizers.InitFn and optimizers.ParamsFn and optimizers.State and optimizers.Updates
    assert optimizers.Array is typing.Any


# ----------------------------------------------------------------------------- monitoring and the cache

@pytest.fixture
def listeners():
    heard = {"event": [], "duration": [], "span": [], "scalar": []}
    fns = [lambda e, **k: heard["event"].append((e, k)),
           lambda e, d, **k: heard["duration"].append((e, d, k)),
           lambda e, s, t, **k: heard["span"].append((e, t - s, k)),
           lambda e, v, **k: heard["scalar"].append((e, v, k))]
    regs = [monitoring.register_event_listener, monitoring.register_event_duration_secs_listener,
            monitoring.register_event_time_span_listener, monitoring.register_scalar_listener]
    unregs = [monitoring.unregister_event_listener, monitoring.unregister_event_duration_listener,
              monitoring.unregister_event_time_span_listener, monitoring.unregister_scalar_listener]
    for reg, fn in zip(regs, fns):
        reg(fn)
    yield heard
    for unreg, fn in zip(unregs, fns):
        unreg(fn)


def test_monitoring_calls_listeners(listeners):
    monitoring.record_event("/my/event", tag="a")
    monitoring.record_event_duration_secs("/my/time", 0.5, n=3)
    monitoring.record_event_time_span("/my/span", 1.0, 3.0)
    monitoring.record_scalar("/my/value", 7)
    assert listeners["event"] == [("/my/event", {"tag": "a"})]
    assert listeners["duration"] == [("/my/time", 0.5, {"n": 3})]
    assert listeners["span"] == [("/my/span", 2.0, {})] and listeners["scalar"] == [("/my/value", 7, {})]
    with pytest.raises(AssertionError, match="not a registered"):
        monitoring.unregister_event_listener(print)


def test_compiles_record_jax_events(listeners):
    jx.jit(lambda x: x * 7.25 - 1)(1.0)
    durations = {e: k for e, _, k in listeners["duration"]}
    assert {"/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
            "/jax/core/compile/backend_compile_duration"} <= set(durations)
    assert durations["/jax/core/compile/backend_compile_duration"] == {"fun_name": "jit(<lambda>)"}
    assert {e for e, _ in listeners["event"]}.isdisjoint({"/jax/compilation_cache/cache_hits"})
    spans = {e for e, _, _ in listeners["span"]}
    assert "/jax/core/compile/backend_compile_duration" in spans


def test_compilation_cache_switches_and_events(tmp_path, listeners):
    before = jx.config.jaxprc_compilation_cache_dir
    try:
        cc.set_cache_dir(tmp_path)
        cc.reset_cache()            # the next compile reports whether the process uses the cache
        assert jx.config.jaxprc_compilation_cache_dir == tmp_path
        for _ in range(2):          # the second compile of the same program comes from the directory
            jx.jit(lambda x: x * 3.5 + 0.25)(1.0)
        events = [e for e, _ in listeners["event"]]
        assert events == ["/jax/compilation_cache/tasks_using_cache",
                          "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_misses",
                          "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_hits"]
        assert any(e == "/jax/compilation_cache/cache_retrieval_time_sec" for e, _, _ in listeners["duration"])
        assert len(list(tmp_path.iterdir())) == 1
        cc.reset_cache()
        assert not jx.runtime.compile_cache.stats
        cc.set_cache_dir(None)
        listeners["event"].clear()
        for scale in (0.75, 1.75):      # reported once per process (or reset)
            jx.jit(lambda x: x * 3.5 + scale)(1.0)
        assert [e for e, _ in listeners["event"]] == ["/jax/compilation_cache/task_disabled_cache"]
    finally:
        jx.config.update("jaxprc_compilation_cache_dir", before)


def test_clear_event_listeners_removes_every_kind():
    heard = []
    monitoring.register_event_listener(lambda e, **k: heard.append(e))
    monitoring.register_scalar_listener(lambda e, v, **k: heard.append(e))
    monitoring.clear_event_listeners()
    monitoring.record_event("/x")
    monitoring.record_scalar("/y", 1)
    assert heard == []


def test_checks_on_4_cpu_devices():
    run_script("api_surface_checks.py", devices=4)
