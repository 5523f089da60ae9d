"""jaxprc.scipy: SciPy functions with JAX's semantics (``special``)."""
from . import special  # noqa: F401
from . import fft  # noqa: F401
from . import sparse  # noqa: F401
