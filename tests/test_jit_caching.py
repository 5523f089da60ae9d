"""jit's caches and what they log, as JAX's: a nested jit traced once however often its caller
is, differentiated jits compiled once, clear_cache/clear_caches, log_compiles' messages and
explain_cache_misses' reasons."""
import functools
import logging

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp


def test_a_nested_jit_is_traced_once_when_its_caller_is_traced_again():
    traces = {"inner": 0, "outer": 0}

    @jx.jit
    def inner(x):
        traces["inner"] += 1
        return jnp.sin(x)

    @functools.partial(jx.jit, static_argnums=1)
    def outer(x, n):
        traces["outer"] += 1
        return inner(x) * n
    for n in (2, 3, 4):
        assert float(outer(1.0, n)) == pytest.approx(np.sin(1.0) * n, rel=1e-6)
    assert traces == {"inner": 1, "outer": 3}


def _compiles(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling ")]


def test_differentiated_jits_compile_once(caplog):
    traces = []

    def f(x):
        traces.append(1)
        return jnp.sin(x) * x
    g = jx.grad(jx.jit(f))
    with jx.log_compiles(), caplog.at_level(logging.WARNING, logger="jaxprc"):
        for i in range(3):
            assert float(g(float(i))) == pytest.approx(np.cos(i) * i + np.sin(i), rel=1e-5, abs=1e-6)
        assert len(traces) == 1
        jg = jx.jit(jx.grad(f))
        for i in range(3):
            jg(float(i))
    assert len(_compiles(caplog)) == 1


def test_clear_cache_and_clear_caches_compile_again(caplog):
    f = jx.jit(lambda x: x * 2)
    f(1.0)
    f(jnp.ones(2))
    assert f._cache_size() == 2
    f.clear_cache()
    assert f._cache_size() == 0
    with jx.log_compiles(), caplog.at_level(logging.WARNING, logger="jaxprc"):
        assert float(f(3.0)) == 6.0
        jx.clear_caches()
        assert float(f(4.0)) == 8.0
        assert float(f(5.0)) == 10.0
    assert len(_compiles(caplog)) == 2


def test_log_compiles_says_each_step_in_jax_words(caplog):
    def add(x, y):
        return x + y
    with jx.log_compiles(), caplog.at_level(logging.WARNING, logger="jaxprc"):
        jx.jit(add)(1.0, np.ones(3, np.float32))
    messages = [r.getMessage() for r in caplog.records if "add" in r.getMessage()]
    assert [m.split(" in ")[0] if m.startswith("Finished") else m for m in messages] == [
        "Finished tracing add for jit",
        "Compiling jit(add) with global shapes and types (ShapedArray(float32[], weak_type=True), "
        "ShapedArray(float32[3])). Argument mapping: (UnspecifiedValue, UnspecifiedValue).",
        "Finished jaxpr to MLIR module conversion jit(add)",
        "Finished XLA compilation of jit(add)"]
    assert all(m.endswith(" sec") for m in messages if m.startswith("Finished"))
    assert all(r.levelno == logging.WARNING for r in caplog.records if "add" in r.getMessage())


def test_without_log_compiles_the_steps_are_debug_messages(caplog):
    with caplog.at_level(logging.DEBUG, logger="jaxprc"):
        jx.jit(lambda x: x - 1)(2.0)
    levels = {r.levelno for r in caplog.records if "<lambda>" in r.getMessage()}
    assert levels == {logging.DEBUG}


def test_explain_cache_misses_names_arguments_and_weak_types(caplog):
    def scale(x, factor):
        return x * factor
    f = jx.jit(scale)
    with jx.explain_cache_misses(), caplog.at_level(logging.WARNING, logger="jaxprc"):
        f(1.0, 2.0)
        f(np.float32(1.0), 2.0)
        f(jnp.ones(2, jnp.int32), 2.0)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert messages[1].endswith("different input types:\n  * at x, now f32[]{weak_type=False} and before "
                                "f32[]{weak_type=True}https://docs.jax.dev/en/latest/type_promotion.html#weak-types")
    assert messages[2].endswith("  * at x, now i32[2] and before f32[]")
