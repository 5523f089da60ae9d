"""``jaxprc.custom_derivatives``: JAX's public module (``jax.custom_derivatives``); the machinery is in
jaxprc/transformations/custom_derivatives.py."""
from .transformations.custom_derivatives import *  # noqa: F401,F403
from .transformations.custom_derivatives import __all__  # noqa: F401
# JAX's module names the primitives that stage custom functions too (equinox and diffrax read them)
from .transformations.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p  # noqa: F401,E402
