"""Oracle tests: compare jaxprc against the jax package. They run in a pytest process of their own."""
