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
from .custom_batching import *  # noqa: F401,F403
from .linear_call import *  # noqa: F401,F403
from .callbacks import *  # noqa: F401,F403
from .ffi_call import ffi_call_p  # noqa: F401
from .fft import *  # noqa: F401,F403
from .support.conveniences import *  # noqa: F401,F403
from .top_k import *  # noqa: F401,F403
from .numerics import *  # noqa: F401,F403
from .barrier import *  # noqa: F401,F403
from .rng import *  # noqa: F401,F403
from .generic_reduce import *  # noqa: F401,F403
from .support.associative_scan import *  # noqa: F401,F403
from .staging import *  # noqa: F401,F403
from .support.ragged import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .windowed import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from .dimensions import *  # noqa: F401,F403
from .exported_call import *  # noqa: F401,F403
from .support.accuracy import AccuracyMode, Tolerance  # noqa: F401
from .tokens import *  # noqa: F401,F403
from .support import operands  # noqa: F401  (jaxprc.lax.operands: the builders' normalisation)
from . import linalg  # noqa: F401  (jaxprc.lax.linalg, as jax.lax.linalg; only its primitives are exported here)
from .linalg import (cholesky_p, eig_p, eigh_p, hessenberg_p, householder_product_p, lu_p, lu_pivots_to_permutation_p,  # noqa: F401
                     qr_p, schur_p, svd_p, triangular_solve_p, tridiagonal_solve_p, geqrf_p)

# Eager (op-by-op) evaluation of every primitive defined above: XLA runs its lowering.
from jaxprc.engine import dispatch as _dispatch  # noqa: E402
_dispatch.install_impls()
from .sharding_constraint import sharding_constraint_p, with_sharding_constraint  # noqa: E402,F401
from .parallel import *  # noqa: E402,F401,F403
from .ragged_collectives import *  # noqa: E402,F401,F403
from .host_local import *  # noqa: E402,F401,F403
from .checks import *  # noqa: E402,F401,F403
