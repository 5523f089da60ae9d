"""``jaxprc.extend`` against JAX 0.10.2's ``jax.extend``: which names it has (the gaps listed with
their reasons, so a new gap or a closed one fails), and the helpers' results against JAX's."""
import importlib

import jax
import jax.extend  # noqa: F401
import jax.extend.backend  # noqa: F401
import jax.extend.core  # noqa: F401
import jax.extend.linear_util  # noqa: F401
import jax.extend.mlir  # noqa: F401
import jax.extend.random  # noqa: F401
import jax.extend.source_info_util  # noqa: F401
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.extend  # noqa: F401

# module -> JAX names jaxprc.extend does not have, and why
MISSING = {
    "core": {
        # jaxprc has no trace objects: every transformation traces to a jaxpr and runs a pass
        "TraceTag", "find_top_trace", "set_current_trace", "take_current_trace",
        "nonempty_axis_env_DO_NOT_USE", "unsafe_am_i_under_a_jit_DO_NOT_USE",
        "unsafe_am_i_under_a_vmap_DO_NOT_USE", "unsafe_get_axis_names_DO_NOT_USE",
        # the IR's effects are its built-in kinds (debug, io, check and their ordered kinds) and
        # library-defined ``Effect`` subclasses; no ``Effects`` set type; tokens are ShapedArrays
        # of dtype token: no separate token type yet
        "Effects", "AbstractToken",
        # one call primitive (jit); no user-defined call primitives
        "CallPrimitive", "call_impl",
    },
    "core.primitives": {
        # not in jaxprc: approximate top-k, typed-key PRNG primitives (keys are uint32 data),
        # array refs (discharged while tracing: no get/swap in the IR), device_put as a primitive, the tridiagonal reduction, select_and_scatter
        # (only its additive form), the *_to comparison variants, add_jaxvals, empty2
        "add_jaxvals_p", "approx_top_k_p", "device_put_p", "empty2_p", "eq_to_p", "get_p", "le_to_p",
        "lt_to_p", "random_bits_p", "random_fold_in_p", "random_seed_p", "random_split_p",
        "select_and_scatter_p", "swap_p", "threefry2x32_p", "tridiagonal_p",
    },
    "linear_util": set(),
    # one PJRT client per process: no backend factories or caches to register
    "backend": {"backend_xla_version", "clear_in_memory_compilation_cache", "get_compile_options",
                "ifrt_proxy", "register_backend_cache", "register_backend_factory"},
    # locations are file:line plus the named_scope string, not JAX's name-stack objects
    "source_info_util": {"NameStack", "new_name_stack", "new_source_info", "reset_name_stack",
                         "set_name_stack", "transform_name_stack", "user_context"},
    # the PRNG is threefry-2x32 only, written with lax ops (no PRNG implementations to register)
    "random": {"define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl", "threefry2x32_p",
               "threefry_prng_impl", "unsafe_rbg_prng_impl"},
    "mlir": {"lower_with_sharding_in_types"},
}


@pytest.mark.parametrize("module", sorted(MISSING))
def test_extend_names_present_or_listed(module):
    theirs = importlib.import_module(f"jax.extend.{module}")
    ours = importlib.import_module(f"jaxprc.extend.{module}")
    names = {n for n in dir(theirs) if not n.startswith("_")}
    missing = {n for n in names if not hasattr(ours, n)}
    assert missing == MISSING[module]


def test_primitives_under_jax_names_are_the_same_operations():
    ours, theirs = jaxprc.extend.core.primitives, jax.extend.core.primitives
    renamed = {"call_p": "jit", "closed_call_p": "jit", "remat_p": "checkpoint",
               "custom_jvp_call_p": "custom_jvp_call_jaxpr", "custom_vjp_call_p": "custom_vjp_call_jaxpr",
               "linear_solve_p": "custom_linear_solve", "scatter_add_p": "scatter-add",
               "scatter_mul_p": "scatter-mul", "scatter_min_p": "scatter-min", "scatter_max_p": "scatter-max"}
    for name in dir(ours):
        if name.endswith("_p"):
            assert hasattr(theirs, name), name
            assert getattr(ours, name).name == renamed.get(name, getattr(theirs, name).name), name


@pytest.mark.parametrize("shape,axis,size", [((4, 3), 0, 4), ((4, 3), 1, 3), ((2,), 0, 2)])
def test_mapped_and_unmapped_avals(shape, axis, size):
    ours = jaxprc.ShapedArray(shape, np.float32)
    theirs = jax.core.ShapedArray(shape, jnp.float32)
    mapped = jaxprc.extend.core.mapped_aval(size, axis, ours)
    assert mapped.shape == jax.extend.core.mapped_aval(size, axis, theirs).shape
    assert (jaxprc.extend.core.unmapped_aval(5, axis, mapped).shape
            == jax.extend.core.unmapped_aval(5, axis, jax.extend.core.mapped_aval(size, axis, theirs)).shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_, np.complex64])
def test_tangent_types(dtype):
    assert (jaxprc.extend.core.primal_dtype_to_tangent_dtype(dtype)
            == jax.extend.core.primal_dtype_to_tangent_dtype(dtype))
    assert (jaxprc.ShapedArray((2,), dtype).to_tangent_aval().dtype
            == jax.core.ShapedArray((2,), dtype).to_tangent_aval().dtype)


@pytest.mark.parametrize("value", [1.0, 3, True, np.zeros(2), np.float32(1), "text", None, [1.0]])
def test_valid_jaxtype(value):
    assert jaxprc.extend.core.valid_jaxtype(value) == jax.extend.core.valid_jaxtype(value)


def test_flatten_fun_as_jax():
    def f(x, d, k=1.0):
        return {"s": x + d["a"] * k, "t": (x,)}
    args, kwargs = (1.0, {"a": 2.0}), {"k": 3.0}
    outs = []
    for lib, lu in ((jax, jax.extend.linear_util), (jaxprc, jaxprc.extend.linear_util)):
        leaves, in_tree = lib.tree_util.tree_flatten((args, kwargs))
        info = lib.api_util.debug_info("test", f, args, kwargs)
        flat, out_tree = lib.api_util.flatten_fun(lu.wrap_init(f, debug_info=info), in_tree)
        outs.append((list(flat.call_wrapped(*leaves)), out_tree().num_leaves))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("left,transpose", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_ormqr_as_jax(left, transpose, dtype):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 5, 3)).astype(dtype)
    if dtype == np.complex64:
        a = a + 1j * rng.normal(size=a.shape).astype(np.float32)
    c = rng.normal(size=(2, 5, 4) if left else (2, 4, 5)).astype(dtype)
    r, taus = map(np.asarray, jaxprc.lax.linalg.geqrf(a))     # jax.lax.linalg has no geqrf
    want = jax.lax.linalg.ormqr(r, taus, c, left=left, transpose=transpose)
    got = jaxprc.lax.linalg.ormqr(r, taus, c, left=left, transpose=transpose)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
