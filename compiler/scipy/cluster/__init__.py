"""jax.scipy.cluster: vector quantization (``vq``)."""
from . import vq  # noqa: F401
