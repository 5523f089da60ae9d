"""jaxprc.scipy.sparse: matrix-free solvers (``linalg``)."""
from . import linalg  # noqa: F401
