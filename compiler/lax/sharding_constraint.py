"""The sharding constraint: ``sharding_constraint_p`` lays its operand out as its ``sharding``
param asks (Shardy's ``sdy.sharding_constraint`` in StableHLO; outside jit, a device_put).
``constrain`` binds it where a sharding is asked inside a trace; ``sdy_sharding`` builds the
``#sdy.sharding`` attribute the SPMD lowering and the collectives share.
"""
from __future__ import annotations

from jaxlib.mlir.dialects import sdy
import numpy as np

from jaxprc import runtime, sharding as shd
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir.core import Primitive
from jaxprc.ir.params import Record
from jaxprc.ir.sharding_type import AbstractMesh, AxisType, typed

__all__ = ["constrain", "match_type_sharding", "named_sharding", "out_sharding_of", "sdy_sharding", "sharding_constraint_p",
           "with_sharding_constraint"]


sharding_constraint_p = Primitive("sharding_constraint")


def _constraint_rule(x, *, sharding):
    if len(sharding.dims) > x.ndim:
        raise TypeError(f"sharding_constraint: the sharding is for arrays of at least {len(sharding.dims)} "
                        f"dimensions, the operand is {x.str_short()}")
    return x.update(sharding=type_sharding_of(sharding, x.ndim))


sharding_constraint_p.def_abstract_eval(_constraint_rule)


@sharding_constraint_p.def_sharding_rule
def _constraint_sharding(outs, x, *, sharding):
    """The result's type names the constraint's Explicit axes (``reshard``)."""
    return type_sharding_of(sharding, x.ndim)


def type_sharding_of(param: shd.ShardingParam, ndim: int):
    mesh = AbstractMesh(param.axis_sizes, param.axis_names, tuple(AxisType[t] for t in param.axis_types))
    dims = tuple(param.dims) + ((),) * (ndim - len(param.dims))
    return typed(mesh, [tuple(a for a in axes if mesh.axis_types[mesh.axis_names.index(a)] is AxisType.Explicit)
                        for axes in dims])
sharding_constraint_p.def_params(sharding=Record(shd.ShardingParam))
sharding_constraint_p.def_impl(lambda x, *, sharding: shd.put(x, sharding.named(), _aval_of(x)))


def _aval_of(x) -> runtime.Aval:
    from jaxprc.engine.dispatch import runtime_aval
    from jaxprc.ir.tracing import get_aval
    return x.aval if isinstance(x, runtime.Array) else runtime_aval(get_aval(x))


def named_sharding(sharding) -> shd.NamedSharding:
    if isinstance(sharding, shd.NamedSharding):
        return sharding
    return shd.NamedSharding(shd.Mesh(np.array(sharding._devices, dtype=object), ("_device",)),
                             shd.PartitionSpec())


def with_sharding_constraint(x, shardings):
    """Ask that the values of ``x`` (a pytree) be laid out as ``shardings`` (one sharding or
    PartitionSpec for all leaves, or a matching pytree); outside jit, a device_put."""
    from jaxprc.ir.tree_util import tree_flatten, tree_unflatten
    from jaxprc.engine.spmd import broadcast
    leaves, tree = tree_flatten(x)
    per_leaf = broadcast(shardings, tree, "with_sharding_constraint")
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        named = named_sharding(shd.resolve(s, "with_sharding_constraint"))
        explicit = [a for axes in named.spec.axes(len(named.spec)) for a in axes
                    if named.mesh.axis_types[named.mesh.axis_names.index(a)] is not shd.AxisType.Auto]
        if explicit:
            raise ValueError(f"with_sharding_constraint: the spec can only refer to Auto axes of the mesh; "
                             f"{named.spec} uses {explicit} of {named.mesh!r} (make_mesh gives Explicit "
                             "axes unless axis_types=(AxisType.Auto, ...))")
        named.check_shape(np.shape(leaf) if not hasattr(leaf, "shape") else leaf.shape, "with_sharding_constraint")
        outs.append(sharding_constraint_p.bind(leaf, sharding=shd.ShardingParam.of(named)))
    return tree_unflatten(tree, outs)


def constrain(values, shardings, what: str) -> list:
    """``values`` (traced) with the layouts ``shardings`` (None: any), as a nested jit's
    in_shardings/out_shardings ask inside another trace."""
    out = []
    for v, s in zip(values, shardings):
        if s is not None:
            named = named_sharding(shd.resolve(s, what))
            named.check_shape(v.shape, what)
            v = sharding_constraint_p.bind(v, sharding=shd.ShardingParam.of(named))
        out.append(v)
    return out


ad.defjvp_linear(sharding_constraint_p)
ad.primitive_transposes[sharding_constraint_p] = lambda ct, x, *, sharding: [
    ct if isinstance(ct, ad.Zero) else sharding_constraint_p.bind(ct, sharding=sharding)]


def _constraint_batch(args, dims, *, sharding):
    (x,), (d,) = args, dims
    if d is batching.not_mapped:
        return sharding_constraint_p.bind(x, sharding=sharding), d
    dims_ = list(sharding.dims) + [()] * max(0, d - len(sharding.dims))
    dims_.insert(d, ())                  # the batch dimension is not split
    return sharding_constraint_p.bind(x, sharding=sharding._replace(dims=tuple(dims_))), d


batching.primitive_batchers[sharding_constraint_p] = _constraint_batch


def sdy_sharding(param: shd.ShardingParam, ndim: int):
    """``#sdy.sharding`` for an ``ndim``-array, with its mesh inline (lifted into ``@mesh`` once the
    module is built)."""
    param = param._replace(dims=tuple(param.dims) + ((),) * (ndim - len(param.dims)))
    mesh = sdy.MeshAttr.get([sdy.MeshAxisAttr.get(n, s) for n, s in zip(param.axis_names, param.axis_sizes)], [])
    return sdy.TensorShardingAttr.get(mesh, [sdy.DimensionShardingAttr.get(
        [sdy.AxisRefAttr.get(a) for a in axes], is_closed=True) for axes in param.dims],
        replicated_axes=[], unreduced_axes=[])


def sdy_type_sharding(aval):
    """``#sdy.sharding`` of the sharding written in ``aval``'s type."""
    mesh, spec = aval.sharding_in_type.mesh, aval.sharding_in_type.spec
    return sdy_sharding(shd.ShardingParam(mesh.axis_names, mesh.axis_sizes, (), (), spec.axes(aval.ndim)),
                        aval.ndim)


def _constraint_lowering(ctx, x, *, sharding):
    return sdy.sharding_constraint(x, sdy_sharding(sharding, ctx.avals_in[0].ndim))


mlir.register_lowering(sharding_constraint_p, _constraint_lowering)


def out_sharding_of(result, out_sharding, what: str):
    """``result`` laid out as an op's ``out_sharding=`` asks (a NamedSharding, or a PartitionSpec
    of the context mesh); None: as the op's sharding rule gives it."""
    if out_sharding is None:
        return result
    from jaxprc.engine.spmd import reshard
    return reshard(result, out_sharding)


def match_type_sharding(value, aval):
    """``value`` with the sharding ``aval``'s type names (a cotangent takes its primal's, as
    JAX's transposes give them)."""
    from jaxprc.ir.tracing import get_aval
    want, have = aval.sharding_in_type, get_aval(value).sharding_in_type
    if have == want:
        return value
    if want is None:         # whole on each device of the value's mesh
        want = shd.sharding_type.NamedSharding(have.mesh, shd.PartitionSpec())
    return sharding_constraint_p.bind(value, sharding=shd.ShardingParam.of(want))
