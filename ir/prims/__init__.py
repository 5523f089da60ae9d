"""The built-in primitives, grouped by kind; each module defines primitives and their typing rules."""
from .elementwise import *  # noqa: F401,F403
from .control_flow import *  # noqa: F401,F403
from .custom import *  # noqa: F401,F403
import sys as _sys  # noqa: E402

# A star import can shadow a submodule's name (``elementwise`` is also a helper
# function in elementwise.py); ``prims.<name>`` must be the module.
for _name in ("elementwise", "control_flow", "custom"):
    globals()[_name] = _sys.modules[f"{__name__}.{_name}"]
