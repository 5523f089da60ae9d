"""jaxprc.ffi: a C++ XLA FFI handler built with g++, registered and called from programs."""
import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import ffi
from jaxprc.ir.parser import parse

HANDLER = r"""
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;

// y = scale * x + row index (per leading-axis row of a 1-d or 2-d input, so a batched call differs
// from a loop if the batching is wrong)
static ffi::Error ScaleImpl(float scale, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  auto dims = x.dimensions();
  size_t n = x.element_count();
  size_t row = dims.size() == 0 ? n : dims.back();
  for (size_t i = 0; i < n; ++i) y->typed_data()[i] = scale * x.typed_data()[i] + float(i / row);
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Scale, ScaleImpl,
    ffi::Ffi::Bind().Attr<float>("scale").Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());
"""


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++) to build the FFI handler")
    d = tmp_path_factory.mktemp("ffi")
    (d / "handler.cc").write_text(HANDLER)
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{ffi.include_dir()}",
                    str(d / "handler.cc"), "-o", str(d / "handler.so")], check=True, capture_output=True)
    lib = ctypes.cdll.LoadLibrary(str(d / "handler.so"))
    ffi.register_ffi_target("jaxprc_test_scale", ffi.pycapsule(lib.Scale), platform="cpu")
    return "jaxprc_test_scale"


def _expected(x, scale):
    x = np.asarray(x, np.float32)
    rows = np.arange(x.size) // (x.shape[-1] if x.ndim else 1)
    return (scale * x.ravel() + rows).reshape(x.shape).astype(np.float32)


def _call(target, x, vmap_method=None, **attrs):
    return ffi.ffi_call(target, jaxprc.ShapeDtypeStruct(x.shape, np.float32), vmap_method=vmap_method)(x, **attrs)


def test_values_eager_and_jit(target):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    eager = _call(target, x, scale=np.float32(2.5))
    jitted = jaxprc.jit(lambda x: _call(target, x, scale=np.float32(2.5)))(x)
    np.testing.assert_array_equal(eager, _expected(x, 2.5))
    np.testing.assert_array_equal(jitted, eager)


@pytest.mark.parametrize("method", ["sequential", "broadcast_all"])
def test_vmap_methods_match_a_loop(target, method):
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda x: _call(target, x, vmap_method=method, scale=np.float32(3.0))  # noqa: E731
    loop = np.stack([np.asarray(f(x)) for x in xs])
    out = jaxprc.jit(jaxprc.vmap(f))(xs)
    np.testing.assert_array_equal(loop, 3.0 * xs)     # each row alone: row index 0
    if method == "sequential":
        np.testing.assert_array_equal(out, loop)
    else:   # one call over the whole batch: the handler sees a 3x4 input, rows numbered 0..2
        np.testing.assert_array_equal(out, _expected(xs, 3.0))


def test_vmap_without_method_is_jax_error(target):
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        jaxprc.vmap(lambda x: _call(target, x, scale=np.float32(1.0)))(np.ones((2, 3), np.float32))


def test_text_round_trip(target):
    x = np.arange(3, dtype=np.float32)
    p = jaxprc.make_jaxpr(lambda x: _call(target, x, scale=np.float32(0.5)))(x)
    assert "ffi_call" in str(p) and "jaxprc_test_scale" in str(p)
    q = parse(str(p))
    assert str(q) == str(p)
    np.testing.assert_array_equal(jaxprc.core.eval_jaxpr(q.jaxpr, q.consts, x)[0], _expected(x, 0.5))


def test_lowered_custom_call_and_attributes(target):
    f = ffi.ffi_call(target, jaxprc.ShapeDtypeStruct((3,), np.float32))
    text = jaxprc.jit(lambda x: f(x, scale=np.float32(2.0), n=1, s="hi", v=np.arange(2, dtype=np.int32),
                                  t=True)).lower(np.ones(3, np.float32)).as_text()
    assert 'stablehlo.custom_call @jaxprc_test_scale' in text
    assert ('mhlo.backend_config = {n = 1 : i64, s = "hi", scale = 2.000000e+00 : f32, '
            't = true, v = dense<[0, 1]> : tensor<2xi32>}') in text


def test_unregistered_target_is_a_clear_error():
    f = ffi.ffi_call("jaxprc_no_such_target", jaxprc.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(ValueError, match="no FFI target named 'jaxprc_no_such_target'"):
        jaxprc.jit(f)(np.ones(2, np.float32))
    assert float(jnp.sum(jnp.ones(2))) == 2.0     # the process goes on


def test_bad_attribute_value(target):
    with pytest.raises(TypeError, match="attribute 'scale'"):
        _call(target, np.ones(2, np.float32), scale=object())


def test_errors_match_jax(target):
    f = ffi.ffi_call(target, jaxprc.ShapeDtypeStruct((3,), np.float32))
    with pytest.raises(ValueError, match="The FFI call to `jaxprc_test_scale` cannot be differentiated"):
        jaxprc.grad(lambda x: f(x, scale=np.float32(1.0)).sum())(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        ffi.ffi_call(target, jaxprc.ShapeDtypeStruct((3,), np.float32), vmap_method="loop")


def test_side_effect_is_kept(target):
    """A call with side effects whose result is unused stays in the program and its lowering."""
    f = ffi.ffi_call(target, jaxprc.ShapeDtypeStruct((3,), np.float32), has_side_effect=True)
    g = lambda x: (f(x, scale=np.float32(1.0)), x)[1]  # noqa: E731
    x = np.ones(3, np.float32)
    assert "!{io}" in str(jaxprc.make_jaxpr(g)(x))
    text = jaxprc.jit(g).lower(x).as_text()
    assert "custom_call @jaxprc_test_scale" in text and "has_side_effect = true" in text


def test_ffi_lowering_of_a_library_primitive(target):
    """A library's own primitive lowered by ffi_lowering: its params are the handler's attributes."""
    from jaxprc.extend.core import Primitive
    from jaxprc.interpreters import mlir
    scale_p = Primitive("jaxprc_test_scale_prim")
    scale_p.def_abstract_eval(lambda x, **_: x)
    mlir.register_lowering(scale_p, ffi.ffi_lowering(target))
    x = np.arange(4, dtype=np.float32)
    out = jaxprc.jit(lambda x: scale_p.bind(x, scale=np.float32(-2.0)))(x)
    np.testing.assert_array_equal(out, _expected(x, -2.0))


def test_register_ffi_type_id_is_jax_error():
    with pytest.raises(ValueError, match="not supported after jaxlib version 381"):
        ffi.register_ffi_type_id("t", None)


def test_handler_errors_leave_the_process_usable(target):
    """The handler's own checks (attribute type, missing attribute) surface as errors."""
    f = ffi.ffi_call(target, jaxprc.ShapeDtypeStruct((3,), np.float32))
    x = np.ones(3, np.float32)
    with pytest.raises(jaxprc.errors.JaxRuntimeError, match="expected F32 but got F64"):
        f(x, scale=2.0)              # a Python float is an f64 attribute, as in JAX
    with pytest.raises(jaxprc.errors.JaxRuntimeError, match="Wrong number of attributes"):
        f(x)
    np.testing.assert_array_equal(f(x, scale=np.float32(2.0)), 2 * x)
