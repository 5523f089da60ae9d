"""``jaxprc.lax``: the primitive families, one module each, and JAX's ``lax`` namespace.

Each family module defines its primitives (``<name>_p``, with typing rules),
the functions users call, and every rule of its primitives, registered in the
public tables of ``jaxprc.interpreters`` (docs/primitives.md).
"""
from jaxprc.ir.lax import *  # noqa: F401,F403  (moving into the family modules)
from jaxprc.ir.prims import elementwise as _ew, structural as _st, reductions as _rd, linalg as _la  # noqa
from jaxprc.ir.core import Primitive as _Primitive
from jaxprc.passes import emit as _emit

for _mod in (_ew, _st, _rd, _la):
    globals().update({k: v for k, v in vars(_mod).items() if k.endswith("_p") and isinstance(v, _Primitive)})
from .control_flow import *  # noqa: F401,F403
from .call import *  # noqa: F401,F403
from .remat import *  # noqa: F401,F403
from .custom_derivatives import *  # noqa: F401,F403

_emit.provide(full=full, add=add, transpose=transpose, broadcast_in_dim=broadcast_in_dim)  # noqa: F405
