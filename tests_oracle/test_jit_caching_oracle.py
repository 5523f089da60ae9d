"""What jit's caches do and log, against JAX: traces and compiles counted the same, and the same
log_compiles and explain_cache_misses messages (less times, ids and source columns)."""
import functools
import logging
import re

import jax
import numpy as np

import jaxprc


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())


def _logged(lib, run) -> list[str]:
    handler = _Messages()
    logger = logging.getLogger(lib.__name__)
    logger.addHandler(handler)
    try:
        run(lib)
    finally:
        logger.removeHandler(handler)
    # the same facts, less durations, object ids and the caller's location (JAX finds none in a test)
    return [re.sub(r"^TRACING CACHE MISS at .*:\n", "TRACING CACHE MISS:\n",
                   re.sub(r" in [0-9.]+ sec$", "", re.sub(r"id=\d+", "id", m))) for m in handler.messages]


def test_log_compiles_as_jax():
    def add(x, y):
        return x + y

    def run(lib):
        with lib.log_compiles():
            lib.jit(add)(1.0, np.ones(3, np.float32))
    assert [m for m in _logged(jaxprc, run) if "add" in m] == [m for m in _logged(jax, run) if "add" in m]


def test_explain_cache_misses_as_jax():
    def scale(x, factor):
        return x * factor

    def run(lib):
        f = lib.jit(scale)
        with lib.explain_cache_misses():
            f(1.0, 2.0)
            f(np.float32(1.0), 2.0)
    assert _logged(jaxprc, run) == _logged(jax, run)


def test_traces_counted_as_jax():
    def counts(lib):
        traces = {"inner": 0, "outer": 0, "grad": 0}

        @lib.jit
        def inner(x):
            traces["inner"] += 1
            return lib.numpy.sin(x)

        @functools.partial(lib.jit, static_argnums=1)
        def outer(x, n):
            traces["outer"] += 1
            return inner(x) * n

        def f(x):
            traces["grad"] += 1
            return lib.numpy.sin(x) * x
        g = lib.grad(lib.jit(f))
        for n in (2, 3, 4):
            outer(1.0, n)
            g(float(n))
        return traces
    assert counts(jaxprc) == counts(jax)
