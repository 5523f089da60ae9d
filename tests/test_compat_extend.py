"""jaxprc.compat (the import hook, in subprocesses: it must not touch this process's modules),
jaxprc.extend, jaxprc.api_util, and the public API points JAX libraries rely on."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import api_util, lax
from jaxprc.experimental.sparse import BCOO
from jaxprc.extend import core as jex_core
from jaxprc.extend import linear_util as lu
from jaxprc.ir.tree_util import tree_flatten


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


def test_import_jax_resolves_to_jaxprc_modules():
    proc = _python("""
        import jaxprc.compat; jaxprc.compat.install()
        import jax, jax.numpy, jaxprc
        from jax.extend.core import Primitive
        from jax._src.core import ShapedArray
        assert jax.numpy is jaxprc.numpy and jax.lax is jaxprc.lax and jax.jit is jaxprc.jit
        assert jax.extend.core is jaxprc.extend.core and Primitive is jaxprc.extend.core.Primitive
        assert ShapedArray is jaxprc.core.ShapedArray
        assert jax.__version__ == jaxprc.__jax_version__ == "0.10.2" and jax.__version_info__ == (0, 10, 2)
        assert jaxprc.numpy.__spec__.name == "jaxprc.numpy"      # jaxprc's modules keep their own spec
        try:
            from jax._src.core import no_such_internal
        except ImportError as e:
            assert "does not provide" in str(e.__cause__ or e) or "no_such_internal" in str(e)
        else:
            raise AssertionError("an internal outside the table imported")
        print(float(jax.grad(lambda x: jax.numpy.sin(x) * 2)(0.0)))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2.0"


def test_backends_started_as_chex_reads_them():
    """chex's set_n_cpu_devices reads jax._src.xla_bridge._backends without importing the module
    (JAX imports it): empty until the first computation, then the CPU client; and asks for the
    devices of a backend by name."""
    proc = _python("""
        import jaxprc.compat; jaxprc.compat.install()
        import jax
        before = dict(jax._src.xla_bridge._backends)
        jax.numpy.ones(2).block_until_ready()
        after = jax._src.xla_bridge._backends
        print(before, list(after), after["cpu"] is jax.extend.backend.get_backend(), jax.devices("cpu") == jax.devices())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{} ['cpu'] True True"


def test_install_refuses_once_real_jax_is_imported():
    proc = _python("""
        import sys, types
        sys.modules["jax"] = types.ModuleType("jax")   # stands for the real package
        import jaxprc.compat
        try:
            jaxprc.compat.install()
        except RuntimeError as e:
            print("refused:", "already imported" in str(e))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused: True"


def test_python_m_compat_runs_a_script(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys, jax\nprint(jax.numpy.arange(3).sum(), sys.argv[1:])\n")
    proc = subprocess.run([sys.executable, "-m", "jaxprc.compat", str(script), "a", "b"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3 ['a', 'b']"


def test_internals_table_names_a_library_for_every_entry():
    from jaxprc.compat import INTERNALS
    for name, (target, library) in INTERNALS.items():
        assert name.startswith("jax._src.") and library, name


def test_extend_core_is_the_ir():
    from jaxprc.ir import core as ir_core
    assert jex_core.Primitive is ir_core.Primitive and jex_core.JaxprEqn is ir_core.Eqn
    assert jex_core.primitives.add_p is lax.add_p
    assert jex_core.primitives.closed_call_p is jex_core.primitives.jit_p
    aval = jx.ShapedArray((4, 3), np.float32)
    assert jex_core.mapped_aval(3, 1, aval) == jx.ShapedArray((4,), np.float32)
    assert jex_core.unmapped_aval(5, 0, aval) == jx.ShapedArray((5, 4, 3), np.float32)
    assert jex_core.mapped_aval(3, None, aval) is aval
    with pytest.raises(ValueError):
        jex_core.mapped_aval(2, 0, aval)
    assert jex_core.valid_jaxtype(1.0) and jex_core.valid_jaxtype(np.zeros(2)) and not jex_core.valid_jaxtype("a")
    assert jx.ShapedArray((2,), np.int32).to_tangent_aval().dtype == jx.dtypes.float0
    assert jex_core.primal_dtype_to_tangent_dtype(np.float16) == np.float16


def test_opaque_trace_state_tells_traces_apart():
    outside = jex_core.get_opaque_trace_state()
    seen = []
    jx.jit(lambda x: seen.append(jex_core.get_opaque_trace_state()) or x)(1.0)
    assert outside == jex_core.get_opaque_trace_state() and seen[0] != outside


def test_linear_util_and_api_util_flatten_fun():
    args = ((1.0, {"a": 2.0}), {"k": 3.0})
    leaves, in_tree = tree_flatten(args)
    f = lu.wrap_init(lambda x, d, k: {"s": x + d["a"] * k}, debug_info=api_util.debug_info("t", len, (), {}))
    flat, out_tree = api_util.flatten_fun(f, in_tree)
    assert flat.call_wrapped(*leaves) == [7.0]
    assert out_tree().num_leaves == 1


def test_old_style_transformation_with_aux():
    @lu.transformation_with_aux
    def double_and_count(n, *args):
        out = yield args, {}
        yield out * 2, n
    g, aux = double_and_count(lu.wrap_init(lambda x: x + 1), 7)
    assert g.call_wrapped(2) == 6 and aux() == 7


def test_tracers_and_keys_are_arrays():
    seen = []
    jx.jit(lambda x: seen.append(isinstance(x, jx.Array)) or x)(1.0)
    jx.grad(lambda x: seen.append(isinstance(x, jx.Array)) or x)(1.0)
    assert seen == [True, True]
    assert isinstance(jnp.zeros(2), jx.Array) and isinstance(jx.random.key(0), jx.Array)
    assert not isinstance(np.zeros(2), jx.Array)


def test_jit_options_libraries_pass():
    def f(x, y):
        return x * y
    g = jx.jit(f, inline=True, keep_unused=True, donate_argnames="y", backend=jx.default_backend())
    assert float(g(2.0, jnp.float32(3.0))) == 6.0
    h = jx.jit(f, compiler_options={"xla_cpu_enable_fast_math": False})
    assert float(h(2.0, 4.0)) == 8.0
    with pytest.raises(RuntimeError, match="not in the list of known backends"):
        jx.jit(f, backend="tpu")


def test_cond_five_argument_form():
    out = lax.cond(True, 2.0, lambda x: x * 3, 5.0, lambda y: y - 1)
    assert float(out) == 6.0
    assert float(jx.jit(lambda p: lax.cond(p, 2.0, lambda x: x * 3, 5.0, lambda y: y - 1))(False)) == 4.0


def test_bcoo_against_dense():
    m = np.array([[0, 1.5, 0], [2, 0, -3], [0, 0, 0]], np.float32)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    s = BCOO.fromdense(m)
    assert s.nse == 3
    np.testing.assert_array_equal(s.todense(), m)
    np.testing.assert_allclose(s @ v, m @ v)
    np.testing.assert_allclose(v @ s, v @ m)
    np.testing.assert_allclose((2.0 * s).T.todense(), 2 * m.T)
    np.testing.assert_allclose(jx.jit(lambda s, v: s @ v)(s, v), m @ v)
    # d(sum(S v))/d data_i = v[col_i]
    grad = jx.grad(lambda d: jnp.sum(BCOO((d, s.indices), shape=s.shape) @ v))(s.data)
    np.testing.assert_allclose(grad, v[np.asarray(s.indices)[:, 1]])


def test_canonicalize_dtype_handlers_make_a_value_type():
    from jaxprc.interpreters import xla
    from jaxprc.ir.tracing import pytype_aval_mappings

    class Box:      # an array-like a library registers, as TFP does its Variable
        def __init__(self, value):
            self.value = np.asarray(value)

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.value, dtype)
    try:
        xla.canonicalize_dtype_handlers[Box] = lambda b: b.value
        out = jx.jit(lambda x: x * 2)(Box(np.arange(3.0)))    # float64 canonicalized to float32
        assert out.dtype == np.float32 and list(out) == [0.0, 2.0, 4.0]
    finally:
        del pytype_aval_mappings[Box], xla.canonicalize_dtype_handlers[Box]
    assert xla.canonicalize_dtype_handlers[np.ndarray](np.ones(2)).shape == (2,)


def test_shape_given_as_a_numpy_array():
    assert jnp.ones(np.array([2, 3])).shape == (2, 3)
    assert jnp.full(np.array([2]), 1.0).shape == (2,)
    assert jx.random.normal(jx.random.key(0), np.array([2])).shape == (2,)
    with pytest.raises(TypeError, match="shape must be an int or a sequence of ints"):
        jnp.ones("ab")


def test_save_any_names_but_these_saves_the_other_names_only():
    from jaxprc.ad_checkpoint import checkpoint_name

    def f(x):
        a = checkpoint_name(jnp.sin(x), "a")
        b = checkpoint_name(jnp.cos(a), "b")
        return jnp.sum(jnp.exp(b) * x)
    policy = jx.checkpoint_policies.save_any_names_but_these("b")
    g = jx.checkpoint(f, policy=policy)
    x = np.array([0.3, -1.2], np.float32)
    np.testing.assert_allclose(jx.grad(g)(x), jx.grad(f)(x), rtol=1e-6)
    assert policy(lax.remat.name_p, name="a") and not policy(lax.remat.name_p, name="b")
    assert not policy(lax.sin_p)
