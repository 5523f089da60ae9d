"""jaxprc.example_libraries: JAX's example neural-network (``stax``) and optimizer
(``optimizers``) libraries, so programs written against them run by changing imports."""
