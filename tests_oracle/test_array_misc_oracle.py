"""Transfer guards, the smaller Array methods and the jit-cache switches, against JAX: the same
transfers raise the same errors, the methods give the same values, dtypes and weak types."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as pjnp

LIBS = {"jax": (jax, jjnp), "jaxprc": (jaxprc, pjnp)}


def _outcome(call):
    try:
        call()
        return None
    except Exception as e:        # noqa: BLE001 - the error is the result compared
        return type(e).__name__, str(e)


def _transfers(lib, jnp):
    f = lib.jit(lambda a: a * 3)
    x = jnp.arange(3.0) * 1
    host = np.ones((2, 3), np.float32)
    return {
        "jit numpy": lambda: f(host),
        "jit python float": lambda: f(1.5),
        "jit python int": lambda: f(2),
        "jit numpy scalar": lambda: f(np.int16(3)),
        "jit device array": lambda: f(x),
        "eager python scalar": lambda: x * 2.0,
        "asarray numpy": lambda: jnp.asarray(host),
        "device_put": lambda: lib.device_put(host),
        "device_put device": lambda: lib.device_put(host, lib.devices()[0]),
        "device_get": lambda: lib.device_get(x),
        "np.asarray": lambda: np.asarray(x),
        "float": lambda: float(x.sum()),
    }


@pytest.mark.parametrize("guard,level", [
    ("transfer_guard", "disallow"), ("transfer_guard", "disallow_explicit"), ("transfer_guard", "log_explicit"),
    ("transfer_guard_host_to_device", "disallow_explicit"), ("transfer_guard_device_to_host", "disallow_explicit")])
def test_same_transfers_raise_the_same_errors(guard, level):
    results = {}
    for name, (lib, jnp) in LIBS.items():
        calls = _transfers(lib, jnp)
        for call in calls.values():       # warm: the C++ dispatch of both runs the calls below
            call(), call()
        with getattr(lib, guard)(level):
            results[name] = {what: _outcome(call) for what, call in calls.items()}
    assert results["jaxprc"] == results["jax"]


def test_config_option_levels_and_errors():
    for lib in (jax, jaxprc):
        with pytest.raises(ValueError) as e:
            lib.config.update("jax_transfer_guard", "sometimes")
        assert "new enum value must be None or in ['allow', 'log', 'disallow', 'log_explicit', " \
               "'disallow_explicit'], got " in str(e.value)
    host = np.ones(2, np.float32)
    try:
        jaxprc.config.update("jax_transfer_guard_host_to_device", "disallow")
        # one state for both libraries (jaxlib's): jax's own transfers are guarded too
        assert _outcome(lambda: jax.jit(lambda a: a + 1)(host)) == \
            _outcome(lambda: jaxprc.jit(lambda a: a + 1)(host))
        assert _outcome(lambda: jaxprc.jit(lambda a: a + 1)(host)) is not None
    finally:
        jaxprc.config.update("jax_transfer_guard_host_to_device", None)


# ------------------------------------------------------------------ Array methods

_VIEW_CASES = [
    ("float32", "int32"), ("float32", "uint8"), ("uint8", "float32"), ("int16", "bfloat16"),
    ("bool", "int8"), ("int8", "bool"), ("complex64", "float32"), ("complex64", "int16"),
    ("float32", "complex64"), ("float16", "int16"), ("int32", "float16"),
]


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got).reshape(-1).view(np.uint8),
                                  np.asarray(want).reshape(-1).view(np.uint8))


@pytest.mark.parametrize("src,dst", _VIEW_CASES)
def test_view(src, dst):
    values = np.array([[0, 1, 2, 3], [4, 5, 6, 7]]) * 37 % 2
    a = values.astype(src) if src != "bool" else values.astype(bool)
    if src == "int8":
        a = (values % 2).astype(np.int8)
    _same(pjnp.asarray(a).view(dst), jjnp.asarray(a).view(dst))


@pytest.mark.parametrize("dtype", ["int32", "float32", "uint16", "int8", "complex64", "bfloat16", "bool"])
def test_byteswap_tobytes(dtype):
    a = (np.arange(6) * 41 + 3).reshape(2, 3).astype(dtype)
    x, y = pjnp.asarray(a), jjnp.asarray(a)
    _same(x.byteswap(), y.byteswap())
    assert x.tobytes() == y.tobytes() and x.tobytes("F") == y.tobytes("F")


def test_weak_scalars():
    _same(pjnp.asarray(1.5).view("int32"), jjnp.asarray(1.5).view("int32"))
    _same(pjnp.asarray(7).byteswap(), jjnp.asarray(7).byteswap())


def test_forwarded_methods():
    a = np.array([[3., 1., 2., 0.], [5., 7., 6., 4.]], np.float32)
    choices = [np.arange(3), np.arange(3) + 10]
    jitted = [     # one program each (their eager forms run many small ones)
        lambda jnp, x: x.argpartition(2, axis=1)[:, 2:3],   # the kth element's index is fixed
        lambda jnp, x: x.compress(x.ravel() > 2, size=6, fill_value=-1),
        lambda jnp, x: jnp.sort(x.ravel()).searchsorted(jnp.array([1., -1., 9.]), side="right"),
    ]
    for case in jitted:
        _same(jaxprc.jit(lambda x: case(pjnp, x))(a), jax.jit(lambda x: case(jjnp, x))(a))
    for case in [lambda jnp: jnp.array([0, 1, 0]).choose(choices),
                 lambda jnp: jnp.array([0, 7, -1]).choose(choices, mode="clip")]:
        _same(case(pjnp), case(jjnp))


def test_raising_names():
    x, y = pjnp.arange(3.0), jjnp.arange(3.0)
    for name in ("flat", "device_buffer", "device_buffers"):
        assert _outcome(lambda: getattr(x, name)) == _outcome(lambda: getattr(y, name))
    assert _outcome(lambda: pjnp.array([0, 2]).choose([x, x])) == _outcome(lambda: jjnp.array([0, 2]).choose([y, y]))
    assert _outcome(lambda: x.view("int32", type=np.ndarray)) == _outcome(lambda: y.view("int32", type=np.ndarray))
    assert _outcome(lambda: x.to_device(None, stream=1)) == _outcome(lambda: y.to_device(None, stream=1))
    assert x.platform() == y.platform()
    assert x.copy_to_host_async() is None and y.copy_to_host_async() is None
    tree = {"a": x, "b": 1}
    assert jaxprc.copy_to_host_async(tree) is tree


def test_tracers_have_jax_tracers_methods():
    names = ["argpartition", "byteswap", "choose", "clone", "compress", "copy_to_host_async", "flat",
             "searchsorted", "to_device", "tobytes", "unsafe_buffer_pointer", "view"]
    seen = {}

    def probe(lib):
        def f(v):
            seen[lib.__name__] = {n: _outcome(lambda: getattr(v, n)) is None for n in names if n != "flat"}
            return v
        return f
    jax.jit(probe(jax))(jjnp.ones(2))
    jaxprc.jit(probe(jaxprc))(pjnp.ones(2))
    assert seen["jaxprc"] == seen["jax"]


# ------------------------------------------------------------------ jit cache switches

def test_no_tracing_and_no_execution():
    for lib, jnp in LIBS.values():
        f = lib.jit(lambda a: a - 1)
        x = jnp.arange(3.0) * 1
        y = x[:2]
        f(x), f(x)
        with lib.no_tracing():
            np.testing.assert_array_equal(f(x), [-1, 0, 1])
            with pytest.raises(RuntimeError, match="re-tracing function <lambda> at .*for `jit`, but 'no_tracing' is set"):
                f(y)
        with lib.no_execution():
            with pytest.raises(RuntimeError, match=r"tried to execute function jit.<lambda>.?, but the no_execution "
                                                   "config option is set"):
                f(x)
        assert not lib.config.jax_no_tracing and not lib.config.jax_no_execution
