"""The built-in primitives, grouped by kind; each module defines primitives and their typing rules."""
from .elementwise import *  # noqa: F401,F403
from .structural import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
import sys as _sys  # noqa: E402

# A star import can shadow a submodule's name (``elementwise`` is also a helper
# function in elementwise.py); ``prims.<name>`` must be the module.
for _name in ("elementwise", "structural", "reductions", "linalg"):
    globals()[_name] = _sys.modules[f"{__name__}.{_name}"]
