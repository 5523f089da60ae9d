"""jaxprc.experimental: ``ode`` (odeint), ``io_callback``, ``mesh_utils``, ``compilation_cache``, ``checkify``,
``pjit``, ``hijax``, ``jet`` (Taylor-mode differentiation)."""
from . import ode  # noqa: F401
from ..callback import io_callback  # noqa: F401,E402
from . import checkify, compilation_cache, hijax, jet, layout, mesh_utils, pjit, sparse  # noqa: F401,E402
from .hijax import cur_qdd  # noqa: F401,E402
