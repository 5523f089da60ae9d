"""``optimization_barrier``: the identity on a pytree of values, which XLA may not move
computations across (it keeps rematerialised values from being merged with their originals).

Derivatives go through barriers of their own: the tangents (and cotangents)
pass through one barrier together, as in JAX.
"""
from __future__ import annotations

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo
from jaxprc.ir.core import Primitive
from jaxprc.ir.tree_util import tree_flatten

__all__ = ["optimization_barrier", "optimization_barrier_p"]

optimization_barrier_p = Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True
optimization_barrier_p.def_params()
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))


def optimization_barrier(operand, /):
    """``operand`` (a pytree of arrays) unchanged, behind a barrier to XLA's optimizations."""
    leaves, treedef = tree_flatten(operand)
    return treedef.unflatten(optimization_barrier_p.bind(*leaves) if leaves else [])


def _barrier_jvp(primals, tangents):
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    return optimization_barrier_p.bind(*primals), optimization_barrier_p.bind(*tangents)


def _barrier_transpose(cts, *args):
    outs = optimization_barrier_p.bind(*[ad.instantiate_zeros(ct) for ct in cts])
    return [ct if ad.is_undefined_primal(x) else None for ct, x in zip(outs, args)]


ad.primitive_jvps[optimization_barrier_p] = _barrier_jvp
ad.primitive_transposes[optimization_barrier_p] = _barrier_transpose
batching.primitive_batchers[optimization_barrier_p] = lambda args, dims: (
    optimization_barrier_p.bind(*args), list(dims))
mlir.register_lowering(optimization_barrier_p, lambda ctx, *args: list(hlo.OptimizationBarrierOp(list(args)).results))


# ---------------------------------------------------------- jet (Taylor series)
jet.deflinear(optimization_barrier_p)   # beyond JAX
