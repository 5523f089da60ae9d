"""``jaxprc.ad_checkpoint``: JAX's public module (``jax.ad_checkpoint``); the machinery is in
jaxprc/transformations/ad_checkpoint.py."""
from .transformations.ad_checkpoint import *  # noqa: F401,F403
from .transformations.ad_checkpoint import __all__  # noqa: F401
