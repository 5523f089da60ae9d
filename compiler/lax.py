"""jaxprc.lax: one function per primitive with JAX's signatures, and initial-style control flow."""
from jaxprc.ir.lax import *  # noqa: F401,F403
from jaxprc.ir.control_flow import *  # noqa: F401,F403
