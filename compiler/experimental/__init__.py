"""jaxprc.experimental: ``ode`` (odeint), ``io_callback``, ``jet`` (Taylor-mode differentiation)."""
from . import ode  # noqa: F401
from ..callback import io_callback  # noqa: F401,E402
from . import jet  # noqa: F401,E402
