"""jaxprc.nn: neural-network functions as in jax.nn (activations, softmax-style
reductions in ``functions``)."""
from .functions import *  # noqa: F401,F403
from .extra import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .scaled import *  # noqa: F401,F403
from . import initializers  # noqa: F401,E402
