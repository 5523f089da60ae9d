"""jaxprc.experimental: ``ode`` (odeint)."""
from . import ode  # noqa: F401
