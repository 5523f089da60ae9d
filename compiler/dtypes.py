"""jaxprc.dtypes: JAX's ``jax.dtypes`` names (float0, bfloat16, canonicalization, promotion)."""
from .ir.dtypes import bfloat16, canonicalize_dtype, finfo, float0, iinfo  # noqa: F401
from .numpy._dtypes import issubdtype, promote_types, result_type  # noqa: F401

__all__ = ["bfloat16", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "promote_types", "result_type"]
