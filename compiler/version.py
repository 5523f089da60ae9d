"""jaxprc's version (``jaxprc.version.__version__``, also ``jaxprc.__version__``)."""
__version__ = "0.1.0"   # as in pyproject.toml
