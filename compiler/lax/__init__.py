"""``jaxprc.lax``: the primitive families, one module each, and JAX's ``lax`` namespace.

Each family module defines its primitives (``<name>_p``, with typing rules),
the functions users call, and every rule of its primitives, registered in the
public tables of ``jaxprc.interpreters`` (docs/primitives.md). This package
exports every family's builders and primitives.
"""
from .elementwise import *  # noqa: F401,F403
from .shapes import *  # noqa: F401,F403
from .slicing import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .cumulative import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .contractions import *  # noqa: F401,F403
from .control_flow import *  # noqa: F401,F403
from .call import *  # noqa: F401,F403
from .remat import *  # noqa: F401,F403
from .custom_derivatives import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from . import operands  # noqa: F401

# Eager (op-by-op) evaluation of every primitive defined above: XLA runs its lowering.
from jaxprc import dispatch as _dispatch  # noqa: E402
_dispatch.install_impls()
