"""jaxprc: trace Python into a typed SSA IR, transform it with passes, lower to StableHLO, run on XLA.

The public API is JAX's: ``jit``, ``grad``, ``vmap``, ``make_jaxpr``,
``jaxprc.numpy``, ``jaxprc.lax``, ...
"""
import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")   # before jaxlib loads libjax_common

from . import ir  # noqa: E402
from .ir.dtypes import config  # noqa: E402,F401
from .ir.core import ShapedArray, JaxprcError  # noqa: E402,F401
from .ir.tracing import ConcretizationTypeError, UnexpectedTracerError, ensure_compile_time_eval  # noqa: E402,F401

from .api import *  # noqa: E402,F401,F403
from .transformations.ad import *  # noqa: E402,F401,F403
from .transformations.vmap import *  # noqa: E402,F401,F403
from . import lax, numpy, nn, tree_util, tree, random, core, interpreters, dtypes  # noqa: E402,F401
from . import key_moves as _key_moves  # noqa: E402
_key_moves.install()
from .transformations.custom_derivatives import custom_jvp, custom_vjp, custom_gradient, closure_convert  # noqa: E402,F401
from . import custom_derivatives  # noqa: E402,F401
from . import custom_batching  # noqa: E402,F401
from . import scipy, experimental  # noqa: E402,F401
from .transformations.ad_checkpoint import checkpoint, checkpoint_policies, remat  # noqa: E402,F401
from . import ad_checkpoint  # noqa: E402,F401
from . import errors  # noqa: E402,F401
from . import debug  # noqa: E402,F401
from .callback import effects_barrier, pure_callback  # noqa: E402,F401
from . import flatten_util, ops  # noqa: E402,F401
from .toplevel import *  # noqa: E402,F401,F403
from .version import __version__, __jax_version__, __jax_version_info__  # noqa: E402,F401
from . import api_util, extend  # noqa: E402,F401
from .array_type import Array  # noqa: E402,F401
from . import version  # noqa: E402,F401
from .ir.dtypes import float0  # noqa: E402,F401
from . import image  # noqa: E402,F401
from . import sharding  # noqa: E402,F401
from .sharding import (NamedSharding, PartitionSpec as P, make_array_from_callback,  # noqa: E402,F401
                       make_array_from_single_device_arrays, make_mesh, set_mesh)
from .lax.parallel import shard_map  # noqa: E402,F401
from . import distributed  # noqa: E402,F401
from .process_local import make_array_from_process_local_data  # noqa: E402,F401
from .transformations.pmap import pmap  # noqa: E402,F401
from .engine.spmd import reshard  # noqa: E402,F401
from . import dlpack, ffi, monitoring, stages, test_util, typing  # noqa: E402,F401
from . import export  # noqa: E402,F401
from .transfer_guard import (transfer_guard, transfer_guard_device_to_device,  # noqa: E402,F401
                             transfer_guard_device_to_host, transfer_guard_host_to_device)
from .engine.compile_guards import explain_cache_misses, no_execution, no_tracing  # noqa: E402,F401
from . import profiler  # noqa: E402,F401
from . import ref  # noqa: E402,F401
from .ref import Ref, empty_ref, free_ref, freeze, new_ref  # noqa: E402,F401

numpy.ndarray = Array       # jax.numpy.ndarray is jax.Array
