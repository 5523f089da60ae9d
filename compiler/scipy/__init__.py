"""jaxprc.scipy: SciPy functions with JAX's semantics (special, stats, linalg, fft, signal, ndimage, sparse.linalg, optimize, integrate, interpolate, cluster.vq, spatial.transform)."""
from . import special  # noqa: F401
from . import fft  # noqa: F401
from . import sparse  # noqa: F401
from . import linalg  # noqa: F401
from . import signal  # noqa: F401
from . import ndimage  # noqa: F401
from . import stats  # noqa: F401
from . import optimize  # noqa: F401
from . import integrate  # noqa: F401
from . import interpolate  # noqa: F401
from . import cluster  # noqa: F401
from . import spatial  # noqa: F401
