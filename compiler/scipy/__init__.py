"""jaxprc.scipy: SciPy functions with JAX's semantics (``special``)."""
from . import special  # noqa: F401
from . import stats  # noqa: F401
from . import optimize  # noqa: F401
from . import integrate  # noqa: F401
