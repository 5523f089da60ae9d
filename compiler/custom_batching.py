"""``jaxprc.custom_batching``: JAX's public module (``jax.custom_batching``); the machinery is in
jaxprc/transformations/custom_batching.py."""
from .transformations.custom_batching import *  # noqa: F401,F403
from .transformations.custom_batching import __all__  # noqa: F401
