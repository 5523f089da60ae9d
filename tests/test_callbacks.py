"""Host callbacks running: debug.print output and order (jit, scan, while, cond, vmap, grad,
nested jit), pure_callback values under jit/vmap/custom_jvp, io_callback order across calls,
what DCE keeps at run time, and the error paths (wrong results, exceptions, unbound callbacks)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.experimental import io_callback
from jaxprc.ir import CallbackUnavailableError, parse

F32 = np.float32


def S(shape=(), dtype=F32):
    return jx.ShapeDtypeStruct(shape, dtype)


def lines(capsys):
    return capsys.readouterr().out.splitlines()


# ------------------------------------------------------------ debug.print

def _two_prints(x):
    jx.debug.print("x = {}", x)
    y = jnp.sin(x)
    jx.debug.print("y = {y:.3f} and {}", 7, y=y[0], ordered=True)
    return y * 2


_two_prints_jit = jx.jit(_two_prints)


def test_print_eager_and_jit(capsys):
    x = jnp.arange(3.0)
    _two_prints(x)
    eager = lines(capsys)
    np.testing.assert_allclose(_two_prints_jit(x), 2 * np.sin(np.arange(3.0)), rtol=1e-6)
    assert lines(capsys) == eager == ["x = [0. 1. 2.]", "y = 0.000 and 7"]
    _two_prints_jit(x + 1)                      # cached: the new values print
    assert lines(capsys) == ["x = [1. 2. 3.]", "y = 0.841 and 7"]


def test_print_without_placeholders_and_format_errors(capsys):
    jx.jit(lambda x: jx.debug.print("values:", x, 2, skip_format_check=True))(jnp.float32(1.5))
    assert lines(capsys) == ["values: 1.5 2"]
    with pytest.raises(ValueError, match="Unused positional arguments"):
        jx.debug.print("values:", 1)
    with pytest.raises(ValueError, match="Unused positional arguments"):
        jx.debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match="Unused keyword arguments.*f-string"):
        jx.debug.print("x", x=1)
    jx.debug.print(ordered=True)("two-call {a}", a=jnp.int32(3))
    assert lines(capsys) == ["two-call 3"]


def test_print_under_scan_while_cond_in_order(capsys):
    def f(xs):
        def body(c, x):
            jx.debug.print("scan c={} x={}", c, x, ordered=True)
            return c + x, c
        c, _ = lax.scan(body, 0.0, xs)

        def wbody(i):
            jx.debug.print("while {}", i, ordered=True)
            return i + 1
        i = lax.while_loop(lambda i: i < 2, wbody, 0)
        lax.cond(c > 0, lambda: jx.debug.print("cond true {}", c, ordered=True),
                 lambda: jx.debug.print("cond false", ordered=True))
        jx.debug.print("end {}", i, ordered=True)
        return c
    jx.jit(f)(jnp.arange(3.0))
    assert lines(capsys) == ["scan c=0.0 x=0.0", "scan c=0.0 x=1.0", "scan c=1.0 x=2.0",
                             "while 0", "while 1", "cond true 3.0", "end 2"]


def test_print_in_nested_jit_in_order(capsys):
    inner = jx.jit(lambda x: (jx.debug.print("inner {}", x, ordered=True), x + 1)[1])

    @jx.jit
    def outer(x):
        jx.debug.print("before {}", x, ordered=True)
        y = inner(inner(x))
        jx.debug.print("after {}", y, ordered=True)
        return y
    outer(1.0)
    assert lines(capsys) == ["before 1.0", "inner 1.0", "inner 2.0", "after 3.0"]


def test_print_under_vmap_prints_each_element(capsys):
    jx.vmap(lambda x, y: jx.debug.print("{} {}", x, y), in_axes=(0, None))(jnp.arange(3), 5)
    assert lines(capsys) == ["0 5", "1 5", "2 5"]
    jx.jit(jx.vmap(lambda x: jx.debug.print("row {}", x, ordered=True)))(jnp.arange(4.0).reshape(2, 2))
    assert lines(capsys) == ["row [0. 1.]", "row [2. 3.]"]


def test_print_under_grad_prints_primal_values_once(capsys):
    def f(x):
        jx.debug.print("f at {}", x)
        return jnp.sin(x) * x
    g = jx.grad(f)(1.0)
    assert lines(capsys) == ["f at 1.0"]
    assert jx.jit(jx.grad(f))(1.0) == g
    assert lines(capsys) == ["f at 1.0"]
    jx.jit(jx.vmap(jx.grad(f)))(jnp.arange(2.0))
    assert lines(capsys) == ["f at 0.0", "f at 1.0"]
    _, t = jx.jvp(f, (2.0,), (1.0,))
    assert lines(capsys) == ["f at 2.0"]


def test_debug_callback_gets_arrays_and_static_values():
    seen = []
    jx.jit(lambda x: jx.debug.callback(lambda a, tag, b=None: seen.append((np.asarray(a), tag, b)),
                                       x, "tag", b=x * 2))(jnp.arange(2.0))
    (a, tag, b), = seen
    np.testing.assert_array_equal(a, [0.0, 1.0])
    np.testing.assert_array_equal(b, [0.0, 2.0])
    assert tag == "tag"


# ----------------------------------------------------------- pure_callback

def _host_sin(x):
    return np.sin(np.asarray(x))


@jx.custom_jvp
def host_sin(x):
    return jx.pure_callback(_host_sin, S(x.shape, x.dtype), x, vmap_method="sequential")


host_sin.defjvp(lambda p, t: (host_sin(p[0]), jnp.cos(p[0]) * t[0]))


def test_pure_callback_jit_and_grad_through_custom_jvp():
    x = jnp.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(jx.jit(host_sin)(x), np.sin(np.linspace(-1, 1, 5)), rtol=1e-6)
    np.testing.assert_allclose(jx.jit(jx.grad(lambda v: host_sin(v).sum()))(x), np.cos(np.asarray(x)),
                               rtol=1e-6)
    np.testing.assert_allclose(jx.vmap(jx.grad(host_sin))(x), np.cos(np.asarray(x)), rtol=1e-6)
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        jx.grad(lambda v: jx.pure_callback(_host_sin, S(), v))(1.0)


@pytest.mark.parametrize("method,shapes", [
    ("sequential", [((), ())] * 4), ("sequential_unrolled", [((), ())] * 4),
    ("expand_dims", [((4,), (1,))]), ("broadcast_all", [((4,), (4,))]), ("legacy_vectorized", [((4,), ())])])
def test_pure_callback_vmap_methods(method, shapes):
    calls = []

    def add(x, y):
        calls.append((np.shape(x), np.shape(y)))
        return np.asarray(x) + np.asarray(y)

    def f(x, y):
        return jx.pure_callback(add, S(np.shape(x)), x, y, vmap_method=method)
    out = jx.jit(jx.vmap(f, in_axes=(0, None)))(jnp.arange(4.0), jnp.float32(10.0))
    np.testing.assert_allclose(out, np.arange(4.0) + 10)
    assert calls == shapes


def test_pure_callback_vmap_needs_a_method_and_checks_it():
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        jx.vmap(lambda x: jx.pure_callback(_host_sin, S(), x))(jnp.arange(2.0))
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        jx.pure_callback(_host_sin, S(), 1.0, vmap_method="fast")


def test_pure_callback_pytrees_and_kwargs():
    def f(d, scale=1.0):
        return {"s": np.float32(d["a"].sum() * scale), "p": (np.asarray(d["b"]) * 2,)}
    out = jx.jit(lambda a, b: jx.pure_callback(f, {"s": S(), "p": (S((2,), np.int32),)}, {"a": a, "b": b},
                                               scale=2.0))(jnp.ones(3), jnp.arange(2))
    assert float(out["s"]) == 6.0 and out["p"][0].tolist() == [0, 2]


def test_unused_pure_callback_is_removed_io_callback_and_prints_are_kept(capsys):
    calls = []

    def note(tag):
        def cb(x):
            calls.append(tag)
            return np.float32(x)
        return cb

    @jx.jit
    def f(x):
        jx.pure_callback(note("pure"), S(), x)
        io_callback(note("io"), S(), x)
        jx.debug.print("kept")
        return x
    f(1.0)
    f(2.0)
    assert calls == ["io", "io"] and lines(capsys) == ["kept", "kept"]


# ------------------------------------------------------------- io_callback

def test_ordered_io_callback_runs_in_call_order():
    log = []

    def record(x):
        log.append(int(x))
        return np.int32(x)
    first = jx.jit(lambda x: io_callback(record, S((), np.int32), x, ordered=True))
    second = jx.jit(lambda x: io_callback(record, S((), np.int32), x * 10, ordered=True) + 1)
    for i in range(6):
        (first if i % 2 else second)(i)
    jx.effects_barrier()
    assert log == [0, 1, 20, 3, 40, 5]


def test_io_callback_vmap_and_jvp_rules():
    out = jx.vmap(lambda x: io_callback(_host_sin, S(), x))(jnp.arange(3.0))
    np.testing.assert_allclose(out, np.sin(np.arange(3.0)), rtol=1e-6)
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        jx.vmap(lambda x: io_callback(_host_sin, S(), x, ordered=True))(jnp.arange(3.0))
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        jx.jvp(lambda x: io_callback(_host_sin, S(), x), (1.0,), (1.0,))


@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_under_vmap_of_cond_and_while_is_refused_as_jax(ordered):
    io = lambda x: io_callback(_host_sin, S(), x, ordered=ordered)
    xs, preds = jnp.arange(2.0), jnp.array([True, False])
    with pytest.raises(NotImplementedError, match="(?m)^IO effect not supported in vmap-of-cond.$"):
        jx.vmap(lambda p, x: lax.cond(p, io, lambda y: y, x))(preds, xs)
    with pytest.raises(NotImplementedError, match="(?m)^IO effect not supported in vmap-of-cond.$"):
        jx.vmap(lambda i, x: lax.switch(i, [io, jnp.cos], x))(jnp.array([0, 1]), xs)
    loop = jx.vmap(lambda x: lax.while_loop(lambda c: c < 3, lambda c: io(c) + 1, x))
    want = ("(?m)^Ordered IO effects not supported in vmap.$" if ordered else
            "(?m)^Unordered IO effects not supported in while_loop with batched predicate$")
    with pytest.raises(Exception, match=want):
        loop(xs)
    # a predicate the batch does not change runs the callback per step, as JAX does
    if not ordered:
        out = jx.vmap(lambda x: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, io(c[1])), (0, x)))(xs)
        np.testing.assert_allclose(out[1], np.sin(np.sin(np.arange(2.0))), rtol=1e-6)


# ------------------------------------------------------------------ errors

def test_wrong_results_are_clear_errors_never_garbage():
    def run(result, want):
        return jx.jit(lambda x: jx.pure_callback(lambda _: result, want, x))(jnp.ones(3))
    with pytest.raises(jx.XlaRuntimeError, match=r"returned result 0 of shape \(2,\), expected shape \(3,\)") as e:
        run(np.zeros(2, F32), S((3,)))
    assert "<lambda>" in str(e.value) and isinstance(e.value.__cause__, RuntimeError)
    with pytest.raises(jx.XlaRuntimeError, match="dtype int32, expected dtype float32"):
        run(np.zeros(3, np.int32), S((3,)))
    with pytest.raises(jx.XlaRuntimeError, match=r"returned 3 result\(s\), expected 1"):
        run([1.0, 2.0, 3.0], S((3,)))        # a list is a pytree of three leaves, as in JAX
    np.testing.assert_array_equal(run(np.zeros(3), S((3,))), np.zeros(3))   # float64 -> float32
    assert float(run(2.5, S())) == 2.5                                       # a Python scalar
    assert run(np.arange(6, dtype=F32).reshape(2, 3).T, S((3, 2))).tolist() == [[0, 3], [1, 4], [2, 5]]
    with pytest.raises(RuntimeError, match="expected shape"):                # eager: at once
        jx.pure_callback(lambda _: np.zeros(2, F32), S((3,)), jnp.ones(3))
    with pytest.raises(ValueError, match="64-bit types"):
        jx.pure_callback(_host_sin, S((), np.float64), 1.0)


def test_an_exception_in_a_callback_surfaces_with_the_original_attached():
    class Boom(Exception):
        pass

    def fail(x):
        raise Boom("kaput")
    f = jx.jit(lambda x: io_callback(fail, S(), x, ordered=True))
    for _ in range(2):                       # the process (and the ordered chain) stays usable
        with pytest.raises(jx.XlaRuntimeError, match="raised Boom: kaput") as e:
            f(1.0)
        assert isinstance(e.value.__cause__, Boom)
        assert float(jx.jit(lambda x: io_callback(_host_sin, S(), x, ordered=True))(0.0)) == 0.0
    with pytest.raises(Boom):
        io_callback(fail, S(), 1.0)          # eager: the exception itself


def test_parsed_program_needs_its_callbacks_bound(tmp_path):
    cj = jx.make_jaxpr(lambda x: jx.pure_callback(_host_sin, S(), x) + 1.0)(0.5)
    text = str(cj)
    with pytest.raises(CallbackUnavailableError, match="'_host_sin' have no Python function"):
        jx.jit(jx.jaxpr_as_fun(parse(text)))(0.5)
    bound = parse(text, callbacks={"_host_sin": lambda x: [np.sin(np.asarray(x))]})
    assert abs(float(jx.jit(jx.jaxpr_as_fun(bound))(0.5)[0]) - (np.sin(0.5) + 1)) < 1e-6
    # the command line: jaxprc run --callback NAME=FILE.py:FUNC
    (tmp_path / "prog.jaxpr").write_text(text)
    (tmp_path / "fns.py").write_text(textwrap.dedent("""\
        import numpy as np
        def host_sin(x):
            return np.sin(np.asarray(x))
        """))
    cmd = [sys.executable, "-m", "jaxprc", "run", str(tmp_path / "prog.jaxpr"), "--input", "0.5"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode != 0 and "CallbackUnavailableError" in out.stderr
    out = subprocess.run(cmd + ["--callback", f"_host_sin={tmp_path / 'fns.py'}:host_sin"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "out0:f32[] = 1.4794255"


def test_ordered_effects_with_donation(capsys):
    f = jx.jit(lambda x: (jx.debug.print("d {}", x[0], ordered=True), x * 2)[1], donate_argnums=0)
    x = jnp.arange(3.0)
    assert f(x).tolist() == [0.0, 2.0, 4.0] and x.is_deleted()
    assert lines(capsys) == ["d 0.0"]


# --------------------------------------------------------------- breakpoint

def _stops(x):
    y = jnp.sin(x)
    label = "here"
    jx.debug.breakpoint()
    return y * 2


def test_breakpoint_inspects_the_running_values(capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO("p y\npp label\ny.sum() > 0\nw\nu\np x\nd\nbad\nc\n"))
    jx.jit(lambda x: _stops(x + 1.0))(jnp.arange(2.0))
    out = capsys.readouterr().out
    assert out.startswith("Entering jdb:\n(jdb) Array([0.84147096, 0.9092974 ], dtype=float32)\n"
                          "(jdb) 'here'\n(jdb) Array(True, dtype=bool)\n(jdb) Traceback:")
    assert "(jdb) Array([0., 1.], dtype=float32)" in out       # x of the calling frame
    assert "->      jx.debug.breakpoint()" in out and "*** NameError: name 'bad' is not defined" in out
    monkeypatch.setattr(sys, "stdin", io.StringIO("p x\nc\np x\nc\n"))
    jx.vmap(lambda x: (jx.debug.breakpoint(), x)[1])(jnp.arange(2))
    assert capsys.readouterr().out.count("Entering jdb:") == 2


def test_breakpoint_with_a_token_runs_once_the_token_is_computed(capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO("p x\nc\n"))

    @jx.jit
    def f(x):
        y = jx.debug.breakpoint(token=x * 2)
        return y + 1
    assert f(jnp.float32(1.0)) == 3.0
    assert capsys.readouterr().out == "Entering jdb:\n(jdb) Array(1., dtype=float32)\n(jdb) "
    with pytest.raises(ValueError, match="mutually exclusive"):
        jx.debug.breakpoint(token=1.0, ordered=True)
