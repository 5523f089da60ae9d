"""Benchmarks side by side with JAX: ``python benchmarks/bench.py [--quick] [--json FILE]``.

Each benchmark is one program written once against the API jaxprc shares
with JAX. Each library runs in a worker process of its own, as a user's
program would: in one process the two would tax each other (every config
either registers in jaxlib's jit key is part of every C++ dispatch of the
process, jaxprc's and JAX's alike). The driver alternates the workers sample
by sample, so both see the same machine load. A benchmark's ``setup(lib)``
builds what it needs (and warms caches), then returns ``sample()``: one
measurement, in the benchmark's unit. Reported per library: median, min and
max of the samples; and the ratio of the medians, jaxprc / JAX, against the
benchmark's target (the most jaxprc may take relative to JAX).

``jax`` is needed only here (the ``bench`` extra); ``--libs jaxprc`` runs
without it.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import importlib.metadata
import json
import os
import platform
import re
import statistics
import sys
import time
from typing import Callable

import numpy as np

# The clock of every measurement: wall time by default; ``--clock cpu`` uses the
# process's CPU time (all threads), steadier on a machine shared with other jobs.
_now = time.perf_counter

# ----------------------------------------------------------------- libraries


@dataclasses.dataclass
class Lib:
    """One implementation of the shared API: ``api`` is ``jax`` or ``jaxprc``."""
    name: str
    api: object
    np: object
    lax: object
    odeint: Callable | None
    mesh8: object | None = None     # a one-axis mesh ("batch") of 8 devices, when there are 8 (--devices 8)

    def block(self, x):
        return self.api.block_until_ready(x)


def load_lib(name: str) -> Lib:
    api = importlib.import_module(name)
    try:
        odeint = importlib.import_module(f"{name}.experimental.ode").odeint
    except (ImportError, AttributeError):
        odeint = None
    mesh8 = api.sharding.Mesh(np.array(api.devices()[:8]), ("batch",)) if api.device_count() >= 8 else None
    return Lib(name, api, importlib.import_module(f"{name}.numpy"), importlib.import_module(f"{name}.lax"),
               odeint, mesh8)


# ------------------------------------------------------------------ programs
# Written once against the shared API; ``lib`` picks the implementation.

CHAIN_EQNS = 2000     # tanh, cos, mul, add per step: no literals, so both libraries record 2000 equations


def make_chain(lib: Lib):
    """A fresh elementwise chain of CHAIN_EQNS equations (a new function object: JAX caches traces per function)."""
    jnp = lib.np

    def chain(x):
        for _ in range(CHAIN_EQNS // 4):
            x = jnp.tanh(x) * jnp.cos(x) + x
        return x
    return chain


def make_chain_loss(lib: Lib):
    chain = make_chain(lib)
    return lambda x: lib.np.sum(chain(x))


MLP_SIZES, MLP_BATCH = (784, 512, 512, 10), 128


def mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    params = [(rng.normal(0, 1 / np.sqrt(m), (m, n)).astype(np.float32), np.zeros(n, np.float32))
              for m, n in zip(MLP_SIZES[:-1], MLP_SIZES[1:])]
    x = rng.normal(size=(MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    y = np.eye(MLP_SIZES[-1], dtype=np.float32)[rng.integers(0, MLP_SIZES[-1], MLP_BATCH)]
    return params, x, y


def make_mlp_loss(lib: Lib):
    jnp = lib.np

    def mlp_loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        logits = h @ w + b
        return -jnp.mean(jnp.sum(lib.api.nn.log_softmax(logits) * y, axis=-1))
    return mlp_loss


def make_sgd_step(lib: Lib, lr=0.01):
    grad_loss = lib.api.grad(make_mlp_loss(lib))

    def sgd_step(params, x, y):
        grads = grad_loss(params, x, y)
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return sgd_step


RNN_STEPS, RNN_BATCH, RNN_IN, RNN_HIDDEN = 100, 32, 64, 128


def rnn_data(seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1 / np.sqrt(RNN_HIDDEN), (RNN_HIDDEN, RNN_HIDDEN)).astype(np.float32)
    u = rng.normal(0, 1 / np.sqrt(RNN_IN), (RNN_IN, RNN_HIDDEN)).astype(np.float32)
    xs = rng.normal(size=(RNN_STEPS, RNN_BATCH, RNN_IN)).astype(np.float32)
    return w, u, xs


def make_rnn_loss(lib: Lib):
    jnp = lib.np

    def rnn_loss(w, u, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, jnp.sum(h)
        h, sums = lib.lax.scan(step, jnp.zeros((RNN_BATCH, RNN_HIDDEN), jnp.float32), xs)
        return jnp.sum(h * h) + jnp.sum(sums)
    return rnn_loss


PENDULUM_ARGS = (np.array([2.0, 0.0], np.float32), np.float32(9.81), np.float32(0.3))   # y0, g, damping


def make_pendulum_loss(lib: Lib):
    """Loss at the end of a damped pendulum trajectory; its gradient runs odeint's custom_vjp."""
    jnp = lib.np
    ts = jnp.linspace(0.0, 5.0, 50)

    def dynamics(y, t, g, damping):
        theta, omega = y[0], y[1]
        return jnp.stack([omega, -g * jnp.sin(theta) - damping * omega])

    def loss(y0, g, damping):
        ys = lib.odeint(dynamics, y0, ts, g, damping)
        return jnp.sum(ys[-1] ** 2)
    return loss


# --------------------------------------------------------------- benchmarks

@dataclasses.dataclass
class Bench:
    name: str
    unit: str
    setup: Callable[[Lib], Callable[[], float]] | None = None   # -> sample(); None for size benchmarks
    size: Callable[[Lib], str] | None = None                     # -> StableHLO text (program size)
    target: float | None = None                                  # max ratio jaxprc / JAX
    requires: str = ""                                           # Lib attribute that must be present


BENCHES: list[Bench] = []


def bench(name, unit, target=None, requires=""):
    def register(setup):
        BENCHES.append(Bench(name, unit, setup=setup, target=target, requires=requires))
        return setup
    return register


def size_bench(name, requires=""):
    def register(lower_text):
        BENCHES.append(Bench(name, "ops", size=lower_text, target=1.0, requires=requires))
        return lower_text
    return register


def _timed(fn) -> float:
    t = _now()
    fn()
    return _now() - t


def _per_call(run_once, calls: int) -> Callable[[], float]:
    """A sample: µs per call over ``calls`` calls (``run_once(i)`` does one call)."""
    def sample():
        t = _now()
        for i in range(calls):
            run_once(i)
        return (_now() - t) / calls * 1e6
    return sample


_X8 = np.linspace(-1, 1, 8, dtype=np.float32)
_XS = np.linspace(-1, 1, 16 * 8, dtype=np.float32).reshape(16, 8)


@bench("tracing: make_jaxpr(chain)", "µs/eqn", target=0.3)
def _trace_chain(lib):
    return lambda: _timed(lambda: lib.api.make_jaxpr(make_chain(lib))(_X8)) / CHAIN_EQNS * 1e6


@bench("tracing: make_jaxpr(grad(chain))", "µs/eqn", target=0.3)
def _trace_grad(lib):
    return lambda: _timed(lambda: lib.api.make_jaxpr(lib.api.grad(make_chain_loss(lib)))(_X8)) / CHAIN_EQNS * 1e6


@bench("tracing: make_jaxpr(vmap(chain))", "µs/eqn", target=0.3)
def _trace_vmap(lib):
    return lambda: _timed(lambda: lib.api.make_jaxpr(lib.api.vmap(make_chain(lib)))(_XS)) / CHAIN_EQNS * 1e6


@bench("lowering: jit(chain).lower().as_text()", "µs/eqn", target=0.35)
def _lower_chain(lib):
    return lambda: _timed(lambda: lib.api.jit(make_chain(lib)).lower(_X8).as_text()) / CHAIN_EQNS * 1e6


@bench("first call: jit(grad(mlp_loss))", "ms", target=0.9)
def _first_call(lib):
    params, x, y = mlp_data()

    def sample():
        f = lib.api.jit(lib.api.grad(make_mlp_loss(lib)))
        return _timed(lambda: lib.block(f(params, x, y))) * 1e3
    return sample


# A fresh process's first call, timed inside it (imports and client start-up excluded): argv is the
# library, the clock, the config options (JSON) that turn its persistent compilation cache on, and
# this file.
_FRESH_FIRST_CALL = """
import json, runpy, sys, time
bench = runpy.run_path(sys.argv[4])
load_lib, make_mlp_loss, mlp_data = bench["load_lib"], bench["make_mlp_loss"], bench["mlp_data"]
lib = load_lib(sys.argv[1])
for option, value in json.loads(sys.argv[3]).items():
    lib.api.config.update(option, value)
params, x, y = mlp_data()
lib.api.devices()
now = time.perf_counter if sys.argv[2] == "wall" else time.process_time
f = lib.api.jit(lib.api.grad(make_mlp_loss(lib)))
t = now()
lib.block(f(params, x, y))
print((now() - t) * 1e3)
"""


def _cache_options(lib, cache_dir) -> dict:
    """Config options caching every program in ``cache_dir`` (JAX's thresholds would skip small ones)."""
    if lib.name == "jax":
        return {"jax_compilation_cache_dir": cache_dir, "jax_persistent_cache_min_compile_time_secs": 0,
                "jax_persistent_cache_min_entry_size_bytes": 0}
    return {"jaxprc_compilation_cache_dir": cache_dir}


def _fresh_first_call(lib, options: dict) -> float:
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in ("JAXPRC_COMPILATION_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")}
    proc = subprocess.run([sys.executable, "-c", _FRESH_FIRST_CALL, lib.name,
                           "wall" if _now is time.perf_counter else "cpu", json.dumps(options),
                           os.path.abspath(__file__)],
                          capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "subprocess failed")
    return float(proc.stdout.strip().splitlines()[-1])


FRESH_NO_CACHE = "first call, fresh process: jit(grad(mlp_loss)), no cache"
FRESH_WARM_CACHE = "first call, fresh process: jit(grad(mlp_loss)), warm persistent cache"


@bench(FRESH_NO_CACHE, "ms")
def _fresh_no_cache(lib):
    return lambda: _fresh_first_call(lib, {})


@bench(FRESH_WARM_CACHE, "ms")
def _fresh_warm_cache(lib):
    import tempfile
    cache_dir = tempfile.TemporaryDirectory(prefix=f"bench-cache-{lib.name}-")
    options = _cache_options(lib, cache_dir.name)
    _fresh_first_call(lib, options)          # the cold process: compiles and writes the entries

    def sample():
        cache_dir                            # kept alive (and removed) with the sampler
        return _fresh_first_call(lib, options)
    return sample


def cache_speedups(results) -> dict[str, float]:
    """Per library: median first call of a fresh process without the cache / with a warm cache."""
    by_name = {r.bench.name: r for r in results}
    cold, warm = by_name.get(FRESH_NO_CACHE), by_name.get(FRESH_WARM_CACHE)
    if cold is None or warm is None:
        return {}
    return {lib: cold.value(lib) / warm.value(lib) for lib in ("jax", "jaxprc")
            if cold.value(lib) and warm.value(lib)}


CACHE_SPEEDUP_TARGET = 3.0      # issue 23: a warm cache makes a fresh process's first call >= 3x faster


def _dispatch_fn(lib):
    f = lib.api.jit(lambda a, b: a * b + 1.0)
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2.0, np.float32)
    assert np.allclose(np.asarray(f(a, b)), a * b + 1.0)
    return f, a, b


@bench("dispatch: jit(a*b+1) device arrays", "µs/call", target=1.0)
def _dispatch_device(lib):
    f, a, b = _dispatch_fn(lib)
    a, b = lib.api.device_put(a), lib.api.device_put(b)
    lib.block(f(a, b))
    run = _per_call(lambda i: f(a, b), 2000)
    return lambda: (run(), lib.block(f(a, b)))[0]


@bench("dispatch: jit(a*b+1) numpy in/out", "µs/call", target=1.0)
def _dispatch_numpy(lib):
    f, a, b = _dispatch_fn(lib)
    return _per_call(lambda i: np.asarray(f(a, b)), 1000)


@bench("eager: jnp.sin(f32[8])", "µs/op", target=1.0)
def _eager_sin(lib):
    x = lib.api.device_put(_X8)
    sin = lib.np.sin
    lib.block(sin(x))
    run = _per_call(lambda i: sin(x), 1000)
    return lambda: (run(), lib.block(sin(x)))[0]


@bench("eager: x + y (f32[8] device arrays)", "µs/op", target=1.0)
def _eager_add(lib):
    x = lib.api.device_put(_X8)
    y = lib.api.device_put(_X8[::-1].copy())
    lib.block(x + y)
    run = _per_call(lambda i: x + y, 1000)
    return lambda: (run(), lib.block(x + y))[0]


@bench("eager: x * 2.0 (f32[8] device array, Python scalar)", "µs/op", target=1.0)
def _eager_scale(lib):
    x = lib.api.device_put(_X8)
    lib.block(x * 2.0)
    run = _per_call(lambda i: x * 2.0, 1000)
    return lambda: (run(), lib.block(x * 2.0))[0]


DISPATCH_THREADS = 4


@bench(f"dispatch: {DISPATCH_THREADS} threads × jit(a*b+1) device arrays", "µs/call", target=1.0)
def _dispatch_threads(lib):
    """Throughput of one jitted function called from several threads at once: the time of the
    whole batch over all calls (the GIL is released while XLA runs)."""
    import threading
    f, a, b = _dispatch_fn(lib)
    a, b = lib.api.device_put(a), lib.api.device_put(b)
    lib.block(f(a, b))
    calls = 2000     # per thread: long enough that the threads contend for the GIL in every sample

    def work():
        for _ in range(calls):
            f(a, b)

    def sample():
        threads = [threading.Thread(target=work) for _ in range(DISPATCH_THREADS)]
        t = _now()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        lib.block(f(a, b))
        return (_now() - t) / (calls * DISPATCH_THREADS) * 1e6
    return sample


@bench("runtime: jit MLP SGD step 784-512-512-10 b128", "ms/step", target=1.05)
def _mlp_step(lib):
    params, x, y = mlp_data()
    step = lib.api.jit(make_sgd_step(lib))
    params, x, y = lib.api.device_put((params, x, y))
    state = [lib.block(step(params, x, y))]

    def run():
        for _ in range(5):
            state[0] = step(state[0], x, y)
        lib.block(state[0])
    return lambda: _timed(run) / 5 * 1e3


@bench("runtime: data-parallel MLP SGD step, 8 CPU devices", "ms/step", target=1.05, requires="mesh8")
def _mlp_step_8_devices(lib):
    """The MLP step with the batch split over 8 devices and the parameters replicated: XLA's
    partitioner adds the all-reduce of the gradients."""
    named = lambda *spec: lib.api.sharding.NamedSharding(lib.mesh8, lib.api.sharding.PartitionSpec(*spec))  # noqa: E731
    params, x, y = mlp_data()
    step = lib.api.jit(make_sgd_step(lib))
    params = lib.api.device_put(params, named())
    x, y = lib.api.device_put((x, y), named("batch"))
    state = [lib.block(step(params, x, y))]

    def run():
        for _ in range(5):
            state[0] = step(state[0], x, y)
        lib.block(state[0])
    return lambda: _timed(run) / 5 * 1e3


@bench("runtime: jit(grad) of 100-step scan RNN", "ms/call", target=1.05)
def _rnn_grad(lib):
    args = lib.api.device_put(rnn_data())
    f = lib.api.jit(lib.api.grad(make_rnn_loss(lib), argnums=(0, 1)))
    lib.block(f(*args))
    return lambda: _timed(lambda: lib.block(f(*args))) * 1e3


@bench("runtime: jit(grad) of odeint pendulum", "ms/call", target=1.05, requires="odeint")
def _ode_grad(lib):
    args = lib.api.device_put(PENDULUM_ARGS)     # as in the other runtime rows: no host copies timed
    f = lib.api.jit(lib.api.grad(make_pendulum_loss(lib), argnums=(0, 1, 2)))
    lib.block(f(*args))
    return lambda: _timed(lambda: lib.block(f(*args))) * 1e3


@size_bench("StableHLO size: grad(mlp_loss)")
def _size_mlp(lib):
    params, x, y = mlp_data()
    return lib.api.jit(lib.api.grad(make_mlp_loss(lib))).lower(params, x, y).as_text()


@size_bench("StableHLO size: vmap(chain)")
def _size_vmap_chain(lib):
    return lib.api.jit(lib.api.vmap(make_chain(lib))).lower(_XS).as_text()


@size_bench("StableHLO size: grad(scan RNN)")
def _size_rnn(lib):
    return lib.api.jit(lib.api.grad(make_rnn_loss(lib), argnums=(0, 1))).lower(*rnn_data()).as_text()


@size_bench("StableHLO size: grad(odeint pendulum)", requires="odeint")
def _size_ode(lib):
    return lib.api.jit(lib.api.grad(make_pendulum_loss(lib), argnums=(0, 1, 2))).lower(*PENDULUM_ARGS).as_text()


# ------------------------------------------------------------ convolutional networks

def resnet_block_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 32, 32, 64)).astype(np.float32)
    w = [rng.standard_normal((3, 3, 64, 64)).astype(np.float32) * 0.05 for _ in range(2)]
    return w, x


def make_resnet_block_loss(lib: Lib):
    """conv-relu-conv plus the identity, relu, mean: a ResNet basic block (no normalisation)."""
    def conv(x, w):
        return lib.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(w, x):
        h = lib.np.maximum(conv(x, w[0]), 0.0)
        return lib.np.mean(lib.np.maximum(conv(h, w[1]) + x, 0.0))
    return loss


def mnist_convnet(lib: Lib):
    """The MNIST convnet written with stax: its init (params) and a cross-entropy loss, batch 128."""
    stax = importlib.import_module(f"{lib.name}.example_libraries.stax")
    init, predict = stax.serial(stax.Conv(32, (3, 3)), stax.Relu, stax.Conv(64, (3, 3)), stax.Relu,
                                stax.MaxPool((2, 2), (2, 2)), stax.Flatten, stax.Dense(128), stax.Relu,
                                stax.Dense(10), stax.LogSoftmax)
    _, params = init(lib.api.random.PRNGKey(0), (-1, 28, 28, 1))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 28, 28, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    return params, x, y, lambda p, x, y: -lib.np.mean(lib.np.sum(predict(p, x) * y, axis=1))


@bench("runtime: jit(grad) ResNet block b32 32x32x64", "ms/call", target=1.05)
def _resnet_grad(lib):
    args = lib.api.device_put(resnet_block_data())
    f = lib.api.jit(lib.api.grad(make_resnet_block_loss(lib), argnums=(0, 1)))
    lib.block(f(*args))
    return lambda: _timed(lambda: lib.block(f(*args))) * 1e3


@bench("runtime: jit(grad) MNIST stax convnet b128", "ms/call", target=1.05)
def _convnet_grad(lib):
    params, x, y, loss = mnist_convnet(lib)
    args = lib.api.device_put((params, x, y))
    f = lib.api.jit(lib.api.grad(loss))
    lib.block(f(*args))
    return lambda: _timed(lambda: lib.block(f(*args))) * 1e3


# ------------------------------------------------------------ linear algebra and FFT

def _spd(n, batch=(), seed=0):
    a = np.random.default_rng(seed).standard_normal((*batch, n, n)).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=np.float32)


def _timed_jit(lib, fn, *args):
    """A warmed ``jit(fn)`` on device arrays; a sample is one blocked call, in ms."""
    args = lib.api.device_put(args)
    f = lib.api.jit(fn)
    lib.block(f(*args))
    return lambda: _timed(lambda: lib.block(f(*args))) * 1e3


def gp_data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n)).astype(np.float32)
    y = (np.sin(x) + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return np.array([0.0, -2.0], np.float32), x, y


def make_gp_nll(lib: Lib):
    """The negative log marginal likelihood of a GP (squared-exponential kernel) in
    (log lengthscale, log noise variance), through a Cholesky factor."""
    sl = importlib.import_module(f"{lib.name}.scipy.linalg")
    jnp = lib.np

    def nll(theta, x, y):
        d2 = (x[:, None] - x[None, :]) ** 2
        K = jnp.exp(-0.5 * d2 / jnp.exp(2 * theta[0])) + jnp.exp(theta[1]) * jnp.eye(x.shape[0])
        c = sl.cho_factor(K, lower=True)
        return 0.5 * y @ sl.cho_solve(c, y) + jnp.sum(jnp.log(jnp.diag(c[0])))
    return nll


@bench("runtime: jit cholesky + solve 512x512", "ms/call", target=1.05)
def _cholesky_solve(lib):
    sl = importlib.import_module(f"{lib.name}.scipy.linalg")
    b = np.ones((512, 1), np.float32)
    return _timed_jit(lib, lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=True), b), _spd(512), b)


@bench("runtime: jit batched eigh 64x32x32", "ms/call", target=1.05)
def _batched_eigh(lib):
    return _timed_jit(lib, lib.np.linalg.eigh, _spd(32, (64,)))


@bench("runtime: jit fft c64[2^20]", "ms/call", target=1.05)
def _fft_1m(lib):
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(2 ** 20) + 1j * rng.standard_normal(2 ** 20)).astype(np.complex64)
    return _timed_jit(lib, lib.np.fft.fft, z)


@bench("runtime: jit(grad) GP marginal likelihood n=256", "ms/call", target=1.05)
def _gp_grad(lib):
    return _timed_jit(lib, lib.api.grad(make_gp_nll(lib)), *gp_data())


def _mlp_specs(lib, batch):
    """The MLP loss's argument types with ``batch`` rows (an int, or a symbolic dimension)."""
    params, x, y = mlp_data()
    spec = lambda a, *lead: lib.api.ShapeDtypeStruct((*lead, *a.shape[len(lead):]), a.dtype)  # noqa: E731
    return lib.api.tree.map(spec, params), spec(x, batch), spec(y, batch)


def _trace_mlp_grad(lib, batch):
    loss = make_mlp_loss(lib)
    specs = _mlp_specs(lib, batch)
    return lambda: _timed(lambda: lib.api.make_jaxpr(lib.api.grad(loss))(*specs)) * 1e3


@bench("tracing: make_jaxpr(grad(mlp_loss)), static batch", "ms", target=1.0)
def _trace_mlp_static(lib):
    return _trace_mlp_grad(lib, MLP_BATCH)


@bench("tracing: make_jaxpr(grad(mlp_loss)), symbolic batch", "ms", target=1.0)
def _trace_mlp_symbolic(lib):
    return _trace_mlp_grad(lib, lib.api.export.symbolic_shape("b")[0])


@bench("runtime: jit(grad(mlp_loss)) at batch 128, static", "ms/call", target=1.05)
def _mlp_grad_static(lib):
    return _timed_jit(lib, lib.api.grad(make_mlp_loss(lib)), *mlp_data())


@bench("runtime: jit(grad(mlp_loss)) exported with a symbolic batch, called at 128", "ms/call", target=1.05)
def _mlp_grad_symbolic(lib):
    exported = lib.api.export.export(lib.api.jit(lib.api.grad(make_mlp_loss(lib))))(
        *_mlp_specs(lib, lib.api.export.symbolic_shape("b")[0]))
    return _timed_jit(lib, exported.call, *mlp_data())


@size_bench("StableHLO size: grad(ResNet block)")
def _size_resnet(lib):
    return lib.api.jit(lib.api.grad(make_resnet_block_loss(lib), argnums=(0, 1))).lower(*resnet_block_data()).as_text()


@size_bench("StableHLO size: grad(MNIST stax convnet)")
def _size_convnet(lib):
    params, x, y, loss = mnist_convnet(lib)
    return lib.api.jit(lib.api.grad(loss)).lower(params, x, y).as_text()


# ------------------------------------------------------------ op counting

_OP_NAME = re.compile(r'^\s*(?:%[\w#:, %]+=\s*)?"?([a-z_][\w]*\.[\w.]+)"?')
_PRETTY_FUNC_OPS = re.compile(r"^\s*(?:%[\w#:, %]+=\s*)?(return|call)\b")
_NESTED_OP = re.compile(r"\bapplies\s+([a-z_]\w*\.\w+)")   # compact reduce: `applies stablehlo.add`


def count_ops(text: str) -> dict[str, int]:
    """Operations in MLIR text by name, module and function headers excluded.

    Counts one op per line (pretty or generic form), the pretty ``return`` and
    ``call`` of the func dialect, and the op inside a compact ``reduce ...
    applies`` line (which stands for a region of two ops: the op and its return).
    """
    counts: dict[str, int] = {}

    def add(name, n=1):
        counts[name] = counts.get(name, 0) + n
    for line in text.splitlines():
        m = _OP_NAME.match(line)
        if m:
            name = m.group(1)
            if name in ("func.func", "builtin.module"):
                continue
            add(name)
            for nested in _NESTED_OP.findall(line):
                add(nested)
                add("stablehlo.return")
            continue
        m = _PRETTY_FUNC_OPS.match(line)
        if m:
            add("func." + m.group(1))
    return counts


# ---------------------------------------------------------------- harness

@dataclasses.dataclass
class Result:
    bench: Bench
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    error: dict[str, str] = dataclasses.field(default_factory=dict)
    ops: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    def value(self, lib: str) -> float | None:
        if lib in self.ops:
            return float(sum(self.ops[lib].values()))
        s = self.samples.get(lib)
        return statistics.median(s) if s else None

    def ratio(self, of=statistics.median) -> float | None:
        """jaxprc / JAX of the medians (or of ``of`` applied to the samples)."""
        if self.ops:
            a, b = self.value("jaxprc"), self.value("jax")
        else:
            sa, sb = self.samples.get("jaxprc"), self.samples.get("jax")
            a, b = (of(sa) if sa else None), (of(sb) if sb else None)
        return a / b if a is not None and b else None


def _error_text(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:160]}"


class Worker:
    """One library's process: it runs this file with ``--worker LIB`` and answers the driver's
    requests, one JSON line each way (requests on its stdin, answers on a pipe of their own, so
    that what the libraries print goes to stderr)."""

    def __init__(self, lib: str, clock: str):
        self.lib, self.clock = lib, clock
        self._start()

    def _start(self):
        import subprocess
        lib, clock = self.lib, self.clock
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", lib, "--clock", clock,
             "--answer-fd", str(write_fd)],
            stdin=subprocess.PIPE, stdout=sys.stderr, text=True, pass_fds=(write_fd,))
        os.close(write_fd)
        self.answers = os.fdopen(read_fd, "r")

    def ask(self, **request) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.answers.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = self.proc.wait()
            self.answers.close()
            self._start()                  # a fresh process for the next benchmarks
            raise RuntimeError(f"the {self.lib} process died (exit code {code})")
        return json.loads(line)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()
        self.answers.close()


def serve(lib_name: str, answer_fd: int) -> int:
    """The worker's loop: load the library, then set up, sample and drop benchmarks on request."""
    out = os.fdopen(answer_fd, "w")
    by_name = {b.name: b for b in BENCHES}
    lib, samplers = load_lib(lib_name), {}

    def answer(**reply):
        out.write(json.dumps(reply) + "\n")
        out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        b = by_name[req.get("bench", "")] if "bench" in req else None
        try:
            if req["op"] == "setup":
                if b.requires and getattr(lib, b.requires) is None:
                    answer(skip=f"{lib_name} has no {b.requires}")
                    continue
                samplers[b.name] = b.setup(lib)
                samplers[b.name]()                  # warm-up sample, discarded
                answer(ok=True)
            elif req["op"] == "sample":
                gc.collect()
                answer(value=samplers[b.name]())
            elif req["op"] == "size":
                if b.requires and getattr(lib, b.requires) is None:
                    answer(skip=f"{lib_name} has no {b.requires}")
                    continue
                answer(ops=count_ops(b.size(lib)))
            elif req["op"] == "drop":
                samplers.pop(b.name, None)
                gc.collect()
                answer(ok=True)
        except Exception as e:      # a library lacking a feature: report it, go on
            samplers.pop(getattr(b, "name", None), None)
            answer(error=_error_text(e))
    return 0


def run_bench(b: Bench, workers: list[Worker], reps: int, budget_s: float, log) -> tuple[Result, list[str]]:
    """Alternate the workers sample by sample until ``reps`` samples each or the budget is spent
    (min 3). Also returns the libraries that skipped the benchmark, with why."""
    result, skipped = Result(b), []

    def ask(w, **request):
        try:
            reply = w.ask(bench=b.name, **request)
        except RuntimeError as e:
            reply = {"error": str(e)}
        if "error" in reply:
            result.error[w.lib] = reply["error"]
        elif "skip" in reply:
            skipped.append(reply["skip"])
        return reply
    if b.size is not None:
        for w in workers:
            reply = ask(w, op="size")
            if "ops" in reply:
                result.ops[w.lib] = reply["ops"]
        return result, skipped
    order = [w for w in workers if "ok" in ask(w, op="setup")]
    start = _now()
    for rep in range(reps):
        for w in (order if rep % 2 == 0 else order[::-1]):
            if w.lib in result.error:
                continue
            reply = ask(w, op="sample")
            if "value" in reply:
                result.samples.setdefault(w.lib, []).append(reply["value"])
        if rep >= 2 and _now() - start > budget_s:
            break
    for w in order:
        if w.lib not in result.error:
            ask(w, op="drop")
    log(f"  {b.name}: {rep + 1} reps in {_now() - start:.1f}s")
    return result, skipped


# -------------------------------------------------------------- reporting

def _fmt(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _cell(r: Result, lib: str) -> str:
    if lib in r.error:
        return "error"
    if lib in r.ops:
        return str(sum(r.ops[lib].values()))
    s = r.samples.get(lib)
    if not s:
        return "–"
    return f"{_fmt(statistics.median(s))} ({_fmt(min(s))}–{_fmt(max(s))})"


def markdown_table(results: list[Result]) -> str:
    rows = ["| benchmark | unit | JAX median (min–max) | jaxprc median (min–max) | ratio | ratio of mins "
            "| target | met |",
            "|---|---|---|---|---|---|---|---|"]
    ratio_text = lambda x: "–" if x is None else f"{x:.2f}"
    for r in results:
        ratio = r.ratio()
        t = r.bench.target
        met = "" if ratio is None or t is None else ("yes" if ratio <= t else "**no**")
        rows.append(f"| {r.bench.name} | {r.bench.unit} | {_cell(r, 'jax')} | {_cell(r, 'jaxprc')} | "
                    f"{ratio_text(ratio)} | {'' if r.ops else ratio_text(r.ratio(min))} | "
                    f"{'' if t is None else f'≤ {t}'} | {met} |")
    return "\n".join(rows)


def notes(results: list[Result], skipped: list[str]) -> list[str]:
    out = [f"- {r.bench.name}: {lib}: {msg}" for r in results for lib, msg in r.error.items()]
    return out + [f"- {s}" for s in skipped]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def conditions(libs, reps, quick, clock, elapsed, load_before) -> str:
    versions = ", ".join(f"{lib} {_version(lib)}" for lib in libs)
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, jaxlib {_version('jaxlib')}, {versions}; "
            f"{'--quick' if quick else 'full'} run, {clock} clock, up to {reps} samples per library, alternating "
            f"between one process per library; "
            f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after; {elapsed:.0f} s")


def to_json(results: list[Result]) -> list[dict]:
    out = []
    for r in results:
        entry = {"name": r.bench.name, "unit": r.bench.unit, "target": r.bench.target, "ratio": r.ratio(),
                 "errors": r.error}
        for lib, s in r.samples.items():
            entry[lib] = {"median": statistics.median(s), "min": min(s), "max": max(s), "samples": s}
        for lib, ops in r.ops.items():
            entry[lib] = {"ops": sum(ops.values()), "by_op": ops}
        out.append(entry)
    return out


# -------------------------------------------------------------------- main

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few samples per benchmark (under two minutes)")
    p.add_argument("--only", action="append", default=[],
                   help="run benchmarks whose name contains this text (repeatable)")
    p.add_argument("--libs", default="jax,jaxprc", help="comma-separated: jax,jaxprc (default both)")
    p.add_argument("--reps", type=int, help="samples per library (default 5 quick, 15 full)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time, or this process's CPU time (steadier when other jobs share the machine)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--worker", metavar="LIB", help=argparse.SUPPRESS)        # a library's process (Worker)
    p.add_argument("--answer-fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--devices", type=int, metavar="N",
                   help="CPU devices per library (the 8-device rows need 8); set before the libraries load")
    args = p.parse_args(argv)
    if args.devices:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={args.devices}")
        os.environ["JAXPRC_NUM_CPU_DEVICES"] = str(args.devices)
    global _now
    _now = time.perf_counter if args.clock == "wall" else time.process_time
    if args.worker:
        return serve(args.worker, args.answer_fd)

    reps = args.reps or (5 if args.quick else 15)
    budget = 8.0 if args.quick else 60.0
    load_before = os.getloadavg()[0]
    libs = [n.strip() for n in args.libs.split(",") if n.strip()]
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    workers = [Worker(lib, args.clock) for lib in libs]
    start = _now()
    results, skipped = [], []
    try:
        for b in BENCHES:
            if args.only and not any(s in b.name for s in args.only):
                continue
            result, skips = run_bench(b, workers, reps, budget, log)
            if skips:
                skipped.append(f"{b.name}: skipped, {' and '.join(skips)}")
            else:
                results.append(result)
    finally:
        for w in workers:
            w.close()
    elapsed = _now() - start

    print(markdown_table(results))
    print()
    print(f"Conditions: {conditions(libs, reps, args.quick, args.clock, elapsed, load_before)}.")
    speedups = cache_speedups(results)
    if speedups:
        met = "met" if speedups.get("jaxprc", 0) >= CACHE_SPEEDUP_TARGET else "**not met**"
        print("\nPersistent compilation cache, a fresh process's first call, no cache / warm cache (medians): "
              + ", ".join(f"{'JAX' if lib == 'jax' else lib} {x:.1f}x" for lib, x in speedups.items())
              + f"; target for jaxprc >= {CACHE_SPEEDUP_TARGET:.0f}x: {met}.")
    extra = notes(results, skipped)
    if extra:
        print("\nNotes:\n" + "\n".join(extra))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"conditions": conditions(libs, reps, args.quick, args.clock, elapsed, load_before),
                       "results": to_json(results), "cache_speedups": speedups, "notes": extra}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
