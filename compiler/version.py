"""jaxprc's version (``jaxprc.version.__version__``, also ``jaxprc.__version__``), and the version of
JAX whose public API it implements (``__jax_version__``, ``__jax_version_info__``): what a library
that compares JAX versions should read (``jaxprc.compat`` serves it as ``jax.__version__``)."""
__version__ = "0.1.0"   # as in pyproject.toml
__jax_version__ = "0.10.2"
__jax_version_info__ = tuple(int(part) for part in __jax_version__.split("."))
