"""``jaxprc.custom_derivatives``: JAX's public module (``jax.custom_derivatives``); the machinery is in
jaxprc/transformations/custom_derivatives.py."""
from .transformations.custom_derivatives import *  # noqa: F401,F403
from .transformations.custom_derivatives import __all__  # noqa: F401
