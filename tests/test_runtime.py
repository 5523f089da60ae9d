"""The runtime on its own: transfers, dtypes, Array behaviour, executables from hand-written StableHLO."""
import ml_dtypes
import numpy as np
import pytest

import jaxprc as jx
from jaxprc import runtime as rt

ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64]

MUL_AND_FLAG = """func.func public @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<i1>) {
  %0 = stablehlo.multiply %x, %y : tensor<3xf32>
  %t = stablehlo.constant dense<true> : tensor<i1>
  return %0, %t : tensor<3xf32>, tensor<i1> }"""

DOUBLE_1K = """func.func public @main(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = stablehlo.add %x, %x : tensor<1024xf32>
  return %0 : tensor<1024xf32> }"""


@pytest.fixture(scope="module")
def mul_and_flag():
    return rt.compile(MUL_AND_FLAG, name="mul_and_flag")


@pytest.fixture
def x64():
    jx.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jx.config.update("jax_enable_x64", False)


def _sample(dtype, shape=(2, 3)):
    values = np.arange(-3, 3).reshape(shape)
    if np.dtype(dtype) == np.bool_:
        return values > 0
    if np.issubdtype(np.dtype(dtype), np.unsignedinteger):
        values = values + 3
    return (values * 1.5 if np.dtype(dtype).kind in "fcV" else values).astype(dtype)


# ----------------------------------------------------------------- client

def test_devices_and_backend():
    assert rt.default_backend() == jx.default_backend() == "cpu"
    devs = jx.devices()
    assert len(devs) >= 1 and devs[0].platform == "cpu"
    assert jx.device_put(1.0).device == devs[0]


def test_platform_selection_errors_are_clear():
    from jaxprc.runtime import client
    with pytest.raises(ValueError, match="JAXPRC_PLATFORM='tpu'"):
        client._make_backend("tpu")
    if client.find_cuda_plugin() is None:
        with pytest.raises(RuntimeError, match="no CUDA PJRT plugin"):
            client._make_backend("cuda")


@pytest.mark.skipif(rt.default_backend() != "gpu", reason="needs a GPU and a CUDA PJRT plugin")
def test_gpu_round_trip_and_bf16():
    for dtype in (np.float32, ml_dtypes.bfloat16, np.bool_):
        np.testing.assert_array_equal(np.asarray(rt.device_put(_sample(dtype))), _sample(dtype))


# ---------------------------------------------------------------- transfers

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_runtime_round_trip_keeps_every_dtype(dtype):
    host = _sample(dtype)
    a = rt.device_put(host)
    assert a.shape == (2, 3) and a.dtype == np.dtype(dtype) and a.ndim == 2 and a.size == 6
    back = np.asarray(a)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, host)


@pytest.mark.parametrize("dtype,canonical", [(np.float64, np.float32), (np.int64, np.int32),
                                             (np.uint64, np.uint32), (np.float16, np.float16),
                                             (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
                                             (np.int8, np.int8), (np.bool_, np.bool_)],
                         ids=lambda d: np.dtype(d).name)
def test_device_put_canonicalises_without_x64(dtype, canonical):
    a = jx.device_put(_sample(dtype))
    assert a.dtype == np.dtype(canonical)
    np.testing.assert_array_equal(np.asarray(a), _sample(dtype).astype(canonical))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64], ids=lambda d: np.dtype(d).name)
def test_device_put_keeps_64_bit_with_x64(x64, dtype):
    host = _sample(dtype)
    a = jx.device_put(host)
    assert a.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(a), host)


def test_python_scalars_are_weakly_typed(x64):
    jx.config.update("jax_enable_x64", False)
    assert (jx.device_put(1.5).dtype, jx.device_put(1.5).weak_type) == (np.float32, True)
    assert (jx.device_put(7).dtype, jx.device_put(7).weak_type) == (np.int32, True)
    assert (jx.device_put(True).dtype, jx.device_put(True).weak_type) == (np.bool_, False)
    assert jx.device_put(np.float32(1)).weak_type is False
    jx.config.update("jax_enable_x64", True)
    assert (jx.device_put(1.5).dtype, jx.device_put(1.5).weak_type) == (np.float64, True)


def _aligned(n, offset_bytes=0):
    raw = np.empty(n * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    return raw[start:start + n * 4].view(np.float32)


@pytest.mark.parametrize("offset", [0, 4], ids=["aligned", "unaligned"])
def test_device_never_sees_later_host_writes(offset):
    # A zero-copy transfer would alias (aligned) or copy asynchronously (unaligned): both race.
    for _ in range(50):
        host = _aligned(1000, offset)
        host[:] = 1.0
        a = jx.device_put(host)
        host[0] = 42.0
        assert np.asarray(a)[0] == 1.0


def test_host_view_is_read_only_and_non_contiguous_input_works():
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = jx.device_put(host.T)
    np.testing.assert_array_equal(np.asarray(a), host.T)
    with pytest.raises(ValueError):
        np.asarray(a)[0, 0] = 5.0
    assert np.array(a, copy=True).flags.writeable


def test_array_scalar_conversions():
    a = jx.device_put(np.float32(2.5))
    assert float(a) == 2.5 and a.item() == 2.5 and bool(a) and int(a) == 2
    assert jx.device_put(np.arange(3, dtype=np.int32)).tolist() == [0, 1, 2]
    assert len(jx.device_put(np.zeros((4, 2)))) == 4
    assert [1, 2, 3][jx.device_put(np.int32(1))] == 2
    with pytest.raises(TypeError):
        len(jx.device_put(1.0))
    with pytest.raises(TypeError):
        hash(jx.device_put(1.0))


# ------------------------------------------------------------------- repr

@pytest.mark.parametrize("value,text", [
    (np.arange(3, dtype=np.float32), "Array([0., 1., 2.], dtype=float32)"),
    (np.array([1, 2], np.int32), "Array([1, 2], dtype=int32)"),
    (np.array([True, False]), "Array([ True, False], dtype=bool)"),
    (np.zeros((0, 3), np.float32), "Array([], shape=(0, 3), dtype=float32)"),
    (np.array([[1.5, -2]], ml_dtypes.bfloat16), "Array([[1.5, -2]], dtype=bfloat16)"),
    (np.float16(0.5), "Array(0.5, dtype=float16)"),
])
def test_repr_matches_jax_format(value, text):
    assert repr(jx.device_put(value)) == text


def test_repr_of_weak_scalar_and_long_array():
    assert repr(jx.device_put(1.0)) == "Array(1., dtype=float32, weak_type=True)"
    text = repr(jx.device_put(np.arange(40, dtype=np.float32)))
    assert text.startswith("Array([ 0.,  1.,") and text.endswith("39.], dtype=float32)")
    assert "\n      " in text   # continuation lines indented under the bracket


# ------------------------------------------------------------ executables

def test_executable_runs_on_arrays_and_host_values(mul_and_flag):
    x = np.array([1, 2, 3], np.float32)
    prod, flag = mul_and_flag(jx.device_put(x), x)
    assert isinstance(prod, jx.Array) and isinstance(flag, jx.Array)
    np.testing.assert_array_equal(np.asarray(prod), x * x)
    assert flag.dtype == np.bool_ and flag.shape == () and bool(flag)
    assert [a.shape for a in mul_and_flag.out_avals] == [(3,), ()]


def test_executable_text_and_memory_stats(mul_and_flag):
    text = mul_and_flag.as_text()
    assert text.startswith("HloModule") and "multiply" in text
    stats = mul_and_flag.memory_analysis()
    assert stats.argument_size_in_bytes == 24


def test_executable_from_module_and_bytecode():
    import io
    from jaxlib.mlir import ir
    from jaxprc.runtime.executable import _parse
    module = _parse(DOUBLE_1K)
    buf = io.BytesIO()
    with module.context:
        module.operation.write_bytecode(buf)
    x = np.arange(1024, dtype=np.float32)
    for payload in (module, buf.getvalue()):
        exe = rt.compile(payload, out_avals=[rt.Aval.get((1024,), np.float32)])
        np.testing.assert_array_equal(np.asarray(exe(x)[0]), 2 * x)
    assert isinstance(module, ir.Module)


def test_runtime_bf16_results_come_back_exactly():
    exe = rt.compile("""func.func public @main(%x: tensor<4xbf16>) -> tensor<4xbf16> {
      %0 = stablehlo.multiply %x, %x : tensor<4xbf16>
      return %0 : tensor<4xbf16> }""")
    x = np.array([0.5, -1.5, 3, 1e10], ml_dtypes.bfloat16)
    out = np.asarray(exe(x)[0])
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out, x * x)


def test_donation_reuses_the_buffer_and_deletes_the_input():
    exe = rt.compile(DOUBLE_1K, donated_args=(0,))
    assert exe.memory_analysis().alias_size_in_bytes == 4096
    a = rt.device_put(np.ones(1024, np.float32))
    (out,) = exe(a)
    assert a.is_deleted()
    np.testing.assert_array_equal(np.asarray(out), 2)
    with pytest.raises(rt.DeletedArrayError, match="donated"):
        np.asarray(a)
    with pytest.raises(rt.DeletedArrayError, match="donated"):
        exe(a)
    assert "<deleted>" in repr(a)


# ------------------------------------------------------------------ errors

def test_compile_error_names_the_function_and_process_stays_usable(mul_and_flag):
    bad = """func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.custom_call @no_such_target(%x) : (tensor<3xf32>) -> tensor<3xf32>
      return %0 : tensor<3xf32> }"""
    with pytest.raises(rt.XlaCompileError, match="'my_kernel'.*no_such_target"):
        rt.compile(bad, name="my_kernel")
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.asarray(mul_and_flag(x, x)[0]), x)


def test_run_error_names_the_function(mul_and_flag):
    with pytest.raises(rt.XlaRuntimeError, match="'mul_and_flag'"):
        mul_and_flag(np.ones(4, np.float32), np.ones(3, np.float32))
    assert np.asarray(mul_and_flag(np.ones(3, np.float32), np.ones(3, np.float32))[0]).sum() == 3


def test_module_without_main_is_rejected():
    with pytest.raises(rt.XlaCompileError, match="main"):
        rt.compile("func.func public @other(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }")


def test_block_until_ready_returns_its_argument():
    a = jx.device_put(np.ones(3, np.float32))
    assert a.block_until_ready() is a
    tree = {"a": a, "b": [a, 1]}
    assert jx.block_until_ready(tree) is tree


def test_array_python_protocols_as_in_jax():
    import copy
    import pickle
    import jaxprc.numpy as jnp
    x = jnp.array([1.5, 2.5])
    r = round(x[1])
    assert r.dtype == np.int32 and int(r) == 2            # round half to even, integer result
    assert round(x[0], 1).dtype == np.float32
    assert x.itemsize == 4 and jnp.ones(2, jnp.bfloat16).itemsize == 2
    for clone in (x.copy(), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert type(clone) is type(x) and clone.dtype == x.dtype
        np.testing.assert_array_equal(np.asarray(clone), [1.5, 2.5])
    weak = pickle.loads(pickle.dumps(jnp.asarray(2.0) * 1))
    assert weak.weak_type == (jnp.asarray(2.0) * 1).weak_type
    with pytest.raises(TypeError, match=r"immutable.*x.at\[idx\].set\(y\)"):
        x[0] = 1.
