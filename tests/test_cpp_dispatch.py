"""Cached jit calls and eager ops through jaxlib's C++ dispatch (compiler/engine/cpp_dispatch.py), and
the same behaviours with it switched off (config ``jaxprc_cpp_dispatch``): every check runs both
ways. The rest of the suite runs with the default (on); the jit and dispatch tests also pass
with ``JAXPRC_CPP_DISPATCH=0``."""
import threading

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.runtime import DeletedArrayError, cpp_jit


@pytest.fixture(params=[True, False], ids=["cpp", "python"])
def cpp(request):
    old = jx.config.jaxprc_cpp_dispatch
    jx.config.update("jaxprc_cpp_dispatch", request.param)
    yield request.param
    jx.config.update("jaxprc_cpp_dispatch", old)


def _counted(fun):
    """``jit(fun)`` and a list that grows by one per trace."""
    traces = []

    def f(*args, **kwargs):
        traces.append(1)
        return fun(*args, **kwargs)
    return jx.jit(f), traces


def test_pinned_jaxlib_is_supported():
    assert cpp_jit.SUPPORTED, "the pinned jaxlib runs the C++ dispatch; another one falls back to Python"


def test_hits_values_types_and_weak_types(cpp):
    f, traces = _counted(lambda a, b: a * b + 1.0)
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2.0, np.float32)
    da, db = jx.device_put(a), jx.device_put(b)
    for _ in range(3):
        np.testing.assert_array_equal(f(a, b), a * b + 1.0)
        out = f(da, db)
        assert type(out) is jx.runtime.Array and out.dtype == np.float32 and not out.weak_type
    w = f(2.0, 3.0)
    assert (w.dtype, w.weak_type, float(w)) == (np.float32, True, 7.0)
    assert f(2, 3).weak_type and float(f(2, 3)) == 7.0
    assert len(traces) == 3        # numpy and device arrays share the Python cache entry
    if isinstance(f, cpp_jit.PjitFunction):      # (not when JAXPRC_CPP_DISPATCH=0 at creation)
        assert f._cache_size() == 4          # C++ keys on committed device arrays apart


def test_pytrees_kwargs_and_static_args(cpp):
    g = jx.jit(lambda x, *, b, a: {"d": x - a * b, "t": (x, a)})
    for _ in range(2):
        out = g(1.0, b=3.0, a=2.0)
        assert float(out["d"]) == -5.0 and float(out["t"][1]) == 2.0
        assert float(g(1.0, a=2.0, b=3.0)["d"]) == -5.0
    s, traces = _counted(lambda x, n: x * n)
    s = jx.jit(s.__wrapped__, static_argnums=1)
    x = jnp.ones(2)
    assert [float(s(x, n)[0]) for n in (3, 3, 4, 3)] == [3.0, 3.0, 4.0, 3.0]
    assert len(traces) == 2
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        s(x, [1])


def test_x64_switch_retypes_host_arguments(cpp):
    f = jx.jit(lambda a: a * 2)
    x = np.ones(2, np.float64)
    assert f(x).dtype == np.float32 and f(x).dtype == np.float32
    with jx.enable_x64():
        assert f(x).dtype == np.float64 and f(x).dtype == np.float64
        assert f(1.5).dtype == np.float64
    assert f(x).dtype == np.float32 and f(1.5).dtype == np.float32


def test_python_int_out_of_range_after_a_hit(cpp):
    f = jx.jit(lambda a, b: a + b)
    assert int(f(1, 2)) == 3 and int(f(1, 2)) == 3
    with pytest.raises(OverflowError):
        f(1, 2 ** 40)


def test_donated_and_deleted_arguments(cpp):
    f = jx.jit(lambda a: a * 2)
    g = jx.jit(lambda a: a + 1, donate_argnums=0)
    x = jnp.ones(1024)
    f(x), f(x)
    for _ in range(2):
        z = jnp.ones(1024)
        np.testing.assert_array_equal(g(z), 2.0)
        assert z.is_deleted()
        with pytest.raises(DeletedArrayError):
            f(z)
    x.delete()
    with pytest.raises(DeletedArrayError):
        f(x)
    with pytest.raises(DeletedArrayError):
        jnp.sin(x)


def test_host_writes_after_the_call_never_reach_it(cpp):
    # (Without jaxprc's copy, jaxlib's zero-copy transfer lets the write in on most tries.)
    f = jx.jit(lambda a: a * 2)
    for _ in range(30):
        host = np.ones(50_000, np.float32)
        out = f(host)
        host[:] = 42.0
        assert (np.asarray(out) == 2.0).all()


def test_non_contiguous_and_strided_host_arguments(cpp):
    f = jx.jit(lambda a: a + 0)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):
        np.testing.assert_array_equal(f(m.T), m.T)
        np.testing.assert_array_equal(f(m[:, ::2]), m[:, ::2])


def test_inside_a_trace_jit_records_an_equation(cpp):
    f = jx.jit(lambda a: a * 2)
    d = jnp.ones(2)
    f(d), f(d)
    jaxpr = jx.make_jaxpr(lambda y: f(d) + y)(1.0)
    assert "jit[" in str(jaxpr)
    assert float(jx.grad(lambda y: jnp.sum(f(d) * y))(1.0)) == 4.0
    assert float(f(d)[0]) == 2.0       # and outside again, runs


def test_disable_jit_and_debug_nans(cpp):
    seen = []

    def body(a):
        seen.append(type(a))
        return jnp.log(a - 2)
    f = jx.jit(body)
    d = jnp.ones(2)
    f(d), f(d)
    with jx.disable_jit():
        f(d)
    assert seen[-1] is jx.runtime.Array
    with jx.debug_nans():
        with pytest.raises(FloatingPointError):
            f(d)
        with pytest.raises(FloatingPointError):
            jnp.log(d - 2)
    assert np.isnan(np.asarray(f(d))).all()


def test_float0_results_and_effects(cpp):
    g = jx.jit(jx.grad(lambda x, i: x * 2.0, argnums=(0, 1), allow_int=True))
    for _ in range(2):
        gx, gi = g(1.0, 1)
        assert float(gx) == 2.0 and gi.dtype == jx.dtypes.float0
    printed = []
    h = jx.jit(lambda x: (jx.debug.callback(lambda v: printed.append(float(v)), x), x + 1)[1])
    for _ in range(2):
        assert float(h(1.0)) == 2.0
    jx.effects_barrier()
    assert printed == [1.0, 1.0]


def test_eager_ops(cpp):
    x = jnp.asarray(np.linspace(-1, 1, 8, dtype=np.float32))
    for _ in range(2):
        np.testing.assert_allclose(jnp.sin(x), np.sin(np.linspace(-1, 1, 8, dtype=np.float32)), rtol=1e-6)
        np.testing.assert_array_equal(x + 1.0, np.asarray(x) + 1.0)
        assert (x * 2).dtype == np.float32 and not (x * 2).weak_type
        np.testing.assert_array_equal(lax.add(np.ones(3, np.float32), 2.0), 3.0)
        assert float(x[0]) == -1.0
        q, r = lax.top_k(x, 2)        # several results
        assert float(q[0]) == 1.0 and int(r[0]) == 7


def test_threads_share_one_function(cpp):
    f = jx.jit(lambda a: a * 3)
    x = jnp.ones(4)
    errors, results = [], []

    def work():
        try:
            for _ in range(200):
                results.append(float(f(x)[0]))
        except Exception as e:    # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [3.0] * 800


def test_clear_caches_drops_cpp_entries(cpp):
    f, traces = _counted(lambda a: a + 1)
    x = jnp.ones(2)
    f(x), f(x)
    jx.clear_caches()
    f(x)
    assert len(traces) == 2


def test_elementwise_functions_keep_eager_checks(cpp):
    h = np.linspace(-1, 1, 8, dtype=np.float32)
    u = jnp.array([1], jnp.uint8)
    f = jnp.ones(2)
    for _ in range(2):
        np.testing.assert_allclose(jnp.sin(h), np.sin(h), rtol=1e-6)
        assert int((u + 1)[0]) == 2 and (u + 1).dtype == np.uint8
        assert int((u + 300)[0]) == 45        # a Python int wraps into the array's dtype, as in JAX
        with pytest.raises(OverflowError):    # a Python int beyond int32, whatever its partner (JAX's)
            f + 2 ** 40
        assert float((f + (2 ** 31 - 1))[0]) == float(2 ** 31) and (f + (2 ** 31 - 1)).dtype == np.float32
        assert (f * 2).weak_type is False and (jnp.float32(1) * 2).dtype == np.float32
    assert jnp.add.__name__ == "add" and jnp.sin.__doc__
