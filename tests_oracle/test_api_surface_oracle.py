"""The small public modules against JAX: check_grads verdicts, dlpack round trips, error types for the
same mistakes, mesh_utils layouts, stage signatures, monitoring event names."""
import functools
import types
import typing

import jax
import jax.dlpack
import jax.experimental.mesh_utils
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

LIBS = {"jax": (jax, jnp), "jaxprc": (jaxprc, xnp)}


def _both(fn):
    """fn(lib, np-module) for each library: {name: result}."""
    return {name: fn(*mods) for name, mods in LIBS.items()}


def _same(fn):
    got = _both(fn)
    assert got["jax"] == got["jaxprc"], got
    return got["jax"]


# ----------------------------------------------------------------------------- test_util

def _wrong_jvp(lib, m):
    f = lib.custom_jvp(m.sin)
    f.defjvp(lambda p, t: (m.sin(p[0]), 2.0 * m.cos(p[0]) * t[0]))
    return f


GRAD_CASES = {
    "smooth": (lambda lib, m: lambda x: m.sin(x) * x, (np.linspace(-1, 1, 4).astype(np.float32),)),
    "python_scalars": (lambda lib, m: lambda x, y: x * y ** 2, (1.5, 0.7)),
    "pytree": (lambda lib, m: lambda d: {"a": m.tanh(d["p"]) @ d["q"]},
               ({"p": np.ones((2, 3), np.float32), "q": np.arange(3.0, dtype=np.float32)},)),
    "kink": (lambda lib, m: m.abs, (np.array([0.0, 1.0], np.float32),)),
    "wrong_rule": (_wrong_jvp, (np.array([0.3, 1.0], np.float32),)),
    "complex": (lambda lib, m: lambda z: m.sin(z) * z, (np.array([0.3 + 0.2j], np.complex64),)),
    "relu_edge": (lambda lib, m: lambda x: m.maximum(x, 0.0), (np.array([-1.0, 1e-5, 2.0], np.float32),)),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
@pytest.mark.parametrize("modes", [("fwd",), ("rev",)])
def test_check_grads_gives_jax_verdict(case, modes):
    make, args = GRAD_CASES[case]

    def verdict(lib, m):
        tu = jax.test_util if lib is jax else jaxprc.test_util
        try:
            tu.check_grads(make(lib, m), args, order=1, modes=modes)
            return "pass"
        except AssertionError as e:
            return str(e).strip().splitlines()[0]          # names the tolerances it used
    _same(verdict)


def test_check_jvp_and_vjp_with_explicit_tolerances():
    def verdicts(lib, m):
        tu = jax.test_util if lib is jax else jaxprc.test_util
        out = []
        for atol in (None, 1e-8, {np.float32: 0.5}):
            for check, op in ((tu.check_jvp, lib.jvp), (tu.check_vjp, lib.vjp)):
                try:
                    check(m.exp, functools.partial(op, m.exp), (np.float32(0.5),), atol=atol, rtol=atol, eps=1e-2)
                    out.append("pass")
                except AssertionError:
                    out.append("fail")
        return out
    _same(verdicts)


# ----------------------------------------------------------------------------- dlpack

DLPACK_INPUTS = [np.arange(3.0), np.arange(3), np.arange(6, dtype=np.float32).reshape(2, 3),
                 np.ones((0, 3), np.float32), np.array([True, False]), np.array(2.5, np.float32),
                 np.arange(4, dtype=np.uint8), np.array([1 + 2j], np.complex64),
                 np.arange(6, dtype=np.float32).reshape(2, 3).T, np.arange(4, dtype=np.float16)]


@pytest.mark.parametrize("i", range(len(DLPACK_INPUTS)))
def test_from_dlpack_of_numpy_matches_jax(i):
    x = DLPACK_INPUTS[i]

    def imported(lib, m):
        dl = jax.dlpack if lib is jax else jaxprc.dlpack
        y = dl.from_dlpack(x)
        back = np.from_dlpack(y)
        return str(y.dtype), y.shape, y.weak_type, np.asarray(y).tolist(), back.tolist(), y.__dlpack_device__()
    _same(imported)


def test_dlpack_between_the_libraries():
    for x in (xnp.arange(4.0), xnp.ones((2, 2), xnp.bfloat16), xnp.array([1, 2], xnp.int8)):
        y = jax.dlpack.from_dlpack(x)            # jaxprc as the producer, JAX as the consumer
        assert y.dtype == x.dtype and np.asarray(y).tolist() == np.asarray(x).tolist()
        z = jaxprc.dlpack.from_dlpack(y)         # and back
        assert z.dtype == x.dtype and np.asarray(z).tolist() == np.asarray(x).tolist()


def test_is_supported_dtype_matches_jax():
    dtypes = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "float16", "bfloat16",
              "float32", "float64", "complex64", "complex128", "int4", "uint4", "float8_e4m3fn", "float8_e5m2",
              np.float32, bool, int, float]
    _same(lambda lib, m: [(jax.dlpack if lib is jax else jaxprc.dlpack).is_supported_dtype(d) for d in dtypes])


def test_from_dlpack_refuses_the_same_inputs():
    def error(lib, m):
        dl = jax.dlpack if lib is jax else jaxprc.dlpack
        out = []
        for bad in ([1.0], np.float32(1.0), None):
            try:
                dl.from_dlpack(bad)
                out.append("ok")
            except Exception as e:     # noqa: BLE001 -- the type is what is compared
                out.append(type(e).__name__)
        return out
    _same(error)


# ----------------------------------------------------------------------------- errors

MISTAKES = {
    "numpy_of_tracer": lambda lib, m: lib.jit(lambda x: np.asarray(x))(np.ones(3, np.float32)),
    "bool_of_tracer": lambda lib, m: lib.jit(lambda x: 1 if x[0] > 0 else 2)(np.ones(3, np.float32)),
    "int_of_tracer": lambda lib, m: lib.jit(lambda x: int(x[0]))(np.ones(3, np.float32)),
    "index_of_tracer": lambda lib, m: lib.jit(lambda x: [1, 2][x])(np.int32(1)),
    "boolean_mask": lambda lib, m: lib.jit(lambda x: x[x > 0])(np.ones(3, np.float32)),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_same_mistake_raises_what_jax_code_catches(mistake):
    """jaxprc's error is an instance of the class of the same name as JAX's (it may be a subclass)."""
    def raised(lib, m):
        with pytest.raises(Exception) as info:
            MISTAKES[mistake](lib, m)
        return info.value
    got = _both(raised)
    name = type(got["jax"]).__name__
    assert isinstance(got["jaxprc"], getattr(jaxprc.errors, name)), (name, type(got["jaxprc"]))
    for base in ("JAXTypeError", "JAXIndexError"):
        if isinstance(got["jax"], getattr(jax.errors, base)):
            assert isinstance(got["jaxprc"], getattr(jaxprc.errors, base)), base


# Deliberate: jaxprc's are also ConcretizationTypeErrors (a JAXTypeError), which jaxprc raised before.
EXTRA_BASES = {"NonConcreteBooleanIndexError": {"JAXTypeError"}}


def test_errors_module_has_jax_classes_with_jax_bases():
    def bases(lib, m):
        e = lib.errors
        return {n: {b for b in ("JAXTypeError", "JAXIndexError") if issubclass(getattr(e, n), getattr(e, b))}
                - (EXTRA_BASES.get(n, set()) if lib is jaxprc else set())
                for n in dir(e) if isinstance(getattr(e, n), type)}
    _same(bases)
    assert jaxprc.errors.JaxRuntimeError is jax.errors.JaxRuntimeError      # jaxlib's one type


# ----------------------------------------------------------------------------- mesh_utils

def _fake(n, slices=1):
    return [types.SimpleNamespace(id=i, process_index=i * slices // n, slice_index=i * slices // n,
                                  device_kind="cpu", platform="cpu") for i in range(n)]


def test_mesh_utils_layouts_match_jax():
    devs = _fake(8, 2)

    def layouts(lib, m):
        mu = jax.experimental.mesh_utils if lib is jax else jaxprc.experimental.mesh_utils
        ids = lambda mesh: np.vectorize(lambda d: d.id)(mesh).tolist()      # noqa: E731
        out = [ids(mu.create_device_mesh(s, devs)) for s in [(8,), (2, 4), (4, 2), (2, 2, 2), (1, 8, 1)]]
        out.append(ids(mu.create_device_mesh((2, 4), devs[::-1])))
        out += [ids(mu.create_hybrid_device_mesh(s, d, devs)) for s, d in
                [((2, 2), (2, 1)), ((2, 2), (1, 2)), ((4,), (2,)), ((2, 2, 1), (1, 1, 2))]]
        out.append(ids(mu.create_hybrid_device_mesh((1, 4), (1, 2), devs, process_is_granule=True)))
        out.append(mu.create_device_mesh((1,)).shape)
        return out
    _same(layouts)


# ----------------------------------------------------------------------------- stages

def test_stage_signatures_match_jax():
    def describe(lib, m):
        f = lib.jit(lambda x, n, y=1.0: {"a": m.sin(x) * n + y, "b": (x.sum(), x), "weak": y * 2}, static_argnums=1,
                    donate_argnums=0)
        x = np.arange(3.0, dtype=np.float32)
        out = []
        traced = f.trace(x, 2, y=3.0)
        for stage in (traced, traced.lower(), traced.lower().compile()):
            infos = (lib.tree_util if lib is jax else jaxprc.tree_util).tree_leaves(stage.args_info)
            out.append(([(i.shape, str(i.dtype), i.donated) for i in infos], stage.donate_argnums,
                        stage.in_tree.num_leaves, stage.out_tree.num_leaves,
                        [(s.shape, str(s.dtype), s.weak_type) for s in
                         (lib.tree_util if lib is jax else jaxprc.tree_util).tree_leaves(stage.out_info)]))
        out.append(type(traced).__name__)
        out.append(isinstance(f, (jax.stages if lib is jax else jaxprc.stages).Wrapped))
        return out
    _same(describe)


def test_typing_members_match_jax():
    def members(lib, m):
        return sorted(t.__name__ for t in typing.get_args(lib.typing.ArrayLike) if t is not lib.Array)
    _same(members)
    assert [getattr(t, "__name__", t) for t in typing.get_args(jaxprc.typing.DTypeLike)] == [
        getattr(t, "__name__", t) for t in typing.get_args(jax.typing.DTypeLike)]


# ----------------------------------------------------------------------------- monitoring

def test_compile_events_use_jax_names():
    def heard(lib, m):
        names = set()
        mon = lib.monitoring
        listeners = [lambda e, **k: names.add((e, tuple(k.items()))),
                     lambda e, d, **k: names.add((e, tuple(k.items())))]
        mon.register_event_listener(listeners[0])
        mon.register_event_duration_secs_listener(listeners[1])
        try:
            lib.jit(lambda x: x * 5.5 + 0.125)(np.float32(1.0))
        finally:
            mon.unregister_event_listener(listeners[0])
            mon.unregister_event_duration_listener(listeners[1])
        # whether the process uses the cache is reported by its first compile only
        return {n for n in names if "task" not in n[0]}
    got = _both(heard)
    compile_events = {("/jax/core/compile/jaxpr_trace_duration", (("fun_name", "<lambda>"),)),
                      ("/jax/core/compile/jaxpr_to_mlir_module_duration", (("fun_name", "jit(<lambda>)"),)),
                      ("/jax/core/compile/backend_compile_duration", (("fun_name", "jit(<lambda>)"),))}
    assert compile_events <= got["jax"] and compile_events <= got["jaxprc"]
    assert got["jaxprc"] <= got["jax"], got["jaxprc"] - got["jax"]


def test_monitoring_dispatch_matches_jax():
    def calls(lib, m):
        mon, log = lib.monitoring, []
        fns = [lambda e, **k: log.append(("event", e, k)), lambda e, d, **k: log.append(("duration", e, d, k)),
               lambda e, s, t, **k: log.append(("span", e, s, t, k)), lambda e, v, **k: log.append(("scalar", e, v, k))]
        regs = [mon.register_event_listener, mon.register_event_duration_secs_listener,
                mon.register_event_time_span_listener, mon.register_scalar_listener]
        unregs = [mon.unregister_event_listener, mon.unregister_event_duration_listener,
                  mon.unregister_event_time_span_listener, mon.unregister_scalar_listener]
        for r, f in zip(regs, fns):
            r(f)
        mon.record_event("/t/e", a=1)
        mon.record_event_duration_secs("/t/d", 0.25, b="x")
        mon.record_event_time_span("/t/s", 1.0, 2.0)
        mon.record_scalar("/t/v", 3)
        for u, f in zip(unregs, fns):
            u(f)
        try:
            mon.unregister_event_listener(fns[0])
            log.append("unregistered twice")
        except AssertionError:
            log.append("AssertionError")
        return log
    _same(calls)


@pytest.mark.x64
def test_from_dlpack_keeps_64_bit_types_under_x64():
    def imported(lib, m):
        dl = jax.dlpack if lib is jax else jaxprc.dlpack
        sources = (np.arange(3.0), np.arange(3), np.arange(2, dtype=np.uint64), m.arange(3.0))
        return [(str(y.dtype), np.asarray(y).tolist()) for y in map(dl.from_dlpack, sources)]
    _same(imported)


def test_compile_with_compiler_options_like_jax():
    def outcomes(lib, m):
        lowered = lib.jit(lambda x: m.sin(x) * 2).lower(np.float32(0.5))
        out = [float(lowered.compile({"xla_cpu_enable_fast_math": False})(np.float32(0.5)))]
        try:
            lowered.compile({"no_such_option": 1})
        except lib.errors.JaxRuntimeError as e:
            out.append("No such compile option: 'no_such_option'" in str(e))
        return out
    _same(outcomes)


@pytest.mark.x64
@pytest.mark.parametrize("atol", [None, 1e-12])
def test_check_grads_verdict_under_x64(atol):
    def verdict(lib, m):
        tu = jax.test_util if lib is jax else jaxprc.test_util
        try:
            tu.check_grads(lambda x: m.sin(x) * x, (np.linspace(-1, 1, 4),), order=1, atol=atol, rtol=atol)
            return "pass"
        except AssertionError as e:
            return str(e).strip().splitlines()[0]
    _same(verdict)
