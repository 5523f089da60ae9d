"""jaxprc.scipy: SciPy functions with JAX's semantics (``special``)."""
from . import special  # noqa: F401
from . import signal  # noqa: F401
from . import ndimage  # noqa: F401
