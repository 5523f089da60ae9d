"""``jaxprc.lax``: the primitive families, one module each, and JAX's ``lax`` namespace.

Each family module defines its primitives (``<name>_p``, with typing rules),
the functions users call, and every rule of its primitives, registered in the
public tables of ``jaxprc.interpreters`` (docs/primitives.md).
"""
from jaxprc.ir.lax import *  # noqa: F401,F403  (moving into the family modules)
from jaxprc.ir.control_flow import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .cumulative import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .shapes import *  # noqa: F401,F403
from .slicing import *  # noqa: F401,F403
from jaxprc.ir.prims import elementwise as _ew  # noqa
from jaxprc.ir.prims import control_flow as _cf, custom as _cst  # noqa
from jaxprc.ir.core import Primitive as _Primitive
from jaxprc.passes import emit as _emit

for _mod in (_ew, _cf, _cst):
    globals().update({k: v for k, v in vars(_mod).items() if k.endswith("_p") and isinstance(v, _Primitive)})

_emit.provide(add=add)  # noqa: F405

# Eager (op-by-op) impls for the primitives defined here: dispatch installed them before we loaded.
from jaxprc import dispatch as _dispatch  # noqa: E402
_dispatch.install_impls()

# Transitional, until the families still in ir/ and passes/ have moved: their code calls these
# builders through jaxprc.ir.lax (``_broadcast_rank0``, jvp/transpose rules) and passes.jvp.
import jaxprc.ir.lax as _ir_lax  # noqa: E402

for _name in ("broadcast_in_dim", "reshape", "transpose", "pad", "full", "full_like", "broadcasted_iota"):
    setattr(_ir_lax, _name, globals()[_name])
