"""Long programs split into several executables (compiler/engine/segmenting.py): with the option
lowered to 100 equations, 300-equation programs run as three segments and must behave as
the unsplit program (values, dtypes and weak types, donation, effects order, grad)."""
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.experimental import io_callback
from jaxprc.runtime import DeletedArrayError
from jaxprc.engine.segmenting import SegmentedExecutable, plan

F32 = np.float32
BIG = np.linspace(-1, 1, 100, dtype=F32)       # hoisted: an argument of the executable


@pytest.fixture
def max_eqns():
    """Programs over 100 equations are split (and the default restored after the test)."""
    old = jx.config.jaxprc_max_segment_eqns
    jx.config.update("jaxprc_max_segment_eqns", 100)
    yield 100
    jx.config.update("jaxprc_max_segment_eqns", old)


def chain(x, y, n=150):
    """``2n`` equations, reading ``y`` all along and a big constant in the middle."""
    for i in range(n):
        x = jnp.sin(x) * 1.0001 if i % 2 else x + y
        if i == n // 2 and jnp.ndim(x) == 1:
            x = x + BIG[: x.shape[0]]
    return x


def program(x, y, n):
    z = chain(x, y)
    return {"z": z, "y": y, "again": z, "lit": 3.0, "k": (z * 2).astype(jnp.int32), "n": n}


def _entry(f):
    (entry,) = getattr(f, '_jit', f)._cache.values()
    return entry.executable


def _run_both(fun, *args, **jit_kw):
    """(unsplit results, split results, the split executable), each from a fresh jit."""
    unsplit = jx.jit(fun, **jit_kw)(*args)
    old = jx.config.jaxprc_max_segment_eqns
    jx.config.update("jaxprc_max_segment_eqns", 100)
    try:
        f = jx.jit(lambda *a: fun(*a), **jit_kw)
        split = f(*args)
    finally:
        jx.config.update("jaxprc_max_segment_eqns", old)
    return unsplit, split, _entry(f)


def _same(a, b):
    la, lb = jx.tree_util.tree_leaves(a), jx.tree_util.tree_leaves(b)
    assert jx.tree_util.tree_structure(a) == jx.tree_util.tree_structure(b)
    for u, v in zip(la, lb):
        assert type(u) is type(v)
        assert np.asarray(u).dtype == np.asarray(v).dtype
        assert getattr(u, "weak_type", None) == getattr(v, "weak_type", None)
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_split_program_equals_unsplit():
    x = np.linspace(0, 1, 8, dtype=F32)
    unsplit, split, exe = _run_both(lambda x, y: program(x, y, 7), x, 0.5)
    assert isinstance(exe, SegmentedExecutable) and len(exe.executables) >= 3
    _same(unsplit, split)
    assert split["z"] is not split["again"]
    assert split["z"]._buf is not split["again"]._buf


def test_plan_segments_and_live_values():
    cj = jx.make_jaxpr(chain)(np.zeros(4, F32), F32(0.5))
    n = len(cj.eqns)
    segments, out_slots = plan(cj, 100)
    assert len(segments) == -(-n // 100) and all(len(s.jaxpr.eqns) <= 100 for s in segments)
    assert sum(len(s.jaxpr.eqns) for s in segments) == n
    # y (slot 1) is read by every segment; each later segment reads what the one before made.
    assert all(1 in s.in_slots for s in segments)
    for before, after in zip(segments, segments[1:]):
        assert set(before.out_slots) & set(after.in_slots)
    assert out_slots == segments[-1].out_slots
    assert sum(len(s.jaxpr.consts) for s in segments) == 1


def test_jit_of_split_program_is_cached_and_reruns(max_eqns):
    f = jx.jit(lambda x, y: chain(x, y))
    x = np.arange(4, dtype=F32)
    first = f(x, F32(0.25))
    assert isinstance(_entry(f), SegmentedExecutable)
    np.testing.assert_array_equal(f(x, F32(0.25)), first)
    np.testing.assert_array_equal(f(jnp.asarray(x), F32(0.25)), first)
    assert len(getattr(f, '_jit', f)._cache) == 1


def test_grad_and_vmap_of_split_program():
    x = np.linspace(0, 1, 4, dtype=F32)
    loss = lambda x, y: jnp.sum(chain(x, y, n=60))
    u, s, exe = _run_both(jx.grad(loss, argnums=(0, 1)), x, F32(0.5))
    assert isinstance(exe, SegmentedExecutable)
    _same(u, s)
    u, s, _ = _run_both(jx.vmap(lambda x, y: chain(x, y, n=60), in_axes=(0, None)), np.stack([x, x + 1]), F32(0.5))
    _same(u, s)


def test_donation_as_unsplit(max_eqns):
    f = jx.jit(lambda x, y: chain(x, y), donate_argnums=0)
    x = jnp.arange(4.0)
    out = f(x, F32(0.5))
    assert isinstance(_entry(f), SegmentedExecutable)
    assert x.is_deleted() and not out.is_deleted()
    with pytest.raises(DeletedArrayError, match="deleted"):
        f(x, F32(0.5))
    # No output of the donated argument's type: a warning, and it stays valid (as unsplit).
    g = jx.jit(lambda x, y: jnp.sum(chain(x, y)), donate_argnums=0)
    x = jnp.arange(4.0)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable: f32\[4\]"):
        g(x, F32(0.5))
    assert not x.is_deleted()
    # Returned as is: deleted, and the result is a copy of its own.
    h = jx.jit(lambda x, y: (x, chain(x, y)), donate_argnums=0)
    x = jnp.arange(4.0)
    same, _ = h(x, F32(0.5))
    assert x.is_deleted()
    np.testing.assert_array_equal(same, np.arange(4.0))


def test_effects_run_in_program_order_across_segments(max_eqns):
    seen = []

    def record(tag):
        def cb(v):
            seen.append((tag, float(v)))
            return np.asarray(v, F32)
        return cb

    def f(x, y):
        outs = []
        for k in range(6):
            x = chain(x, y, n=30)
            outs.append(io_callback(record(f"io{k}"), jx.ShapeDtypeStruct((), F32), x, ordered=True))
            jx.debug.callback(lambda v, k=k: seen.append((f"dbg{k}", float(v))), x)
        return x + sum(outs)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unsplit = jx.jit(f)(F32(0.1), F32(0.5))
        first = list(seen)
        seen.clear()
        g = jx.jit(lambda x, y: f(x, y))
        split = g(F32(0.1), F32(0.5))
    assert isinstance(_entry(g), SegmentedExecutable) and len(_entry(g).executables) >= 3
    # Ordered callbacks in program order; unordered ones all run, in an order XLA picks.
    assert [t for t, _ in seen if t.startswith("io")] == [f"io{k}" for k in range(6)]
    assert sorted(seen) == sorted(first) and len(seen) == 12
    _same(unsplit, split)


def test_compiled_ahead_of_time(max_eqns):
    compiled = jx.jit(chain).lower(np.zeros(4, F32), F32(0.5)).compile()
    assert compiled.as_text().count("HloModule") == len(compiled.memory_analysis()) == 4   # 301 equations
    assert compiled.cost_analysis()["flops"] > 0
    np.testing.assert_array_equal(compiled(np.zeros(4, F32), F32(0.5)), jx.jit(chain)(np.zeros(4, F32), F32(0.5)))


@pytest.mark.parametrize("value", [-1, 2.5, "many", True])
def test_bad_option_is_named(value):
    old = jx.config.jaxprc_max_segment_eqns
    jx.config.update("jaxprc_max_segment_eqns", value)
    try:
        with pytest.raises(ValueError, match="jaxprc_max_segment_eqns must be a positive int"):
            jx.jit(chain)(np.zeros(2, F32), F32(0.5))
    finally:
        jx.config.update("jaxprc_max_segment_eqns", old)


def test_option_off_compiles_whole(max_eqns):
    jx.config.update("jaxprc_max_segment_eqns", 0)
    f = jx.jit(lambda x, y: chain(x, y))
    f(np.zeros(2, F32), F32(0.5))
    assert not isinstance(_entry(f), SegmentedExecutable)


def test_nested_jit_counts_with_its_callee():
    inner = jx.jit(lambda x, y: chain(x, y, n=60))
    outer = lambda x, y: jx.grad(lambda x: jnp.sum(inner(x, y)))(x) + inner(x, y)
    cj = jx.make_jaxpr(outer)(np.zeros(4, F32), F32(0.5))
    assert len(cj.eqns) < 100
    u, s, exe = _run_both(outer, np.linspace(0, 1, 4, dtype=F32), F32(0.5))
    assert isinstance(exe, SegmentedExecutable) and len(exe.executables) >= 3
    _same(u, s)


def test_scaling_tool_runs_split_programs(monkeypatch):
    """tools/scaling.py's run of one size, split in segments of 10 (its subprocess inherits the option)."""
    from jaxprc.tools import scaling
    monkeypatch.setenv("JAXPRC_MAX_SEGMENT_EQNS", "10")
    times = scaling.run_size(40, ["make_jaxpr", "parse", "jit"], timeout=120)
    assert sorted(times) == ["jit", "make_jaxpr", "parse"] and all(c >= 0 and w > 0 for c, w in times.values())
    assert scaling.exponent(10, 1.0, 100, 10.0) == pytest.approx(1.0)


@pytest.mark.skipif(os.environ.get("JAXPRC_BIG_PROGRAM_TESTS") != "1",
                    reason="takes 1-2 minutes on 2 cores; JAXPRC_BIG_PROGRAM_TESTS=1 runs it "
                           "(or: python -m jaxprc.tools.scaling --sizes 10000,50000 --steps jit)")
def test_jit_of_50k_equation_chain():
    """The default option: a 50,000-equation chain compiles (in 10 segments) and runs, in a fresh
    process, with the value numpy computes (XLA alone dies of SIGSEGV on it)."""
    from jaxprc.tools import scaling
    t = time.perf_counter()
    times = scaling.run_size(50000, ["jit"], timeout=600)
    assert "jit" in times, times
    print(f"50k chain: jit {times['jit'][1]:.1f} s wall, whole process {time.perf_counter() - t:.1f} s")


def test_float0_constant_empty_and_x64_results():
    grads = jx.grad(lambda x, i: jnp.sum(chain(x, 0.5, n=60)) * i, argnums=(0, 1), allow_int=True)
    u, s, exe = _run_both(lambda x, i: (grads(x, i), BIG, jnp.zeros((0,))), np.linspace(0, 1, 4, dtype=F32), 3)
    assert isinstance(exe, SegmentedExecutable) and exe.dataless_outputs == [1]
    _same(u, s)
    jx.config.update("jax_enable_x64", True)
    try:
        for x in (np.linspace(0, 1, 4), np.zeros((0, 3))):
            u, s, exe = _run_both(lambda x: chain(x, 0.5, n=60), x)
            assert isinstance(exe, SegmentedExecutable) and s.dtype == np.float64
            _same(u, s)
    finally:
        jx.config.update("jax_enable_x64", False)


def test_segments_returning_many_values_compile_unfused():
    """A segment returning more than MAX_FUSED_OUTPUTS values (a gradient's forward segments
    return their residuals) compiles without XLA's fusion, whose time grows with the square of
    the number of outputs of one chain; the results stay those of the unsplit program."""
    def every_value(x):
        outs = []
        for _ in range(150):
            x = jnp.sin(x) * 1.0001
            outs.append(x)
        return outs
    x = np.linspace(0, 1, 4, dtype=F32)
    old = jx.config.jaxprc_max_segment_eqns
    jx.config.update("jaxprc_max_segment_eqns", 200)
    try:
        f = jx.jit(lambda x: every_value(x))
        split = f(x)
    finally:
        jx.config.update("jaxprc_max_segment_eqns", old)
    exe = _entry(f)
    outputs = [len(s.out_slots) for s in exe.segments]
    assert outputs[0] > 64 and outputs[-1] <= 64, outputs
    first, last = exe.executables[0].as_text(), exe.executables[-1].as_text()
    assert "fused_computation" not in first and "fused_computation" in last   # one op per kernel
    for got, want in zip(split, every_value(x)):           # eager: one executable per operation
        np.testing.assert_allclose(got, want, rtol=1e-6)
