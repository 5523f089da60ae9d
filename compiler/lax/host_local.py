"""Host-local and global arrays: ``host_local_array_to_global_array`` and its inverse.

With processes joined by ``jaxprc.distributed``, a process's *host-local* array is its part
of a *global* array laid out over ``global_mesh`` as ``pspec``: the block of the mesh holding
this process's devices (``Mesh.local_mesh``) lays out the local array with the same spec.
Along a dimension split over mesh axes the global size is the local size times the ratio of
the mesh's to the local mesh's sizes on those axes. Converting moves no data: this process's
shards of one are its shards of the other (only a layout other than ``pspec`` is first
re-laid out). In one process the two are the same array.

Under jit both are identities (their lowering, as in JAX), so there they only apply where
the local and global shapes agree; elsewhere they are a clear error.
"""
from __future__ import annotations

import math

from jaxprc import runtime
from jaxprc.engine.dispatch import runtime_aval
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray
from jaxprc.ir.params import Record, Str, Tuple
from jaxprc.ir.tracing import get_aval
from jaxprc.runtime.sharded import assemble
from jaxprc.sharding import NamedSharding, ShardingParam, put

__all__ = ["host_local_array_to_global_array_p", "global_array_to_host_local_array_p"]

host_local_array_to_global_array_p = Primitive("host_local_array_to_global_array")
global_array_to_host_local_array_p = Primitive("global_array_to_host_local_array")
_TO_GLOBAL = host_local_array_to_global_array_p


def _meshes(global_mesh):
    """(global mesh, this process's block of it) of a ShardingParam."""
    mesh = global_mesh.named().mesh
    return mesh, mesh.local_mesh


def _resize(prim, shape, pspec, sizes_from: dict, sizes_to: dict) -> tuple:
    out = list(shape)
    for i, axes in enumerate(pspec):
        ways = math.prod(sizes_from[a] for a in axes)
        if out[i] % ways:
            raise JaxprTypeError(f"{prim.name}: dimension {i} of size {out[i]} is split {ways} ways over "
                                 f"mesh axes {axes}, which does not divide it")
        out[i] = out[i] // ways * math.prod(sizes_to[a] for a in axes)
    return tuple(out)


def _rule(prim):
    def rule(x, *, global_mesh, pspec):
        used = [a for axes in pspec for a in axes]
        unknown = [a for a in used if a not in global_mesh.axis_names]
        if len(pspec) > x.ndim or unknown or len(set(used)) != len(used):
            raise JaxprTypeError(f"{prim.name}: pspec {pspec} does not fit {x.str_short()} over mesh axes "
                                 f"{global_mesh.axis_names} (one entry per leading dimension, each mesh "
                                 "axis at most once)")
        mesh, local = _meshes(global_mesh)
        sizes = (local.shape, mesh.shape) if prim is _TO_GLOBAL else (mesh.shape, local.shape)
        return ShapedArray(_resize(prim, x.shape, pspec, *sizes), x.dtype)   # not weak, as in JAX
    return rule


def _impl(prim):
    """Eagerly: ``x`` laid out over the source mesh (a no-op when it is already), its shards
    here relabelled as the target's. Each conversion leaves arrays already of its target kind
    (global ones spanning processes / fully addressable ones) as they are, as JAX does."""
    def impl(x, *, global_mesh, pspec):
        spans = getattr(x, "spans_processes", lambda: False)()
        already = spans if prim is _TO_GLOBAL else isinstance(x, runtime.Array) and not spans
        if already:
            return x
        whole = global_mesh._replace(dims=pspec).named()
        part = NamedSharding(whole.mesh.local_mesh, whole.spec)
        src, dst = (part, whole) if prim is _TO_GLOBAL else (whole, part)
        x_aval = get_aval(x)
        aval = prim.abstract_eval_rule(x_aval, global_mesh=global_mesh, pspec=pspec)
        x = x if type(x) is runtime.Array and src._devices == (x.device,) else put(x, src, runtime_aval(x_aval))
        shards = [x._buf] if type(x) is runtime.Array else x.shard_buffers()
        return assemble(runtime.Aval.get(aval.shape, aval.dtype, False), dst._hlo(len(aval.shape)),
                        dst._devices, shards, dst)
    return impl


def _lowering(prim):
    def lowering(ctx, x, **params):
        (a,), (out,) = ctx.avals_in, ctx.avals_out
        if a.shape != out.shape:
            raise ValueError(f"{prim.name} inside jit: a local {a.str_short()} and a global {out.str_short()} "
                             "differ in shape, and a compiled program (jit, or grad/vjp, which jaxprc "
                             "compiles as one) only holds global values; convert outside it")
        return x
    return lowering


def _batcher(prim):
    def batch(args, dims, *, global_mesh, pspec):
        (x,), (d,) = args, dims
        if d is not batching.not_mapped:     # the batch dimension is not split
            spec = list(pspec) + [()] * max(0, d - len(pspec))
            spec.insert(d, ())
            pspec = tuple(spec)
        return prim.bind(x, global_mesh=global_mesh, pspec=pspec), d
    return batch


def _transpose(inverse):
    def transpose(ct, x, **params):
        return [ad.Zero(x.aval) if isinstance(ct, ad.Zero) else inverse.bind(ct, **params)]
    return transpose


def _register(prim, inverse):
    prim.def_params(global_mesh=Record(ShardingParam), pspec=Tuple(Tuple(Str())))
    prim.def_abstract_eval(_rule(prim))
    prim.def_impl(_impl(prim))
    ad.defjvp_linear(prim)
    ad.primitive_transposes[prim] = _transpose(inverse)
    batching.primitive_batchers[prim] = _batcher(prim)
    mlir.register_lowering(prim, _lowering(prim))


_register(host_local_array_to_global_array_p, global_array_to_host_local_array_p)
_register(global_array_to_host_local_array_p, host_local_array_to_global_array_p)
