"""The JAX internals (``jax._src...``) that measured libraries import, name by name.

JAX name -> (jaxprc's equivalent, the library that imports it). The equivalent is
``"module:attr"`` (an object), ``"module"`` (a module), or None: a private module a library
imports at load time but whose names it uses only in features jaxprc does not offer; the module
is there, empty, and any name read from it says it is not provided.
Only names a listed library uses; public names belong in jaxprc's public modules.
"""
INTERNALS: dict[str, tuple[str | None, str]] = {
    # chex.restrict_backends wraps the backend's compile function (not offered: no names)
    "jax._src.compiler": (None, "chex"),
    # chex.set_n_cpu_devices: whether the CPU client exists yet (then a new count is too late)
    "jax._src.xla_bridge._backends": ("jaxprc.compat.xla_bridge:started_backends", "chex"),
    "jax._src.ad_util.stop_gradient_p": ("jaxprc.lax:stop_gradient_p", "lineax"),
    # JAX's primitives tutorial (docs: jax-primitives.md) calls grad/jit/vmap through jax._src.api
    # and writes lowering rules with jaxlib's stablehlo dialect under JAX's name for it
    "jax._src.api": ("jaxprc", "primitives tutorial"),
    "jax._src.lib.mlir.dialects.hlo": ("jaxlib.mlir.dialects.stablehlo", "primitives tutorial"),
    # equinox checks for wait_for_tokens and goes on without it
    "jax._src.dispatch": (None, "equinox"),
    "jax._src.core.ShapedArray": ("jaxprc.core:ShapedArray", "flax"),
    # numpyro: whether any trace is live (it caches only outside transformations)
    "jax._src.core.trace_state_clean": ("jaxprc.ir.tracing:_outside_any_trace", "numpyro"),
    "jax._src.dtypes.DType": ("numpy:dtype", "flax"),
    "jax._src.dtypes.ExtendedDType": ("jaxprc.dtypes:ExtendedDType", "flax"),
    "jax._src.dtypes.extended": ("jaxprc.dtypes:extended", "flax"),
    "jax._src.dtypes.finfo": ("jaxprc.dtypes:finfo", "flax"),
    "jax._src.dtypes.TypePromotionError": ("jaxprc.dtypes:TypePromotionError", "equinox"),
    "jax._src.traceback_util.api_boundary": ("jaxprc.extend.source_info_util:api_boundary",
                                             "equinox, flax"),
    "jax._src.traceback_util.include_frame": ("jaxprc.extend.source_info_util:include_frame",
                                              "equinox"),
    "jax._src.traceback_util.register_exclusion": (
        "jaxprc.extend.source_info_util:register_exclusion", "equinox, flax"),
    # flax nnx: whether a value is an array ref (nnx.Variable(..., ref=True))
    "jax._src.state.types.AbstractRef": ("jaxprc.ref:AbstractRef", "flax"),
    # flax nnx: ``type(x) in _registry`` (is x a pytree node?); JAX's is a dict keyed by class
    "jax._src.tree_util._registry": ("jaxprc.ir.tree_util:node_types", "flax"),
    # flax nnx.checkify: checkify, user_checks (the names of JAX's public checkify module)
    "jax._src.checkify": ("jaxprc.experimental.checkify", "flax"),
    "jax._src.flatten_util.ravel_pytree": ("jaxprc.flatten_util:ravel_pytree", "blackjax"),
}
