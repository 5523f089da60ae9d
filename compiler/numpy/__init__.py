"""jaxprc.numpy: the jax.numpy API (in progress)."""
