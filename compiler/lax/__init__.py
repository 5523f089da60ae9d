"""``jaxprc.lax``: the primitive families, one module each, and JAX's ``lax`` namespace.

Each family module defines its primitives (``<name>_p``, with typing rules),
the functions users call, and every rule of its primitives, registered in the
public tables of ``jaxprc.interpreters`` (docs/primitives.md).
"""
from jaxprc.ir.lax import *  # noqa: F401,F403  (moving into the family modules)
from jaxprc.ir.control_flow import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from jaxprc.ir.prims import structural as _st, reductions as _rd, linalg as _la  # noqa
from jaxprc.ir.prims import control_flow as _cf, custom as _cst  # noqa
from jaxprc.ir.core import Primitive as _Primitive
from jaxprc.passes import emit as _emit

for _mod in (_st, _rd, _la, _cf, _cst):
    globals().update({k: v for k, v in vars(_mod).items() if k.endswith("_p") and isinstance(v, _Primitive)})

_emit.provide(full=full, transpose=transpose, broadcast_in_dim=broadcast_in_dim)  # noqa: F405

# Transitional, until the families still in ir/ and passes/ have moved: their code reaches the
# elementwise family through the modules it imported it from (ew.<name>_p, ir.lax.<builder>).
from jaxprc.ir import lax as _ir_lax  # noqa: E402
from jaxprc.ir.prims import elementwise as _ir_ew  # noqa: E402
from . import elementwise as _elementwise  # noqa: E402
vars(_ir_ew).update({k: getattr(_elementwise, k) for k in _elementwise.__all__ if k.endswith("_p")})
vars(_ir_lax).update({k: getattr(_elementwise, k) for k in _elementwise.__all__ if not k.endswith("_p")},
                     _convert=_elementwise._convert)
