"""jax.scipy.optimize: ``minimize`` (BFGS) and its ``OptimizeResults``."""
from ._minimize import OptimizeResults, minimize  # noqa: F401
