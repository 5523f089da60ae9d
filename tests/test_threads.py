"""Tracing, jit, eager ops and grad from many threads at once.

Trace state is per thread: eight threads trace, compile, differentiate and run different
functions at the same time, race first calls of fresh jitted functions and donate buffers, and
every result must equal the one computed serially. A thread must never record into (or pop)
another thread's trace. The stress test runs ``ROUNDS`` rounds, or for
``JAXPRC_STRESS_SECONDS`` seconds when set (the reliability target is a minute).
"""
import os
import sys
import threading
import time

import numpy as np

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.ir import parse, tracing

N_THREADS = 8
ROUNDS = 4
STRESS_SECONDS = float(os.environ.get("JAXPRC_STRESS_SECONDS", 0))


@jaxprc.custom_jvp
def softplus(x):
    """Shared by all threads: its rule is formed (traced) by each thread that differentiates it."""
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * jaxprc.nn.sigmoid(x)


def make_fun(i):
    """A function of its own per thread: a chain of ops whose constants depend on ``i``."""
    def f(x):
        y = x
        for k in range(10):
            y = jnp.sin(y) * (i + 1.5) + jnp.cos(y * (k + 1)) / (i + 2.0)
        return jnp.sum(softplus(y) * y)
    f.__name__ = f"f{i}"
    return f


@jaxprc.jit
def shared(x, y):
    """One jitted function called by every thread (a cache hit after the first call)."""
    return jnp.tanh(x) @ y + 1.0


def inputs(i):
    x = np.linspace(-1.0, 1.0, 6, dtype=np.float32) + np.float32(i) / 10
    return x, x.reshape(2, 3), x.reshape(3, 2)


def work(i):
    """Everything one thread computes, as host values and text, for comparison."""
    f = make_fun(i)
    x, a, b = inputs(i)
    text = str(jaxprc.make_jaxpr(f)(x))
    return {
        "jaxpr": text,
        "parsed": str(parse(text)),                              # the shared parser
        "grad_jaxpr": str(jaxprc.make_jaxpr(jaxprc.grad(f))(x)),
        "jit": np.asarray(jaxprc.jit(f)(x)),
        "grad": np.asarray(jaxprc.grad(f)(x)),                  # eager grad (traced, then run)
        "value_and_grad": np.concatenate([np.ravel(v) for v in jaxprc.value_and_grad(f)(x)]),
        "eager": np.asarray(jnp.exp(jnp.sin(x) * (i + 1))),      # op by op
        "shared": np.asarray(shared(a, b)),
        "vmap": np.asarray(jaxprc.vmap(lambda r: jnp.sum(jnp.sin(r) * i))(a)),
    }


_racers, _racers_lock = {}, threading.Lock()


def racer(r):
    """Round ``r``'s fresh jitted function, first called by all threads at about once."""
    with _racers_lock:
        if r not in _racers:
            _racers[r] = jaxprc.jit(make_fun(r % N_THREADS))
        return _racers[r]


donating = jaxprc.jit(lambda v: v * 2.0 + 1.0, donate_argnums=0)


def race_and_donate(r, serial):
    k = r % N_THREADS
    x = inputs(k)[0]
    np.testing.assert_array_equal(np.asarray(racer(r)(x)), serial[k]["jit"], err_msg=f"round {r}: first call")
    buffer = jnp.array(x)
    out = donating(buffer)
    assert buffer.is_deleted(), f"round {r}: the donated buffer is still alive"
    np.testing.assert_array_equal(np.asarray(out), x * np.float32(2.0) + np.float32(1.0))


def assert_same(got, want, where):
    assert got.keys() == want.keys()
    for key in want:
        g, w = got[key], want[key]
        if isinstance(w, str):
            assert g == w, f"{where}: {key} differs"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{where}: {key}")


def test_many_threads_trace_jit_and_differentiate_at_once():
    serial = [work(i) for i in range(N_THREADS)]
    errors = []
    barrier = threading.Barrier(N_THREADS)

    def thread_main(i):
        try:
            barrier.wait(timeout=60)
            deadline, r = time.monotonic() + STRESS_SECONDS, 0
            while (time.monotonic() < deadline) if STRESS_SECONDS else r < ROUNDS:
                # rotate which function each thread works on, so that threads also meet on
                # the same functions and caches
                j = (i + r) % N_THREADS
                assert_same(work(j), serial[j], f"thread {i}, round {r}, function {j}")
                race_and_donate(r, serial)
                r += 1
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            errors.append((i, e))

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)          # switch threads often: interleave traces finely
    try:
        threads = [threading.Thread(target=thread_main, args=(i,)) for i in range(N_THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120 + STRESS_SECONDS)
    finally:
        sys.setswitchinterval(old_interval)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        i, e = errors[0]
        raise AssertionError(f"{len(errors)} thread(s) failed; thread {i}: {type(e).__name__}: {e}") from e

    # the main thread's trace state is untouched, and eager ops still run eagerly
    assert tracing.trace_state.stack == []
    assert tracing.current_builder() is None
    out = jnp.sin(jnp.ones(3)) + 1
    assert isinstance(out, jaxprc.Array) and not isinstance(out, tracing.Tracer)
    np.testing.assert_allclose(np.asarray(out), np.sin(1.0) + 1, rtol=1e-6)


def test_a_thread_has_its_own_trace_stack():
    """A thread started inside a trace does not see it: its ops run eagerly."""
    seen = {}

    def other():
        seen["builder"] = tracing.current_builder()
        seen["value"] = jnp.sin(jnp.ones(2))

    def f(x):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return x + 1

    jaxprc.make_jaxpr(f)(np.ones(2, np.float32))
    assert seen["builder"] is None
    assert isinstance(seen["value"], jaxprc.Array)


def test_a_tracer_used_from_another_thread_is_an_escaped_tracer():
    leaked = {}

    def other(x):
        try:
            jnp.sin(x)
        except Exception as e:  # noqa: BLE001
            leaked["error"] = e

    def f(x):
        t = threading.Thread(target=other, args=(x,))
        t.start()
        t.join()
        return x

    jaxprc.make_jaxpr(f)(np.ones(2, np.float32))
    assert isinstance(leaked.get("error"), jaxprc.errors.UnexpectedTracerError)


def test_gc_is_enabled_again_after_concurrent_grads():
    """grad pauses the cyclic collector while it works; overlapping calls from several threads
    leave it enabled once they are all done."""
    import gc
    assert gc.isenabled()
    f, x = make_fun(0), inputs(0)[0]
    threads = [threading.Thread(target=lambda: [jaxprc.grad(f)(x) for _ in range(3)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()
