"""Op builders: one function per primitive, with JAX signatures (in progress)."""
