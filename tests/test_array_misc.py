"""Transfer guards, copy_to_host_async, the smaller Array methods, and the jit-cache switches
(no_tracing, no_execution, explain_cache_misses)."""
import logging
import sys
import threading

import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.errors import ConcretizationTypeError
from jaxprc.runtime import JaxRuntimeError

H2D = "Disallowed host-to-device transfer"


def _fresh(n=3):
    return jnp.arange(float(n))


# ------------------------------------------------------------------ transfer guards

_scale = jaxprc.jit(lambda a: a * 3)


def _implicit_transfers():
    """Calls that move host data to the device implicitly (as JAX counts them)."""
    x = _fresh()
    return {
        "jit numpy": lambda: _scale(np.ones(3, np.float32)),
        "jit python scalar": lambda: _scale(2.0),
        "jit numpy scalar": lambda: _scale(np.float32(2)),
        "eager python scalar": lambda: x + 1,
        "eager numpy": lambda: jnp.add(x, np.ones(3, np.float32)),
        "asarray numpy": lambda: jnp.asarray(np.ones(3)),
    }


@pytest.mark.parametrize("cpp_warm", [False, True])
def test_implicit_host_to_device_disallowed(cpp_warm):
    calls = _implicit_transfers()
    if cpp_warm:        # twice: the second call runs in jaxlib's C++ dispatch, which transfers itself
        for call in calls.values():
            call(), call()
    x = _fresh()
    with jaxprc.transfer_guard("disallow"):
        for name, call in calls.items():
            with pytest.raises(JaxRuntimeError, match=H2D):
                call()
        np.testing.assert_array_equal(_scale(x), [0, 3, 6])     # device arrays move nothing
    for call in calls.values():       # the guard is gone with the block
        call()


def test_message_names_type_and_sharding():
    with jaxprc.transfer_guard_host_to_device("disallow"), pytest.raises(JaxRuntimeError) as e:
        _scale(np.ones((2, 3), np.float32))
    assert "aval=ShapedArray(float32[2,3]), dst_sharding=SingleDeviceSharding(device=" in str(e.value)
    with jaxprc.transfer_guard("disallow"), pytest.raises(JaxRuntimeError) as e:
        _scale(1)
    assert "aval=ShapedArray(int32[], weak_type=True)" in str(e.value)


def test_explicit_transfers():
    host = np.arange(3, dtype=np.float32)
    x = _fresh()
    for level in ("disallow", "log", "log_explicit"):
        with jaxprc.transfer_guard(level):
            np.testing.assert_array_equal(jaxprc.device_put(host), host)
            np.testing.assert_array_equal(jaxprc.device_put(host, jaxprc.devices()[0]), host)
            np.testing.assert_array_equal(jaxprc.device_get(x), [0, 1, 2])
    with jaxprc.transfer_guard("disallow_explicit"):
        with pytest.raises(JaxRuntimeError, match=H2D):
            jaxprc.device_put(host)
        with pytest.raises(JaxRuntimeError, match=H2D):
            _scale(host)
        # CPU device memory is host memory: reading it transfers nothing (JAX's too)
        np.testing.assert_array_equal(jaxprc.device_get(x), [0, 1, 2])
        np.testing.assert_array_equal(np.asarray(x), [0, 1, 2])


def test_directions_and_nesting():
    host = np.ones(3, np.float32)
    with jaxprc.transfer_guard_device_to_host("disallow"), jaxprc.transfer_guard_device_to_device("disallow"):
        _scale(host)                                    # host-to-device is still allowed
    with jaxprc.transfer_guard_host_to_device("disallow"):
        with jaxprc.transfer_guard_host_to_device("allow"):
            _scale(host)
        with pytest.raises(JaxRuntimeError):
            _scale(host)
    with pytest.raises(RuntimeError):
        with jaxprc.transfer_guard("disallow"):
            raise RuntimeError("leaving the block by an exception restores the level")
    _scale(host)


def test_config_options_are_global_and_thread_local_wins():
    host = np.ones(3, np.float32)
    try:
        jaxprc.config.update("jax_transfer_guard", "disallow")
        assert jaxprc.config.jax_transfer_guard_host_to_device == "disallow"
        with pytest.raises(JaxRuntimeError, match=H2D):
            _scale(host)
        with jaxprc.transfer_guard("allow"):
            _scale(host)
        errors = []

        def other_thread():
            try:
                _scale(host)
            except JaxRuntimeError as e:
                errors.append(e)
        t = threading.Thread(target=other_thread)
        t.start(), t.join()
        assert len(errors) == 1          # the global level holds in every thread
    finally:
        jaxprc.config.update("jax_transfer_guard", None)
    _scale(host)


def test_context_manager_is_thread_local():
    host = np.ones(3, np.float32)
    done = []
    with jaxprc.transfer_guard("disallow"):
        t = threading.Thread(target=lambda: done.append(_scale(host)))
        t.start(), t.join()
    assert len(done) == 1


def test_log_levels_log_and_let_pass():
    with jaxprc.transfer_guard("log"):
        _scale(np.ones(3, np.float32))
    with jaxprc.transfer_guard("log_explicit"):
        jaxprc.device_put(np.ones(3, np.float32))


@pytest.mark.parametrize("bad", ["nope", "ALLOW", 1])
def test_invalid_levels(bad):
    with pytest.raises(ValueError, match="new enum value must be None or in"):
        jaxprc.config.update("jax_transfer_guard_host_to_device", bad)
    assert jaxprc.config.jax_transfer_guard_host_to_device is None
    with pytest.raises(ValueError, match="new enum value must be None or in"):
        with jaxprc.transfer_guard(bad):
            pass


# ------------------------------------------------------------------ copy_to_host_async

def test_copy_to_host_async():
    x = _fresh(4) * 2
    assert x.copy_to_host_async() is None
    np.testing.assert_array_equal(np.asarray(x), [0, 2, 4, 6])
    tree = {"a": x, "b": [1, "s", np.ones(2)]}
    assert jaxprc.copy_to_host_async(tree) is tree
    y = _fresh()
    y.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        y.copy_to_host_async()


# ------------------------------------------------------------------ Array methods

def test_forwarding_methods_match_numpy():
    a = np.array([[3., 1., 2., 0.], [5., 7., 6., 4.]], np.float32)
    x = jnp.asarray(a)
    parts = np.asarray(x.argpartition(1, axis=1))
    assert np.all(np.take_along_axis(a, parts, 1)[:, :1] <= np.take_along_axis(a, parts, 1)[:, 1:2])
    assert parts.dtype == np.int32
    # one program each (their eager forms run many small ones)
    np.testing.assert_array_equal(jaxprc.jit(lambda v: v.compress(np.array([False, True]), axis=0))(x),
                                  a.compress([False, True], axis=0))
    np.testing.assert_array_equal(jaxprc.jit(lambda v: jnp.sort(v.ravel()).searchsorted(v[0], side="right"))(x),
                                  np.searchsorted(np.sort(a.ravel()), a[0], side="right"))
    idx = jnp.array([0, 2, 1])
    choices = [np.arange(3), np.arange(3) + 10, np.arange(3) + 20]
    np.testing.assert_array_equal(idx.choose(choices), np.choose([0, 2, 1], choices))
    np.testing.assert_array_equal(jnp.array([0, 5, -1]).choose(choices, mode="clip"),
                                  np.choose([0, 5, -1], choices, mode="clip"))
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        jnp.array([0, 3, 1]).choose(choices)
    with pytest.raises(ConcretizationTypeError, match="mode='raise'"):
        jaxprc.jit(lambda i: i.choose(choices))(idx)
    np.testing.assert_array_equal(jaxprc.jit(lambda i: i.choose(choices, mode="wrap"))(idx + 3),
                                  np.choose([0, 2, 1], choices))


_VIEWS = [  # (source values, source dtype, target dtype)
    ([1.5, -2.0, 0.0, np.inf], np.float32, np.int32),
    ([1.5, -2.0, 0.0, np.nan], np.float32, np.uint8),
    ([1, 2, 3, 255, 0, 7, 8, 9], np.uint8, np.int16),
    ([1, 2, 3, 4], np.int16, np.float16),
    ([1, 0, 1, 1], np.int8, np.bool_),
    ([True, False, True, True], np.bool_, np.int16),
    ([1 + 2j, -3.5j], np.complex64, np.float32),
    ([1 + 2j, -3.5j], np.complex64, np.int16),
    ([1., 2., 3., -4.], np.float32, np.complex64),
    ([7, -8], np.int32, np.float32),
]


@pytest.mark.parametrize("values,src,dst", _VIEWS, ids=lambda v: getattr(v, "__name__", None))
def test_view_matches_numpy(values, src, dst):
    a = np.array(values, src)
    got = jnp.asarray(a).view(dst)
    want = a.view(dst)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


def test_view_edges():
    x = jnp.array([1., 2., 3.])
    assert x.view() is x and x.view(np.float32) is x
    np.testing.assert_array_equal(jnp.float32(1.0).view(np.int32), np.float32(1.0).view(np.int32))
    with pytest.raises(ValueError, match="0d array"):
        jnp.float32(1.0).view(np.int8)
    with pytest.raises(ValueError, match="divisor"):
        x.view(np.complex64)
    with pytest.raises(NotImplementedError, match="type"):
        x.view(np.int32, type=np.ndarray)
    assert jnp.zeros((2, 0), np.int16).view(np.int8).shape == (2, 0)
    traced = jaxprc.jit(lambda v: v.view(np.int32))(x)
    np.testing.assert_array_equal(traced, np.asarray(x).view(np.int32))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint16, np.int8, np.complex64, np.bool_])
def test_byteswap_and_tobytes(dtype):
    a = (np.arange(4) * 37 + 1).astype(dtype)
    x = jnp.asarray(a)
    np.testing.assert_array_equal(np.asarray(x.byteswap()).view(np.uint8), a.byteswap().view(np.uint8))
    assert x.byteswap().dtype == dtype
    np.testing.assert_array_equal(x.byteswap().byteswap(), a)
    assert x.tobytes() == a.tobytes()
    assert x.reshape(2, 2).tobytes("F") == a.reshape(2, 2).tobytes("F")


def test_buffer_methods():
    x = _fresh(4) + 1
    c = x.clone()
    np.testing.assert_array_equal(c, x)
    assert c.dtype == x.dtype and c.weak_type == x.weak_type
    assert c is not x and c.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()   # one buffer, as in JAX
    assert c.platform() == jaxprc.default_backend()
    if jaxprc.default_backend() == "cpu":        # numpy views CPU device memory in place
        assert np.asarray(c).ctypes.data == c.unsafe_buffer_pointer()
    moved = c.to_device(jaxprc.devices()[0])
    np.testing.assert_array_equal(moved, c)
    with pytest.raises(NotImplementedError, match="stream"):
        c.to_device(jaxprc.devices()[0], stream=1)
    x.delete()
    assert c.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        x.clone()
    with pytest.raises(RuntimeError, match="deleted"):
        x.unsafe_buffer_pointer()
    assert "jax" not in sys.modules       # jaxlib's C++ imports jax for some of these: blocked


def test_names_jax_keeps_only_to_raise():
    x = _fresh()
    with pytest.raises(NotImplementedError, match="arr.flatten"):
        x.flat
    with pytest.raises(AttributeError, match="addressable_data"):
        x.device_buffer
    with pytest.raises(AttributeError, match="addressable_shards"):
        x.device_buffers


def test_tracer_methods():
    def f(v):
        if isinstance(v, jaxprc.core.Tracer):
            with pytest.raises(ConcretizationTypeError, match="tobytes"):
                v.tobytes()
            with pytest.raises(ConcretizationTypeError, match="unsafe_buffer_pointer"):
                v.unsafe_buffer_pointer()
            with pytest.raises(NotImplementedError):
                v.flat
            assert not hasattr(v, "clone") and not hasattr(v, "copy_to_host_async")
        return (v.byteswap(), v.to_device(jaxprc.devices()[0]), v.compress(v > 1, size=2),
                v.sort().searchsorted(1.5), v.argpartition(0)[0])
    a = np.array([2., 0., 3.], np.float32)
    want = (a.byteswap(), a, [2., 3.], 1, 1)
    for got, w in zip(jaxprc.jit(f)(jnp.asarray(a)), want):
        np.testing.assert_array_equal(got, w)


# ------------------------------------------------------------------ jit cache switches

def test_no_tracing():
    def g(a):
        return a * 2
    f = jaxprc.jit(g)
    x, y = _fresh(), _fresh(5)
    z = jnp.zeros((2, 3, 5, 7), jnp.float16)   # a type no other test takes sin of (eager caches are per process)
    f(x), f(x), x + x
    with jaxprc.no_tracing():
        np.testing.assert_array_equal(f(x), [0, 2, 4])     # cached: C++, then Python
        with pytest.raises(RuntimeError, match=r"re-tracing function g at .*test_array_misc.py:\d+ for `jit`, "
                                               "but 'no_tracing' is set"):
            f(y)
        x + x                                               # an eager op already built
        with pytest.raises(RuntimeError, match="re-tracing function sin"):
            jnp.sin(z)
        jaxprc.make_jaxpr(g)(y)                             # not a jit trace (as in JAX)
        with pytest.raises(RuntimeError, match="no_tracing"):
            f.lower(y)
        with pytest.raises(RuntimeError, match="no_tracing"):
            jaxprc.eval_shape(g, y)
    assert not jaxprc.config.jax_no_tracing
    f(y)


def test_no_execution():
    f = jaxprc.jit(lambda a: a - 1)
    x = _fresh()
    f(x), f(x)                       # the second call set up the C++ fast path
    with jaxprc.no_execution():
        with pytest.raises(RuntimeError, match="tried to execute function jit_<lambda>, but the no_execution"):
            f(x)
        with pytest.raises(RuntimeError, match="no_execution"):
            x * x
        with pytest.raises(RuntimeError, match="no_execution"):
            jaxprc.jit(lambda a: a + 7)(x)
        jaxprc.make_jaxpr(f)(x)      # tracing and lowering run nothing
        f.lower(x).compile()
    np.testing.assert_array_equal(f(x), [-1, 0, 1])


def test_explain_cache_misses(caplog):
    def g(a, b, *, c=1):
        return a + b * c
    f = jaxprc.jit(g, static_argnames="c")
    x = _fresh()
    with caplog.at_level(logging.WARNING, logger="jaxprc"), jaxprc.explain_cache_misses():
        f(x, x, c=2)
        f(x, x, c=2)                              # a hit: nothing logged
        f(x, jnp.ones(3, np.int32), c=2)
        f(x, x, c=3)
        f(x, b=x, c=2)
    messages = [r.getMessage() for r in caplog.records if r.name == "jaxprc"]
    assert len(messages) == 4
    assert all(m.startswith("TRACING CACHE MISS at ") and "test_array_misc.py" in m for m in messages)
    assert "never seen function" in messages[0] and f"g id={id(g)} defined at" in messages[0]
    assert "different input types:\n  * at b, now i32[3] and before f32[3]" in messages[1]
    assert "static arguments differ: now c=3 and before c=2" in messages[2]
    assert "different input pytree structure" in messages[3]
    caplog.clear()
    f(x, x, c=5)
    assert not [r for r in caplog.records if r.name == "jaxprc"]


# ------------------------------------------------------------------ tracer-leak checking

_LEAKED = []


def test_checking_leaks():
    def leaky(x):
        _LEAKED.append(x * 2)
        return x + 1
    x = _fresh()
    with jaxprc.checking_leaks():
        for transform in (jaxprc.jit, jaxprc.grad):
            with pytest.raises(Exception, match=r"Leaked trace \w+Trace\. Leaked tracer\(s\):\n\n\w+Tracer\(.*\), created "
                                                r"on line .*test_array_misc.py:\d+, while tracing .*\n<\w+Tracer \d+> is referred to by "
                                                r"<list (\d+)>\[0\]\n<list \1> is referred to by .*test_array_misc._LEAKED"):
                transform(lambda v: leaky(v).sum())(x)
            _LEAKED.clear()
        # no false alarms: nested traces, control flow, derivatives
        np.testing.assert_allclose(jaxprc.grad(lambda v: jaxprc.lax.cond(v > 0, jnp.sin, jnp.cos, v))(1.0),
                                   np.cos(1.0), rtol=1e-6)

        def h(v, w):      # custom rules traced lazily keep their call's tracers: jaxprc's, no leak
            @jaxprc.custom_vjp
            def f(u):
                return u * w
            f.defvjp(lambda u: (f(u), None), lambda _, g: (7. * g,))
            return f(v)
        np.testing.assert_allclose(jaxprc.vmap(jaxprc.grad(h))(x, x), [7.] * 3)
    assert not jaxprc.config.jax_check_tracer_leaks
    jaxprc.jit(lambda v: leaky(v).sum())(x)       # off: the leak goes unnoticed until the tracer is used
    with pytest.raises(jaxprc.errors.UnexpectedTracerError):
        _LEAKED.pop() + 1
