"""Per-device programs: ``shard_map`` and the collectives its body uses.

``shard_map[jaxpr, mesh, in_specs, out_specs, manual_axes] *args`` runs ``jaxpr``
on every device of ``mesh`` with that device's block of each argument (split as
``in_specs`` say, per dimension the mesh axes it is split over) and assembles
the per-device results as ``out_specs`` say. Only ``manual_axes`` are split by
hand (the specs name only them); along the mesh's other axes the body's values
are whole and XLA partitions them (a partially manual shard_map). In its body the collectives name
mesh axes: ``psum pmax pmin`` (all-reduce), ``all_gather``, ``psum_scatter``
(reduce-scatter), ``all_to_all``, ``ppermute``
(collective permute), ``axis_index``. It lowers to Shardy's
``sdy.manual_computation``; each collective to its StableHLO op with replica
groups of logical device ids (positions in the mesh) and a channel handle
(notes/distributed.md §3, §0.5).
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.interpreters import partial_eval as pe
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir.core import JaxprTypeError, Primitive, ShapedArray, subjaxprs
from jaxprc.ir.params import Bool, ClosedJaxprParam, Int, Optional, Record, Str, Tuple
from jaxprc.ir.tracing import close_over_consts, eval_jaxpr, trace_to_jaxpr
from jaxprc.passes.partial_eval import partial_eval_jaxpr
from jaxprc.passes.jvp import Zero, instantiate_zeros, jvp_jaxpr
from jaxprc.passes.transpose import is_undefined_primal, transpose_jaxpr
from jaxprc.passes.vmap import axis_size_of, batch_jaxpr, rules_for_unbatched, sizes_for_unbatched
from jaxprc.engine.caches import BoundedCache
from jaxprc.engine.traceback_filtering import api_boundary
from jaxprc.sharding import ShardingParam
from .sharding_constraint import sdy_sharding
from jaxprc.engine.lowering import add_region, max_min, scalar_type
from jaxlib.mlir.dialects import sdy

from .support.vma import axes_state, check_out_specs, typed_axes, typing_axes
from .control_flow.common import (_front_dims, _new_vars, _nonzero_tangents, _pick, _split_outs,
                                  _transpose_call_outputs, check_operand_types, check_subjaxpr)

__all__ = ["shard_map_p", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "psum_scatter_p", "all_to_all_p",
           "ppermute_p", "axis_index_p", "pbroadcast_p", "psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "all_to_all",
           "ppermute", "axis_index", "axis_size", "pbroadcast", "pvary_p", "pcast", "pshuffle", "pswapaxes"]


# ------------------------------------------------------------ axis environment

_ENV = threading.local()


def _axis_env() -> dict:
    """Mesh axis name -> size, for the shard_map bodies being traced (innermost last)."""
    return getattr(_ENV, "axes", {})


def _axes(axis_name, fn: str) -> tuple:
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    env = _axis_env()
    for n in names:
        if n not in env:
            raise NameError(f"{fn}: unbound axis name: {n!r}. The axis names in scope are "
                            f"{sorted(env)} (collectives work inside shard_map over a mesh with that axis)")
    return names


@contextlib.contextmanager
def named_axis(name, size: int, vmapped: bool = True):
    """Trace with the axis ``name`` (a vmap's ``axis_name``, or with ``vmapped=False`` one of
    ``make_jaxpr``'s ``axis_env``; None: none) of ``size`` in scope."""
    saved, saved_names = _axis_env(), getattr(_ENV, "vmap_names", frozenset())
    if name is not None:
        _ENV.axes, _ENV.vmap_names = {**saved, name: size}, saved_names | ({name} if vmapped else set())
    try:
        yield
    finally:
        _ENV.axes, _ENV.vmap_names = saved, saved_names


@contextlib.contextmanager
def batching_axis(name, size: int):
    """Batch with ``name`` (of ``size``) the axis being vectorized: collectives over it act on
    the batch axis."""
    saved = getattr(_ENV, "batching", None)
    _ENV.batching = None if name is None else (name, size)
    try:
        yield
    finally:
        _ENV.batching = saved


def _batching_name():
    current = getattr(_ENV, "batching", None)
    return None if current is None else current[0]


def _batching_size() -> int:
    return _ENV.batching[1]


def axis_size(axis_name) -> int:
    env = _axis_env()
    return math.prod(env[n] for n in _axes(axis_name, "axis_size"))


# ------------------------------------------------------------------ shard_map

def _block_shape(shape, dims, sizes, fn, what):
    out = list(shape)
    for i, axes in enumerate(dims):
        ways = math.prod(sizes[a] for a in axes)
        if out[i] % ways:
            raise JaxprTypeError(f"{fn}: {what} dimension {i} of size {out[i]} is split {ways} ways "
                                 f"(over mesh axes {axes}), which does not divide it")
        out[i] //= ways
    return tuple(out)


def _shard_map_rule(*avals, jaxpr, mesh, in_specs, out_specs, manual_axes):
    check_subjaxpr("shard_map", "jaxpr", jaxpr)
    if not manual_axes or any(a not in mesh.axis_names for a in manual_axes):
        raise JaxprTypeError(f"shard_map: manual_axes {manual_axes} must be some of the mesh's axes "
                             f"{mesh.axis_names}")
    sizes = {a: s for a, s in zip(mesh.axis_names, mesh.axis_sizes) if a in manual_axes}
    if len(in_specs) != len(avals) or len(out_specs) != len(jaxpr.out_avals):
        raise JaxprTypeError(f"shard_map: {len(in_specs)} in_specs for {len(avals)} operands and "
                             f"{len(out_specs)} out_specs for {len(jaxpr.out_avals)} results")
    for spec in in_specs + out_specs:
        for axes in spec:
            if any(a not in sizes for a in axes):
                raise JaxprTypeError(f"shard_map: a spec names axes {axes} that are not manual axes "
                                     f"{manual_axes} of the mesh")
    blocks = [a.update(shape=_block_shape(a.shape, s, sizes, "shard_map", f"operand {i}"))
              for i, (a, s) in enumerate(zip(avals, in_specs))]
    check_operand_types("shard_map", "operands (blocks of the body's inputs)", jaxpr.in_avals, blocks)
    for what, body_avals, specs in (("input", jaxpr.in_avals, in_specs), ("output", jaxpr.out_avals, out_specs)):
        for i, (a, spec) in enumerate(zip(body_avals, specs)):
            split = {n for axes in spec for n in axes}
            if not a.vma <= split:      # a value the same on every device of an axis it is not split over
                raise JaxprTypeError(f"shard_map: body {what} {i} of type {a.str_short()} varies over manual axes "
                                     f"{sorted(a.vma - split)} its spec {spec} does not split it over")
    outs = []
    for a, spec in zip(jaxpr.out_avals, out_specs):
        shape = list(a.shape)
        for i, axes in enumerate(spec):
            shape[i] *= math.prod(sizes[x] for x in axes)
        outs.append(a.update(shape=tuple(shape), vma=frozenset()))     # whole arrays vary over no manual axis
    return outs


_SPEC = Tuple(Tuple(Tuple(Str())))
shard_map_p = Primitive("shard_map")
shard_map_p.multiple_results = True
shard_map_p.def_params(jaxpr=ClosedJaxprParam(), mesh=Record(ShardingParam), in_specs=_SPEC, out_specs=_SPEC,
                       manual_axes=Tuple(Str()))
shard_map_p.def_abstract_eval(_shard_map_rule)


def _spec_dims(spec, ndim: int, fn: str) -> tuple:
    from jaxprc.sharding import PartitionSpec
    spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
    if len(spec) > ndim:
        raise ValueError(f"{fn}: spec {spec} has more entries than the value's {ndim} dimensions")
    return spec.axes(ndim)


def _shard_map_impl(*args, jaxpr, **params):
    """Eagerly: a jit of the one call (the program over the mesh's devices), kept while its
    body lives."""
    from jaxprc.api import jit
    key = (id(jaxpr), tuple(params.values()))
    _, call = _EAGER.get(key, lambda: (jaxpr, jit(lambda *a: shard_map_p.bind(*a, jaxpr=jaxpr, **params))))
    return call(*args)


# (body jaxpr's id, params) -> (the body, its jitted call): the entry keeps the body alive, so no
# other body can take its id while the entry is there.
_EAGER = BoundedCache()


shard_map_p.def_impl(_shard_map_impl)


def _shard_map_jvp(primals, tangents, *, jaxpr, mesh, in_specs, out_specs, manual_axes):
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, consts = close_over_consts(body)
    const_specs = _replicated(consts)
    tangent_specs = tuple(s for s, nz in zip(in_specs, nonzeros) if nz)
    outs = shard_map_p.bind(*consts, *primals, *_nonzero_tangents(tangents, nonzeros), jaxpr=body, mesh=mesh,
                            in_specs=const_specs + tuple(in_specs) + tangent_specs,
                            out_specs=tuple(out_specs) + tuple(s for s, nz in zip(out_specs, out_nz) if nz),
                            manual_axes=manual_axes)
    return _split_outs(outs, len(jaxpr.out_avals), out_nz, [o.aval for o in outs[:len(jaxpr.out_avals)]])


ad.primitive_jvps[shard_map_p] = _shard_map_jvp


def _unmentioned(manual_axes, spec) -> tuple:
    """The manual axes a value with ``spec`` is replicated over."""
    return tuple(n for n in manual_axes if all(n not in axes for axes in spec))


def _manual_sizes(mesh, manual_axes) -> dict:
    return {a: s for a, s in zip(mesh.axis_names, mesh.axis_sizes) if a in manual_axes}


def _shard_map_transpose(cts, *args, jaxpr, mesh, in_specs, out_specs, manual_axes):
    """The body transposed, per device. A result replicated over some axes has its cotangent
    split evenly among the copies, and a replicated argument sums its devices' cotangents; with
    psum transposed to psum these give the cotangents of the global function."""
    from jaxprc import lax
    linear = [is_undefined_primal(a) for a in args]
    ct_cj, nonzeros = transpose_jaxpr(jaxpr, linear, instantiate=False)
    sizes = _manual_sizes(mesh, manual_axes)
    lin_specs = [s for s, lin in zip(in_specs, linear) if lin]
    ct_specs = [s for s, nz in zip(lin_specs, nonzeros) if nz]
    n_nonlin = linear.count(False)

    def body(*xs):
        cts_in = list(xs[n_nonlin:])
        for i, spec in enumerate(out_specs):
            copies = math.prod(sizes[n] for n in _unmentioned(manual_axes, spec))
            if copies > 1:
                cts_in[i] = lax.div(cts_in[i], lax.full((), copies, cts_in[i].dtype))
        outs = eval_jaxpr(ct_cj.jaxpr, ct_cj.consts, *xs[:n_nonlin], *cts_in)
        return [psum_p.bind(o, axes=_unmentioned(manual_axes, s)) if _unmentioned(manual_axes, s) else o
                for o, s in zip(outs, ct_specs)]
    traced = _trace_body(body, ct_cj.in_avals, sizes)
    body_j, consts = close_over_consts(traced)
    outs = shard_map_p.bind(*consts, *[a for a in args if not is_undefined_primal(a)],
                            *map(instantiate_zeros, cts), jaxpr=body_j, mesh=mesh,
                            in_specs=_replicated(consts) + tuple(s for s, lin in zip(in_specs, linear) if not lin)
                            + tuple(out_specs), out_specs=tuple(ct_specs), manual_axes=manual_axes)
    return _transpose_call_outputs(outs, args, nonzeros)


def _replicated(values) -> tuple:
    return tuple(tuple(() for _ in np.shape(v)) for v in values)


def _trace_body(fun, block_avals, sizes, vma_axes=frozenset()):
    """Trace a shard_map body on per-device blocks, with the mesh's axes in scope and values typed
    with the ``vma_axes`` they vary over (check_vma)."""
    saved = _axis_env()
    _ENV.axes = {**saved, **sizes}
    try:
        with typing_axes(vma_axes):
            return trace_to_jaxpr(fun, list(block_avals), name="shard_map")
    finally:
        _ENV.axes = saved


ad.primitive_transposes[shard_map_p] = _shard_map_transpose


def _pe_shard_map(eqn, uk_in):
    """Split the body into its known part (primal, run now) and unknown part (tangents). The
    residuals go from one to the other as per-device blocks stacked along dimension 0 over all
    mesh axes (scalars as blocks of one)."""
    from jaxprc import lax
    p = eqn.params
    mesh, every = p["mesh"], tuple(p["manual_axes"])
    known, unknown, out_uk, n_res = partial_eval_jaxpr(p["jaxpr"], uk_in, False)
    res_avals = known.out_avals[len(known.out_avals) - n_res:]
    n_known_out = len(known.out_avals) - n_res

    def known_fn(*xs):
        outs = eval_jaxpr(known.jaxpr, known.consts, *xs)
        return outs[:n_known_out] + [r if r.ndim else lax.reshape(r, (1,)) for r in outs[n_known_out:]]

    def unknown_fn(*xs):
        res = [r if a.ndim else lax.reshape(r, ()) for r, a in zip(xs[:n_res], res_avals)]
        return eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *xs[n_res:])
    sizes = _manual_sizes(mesh, every)
    k_body, k_consts = close_over_consts(_trace_body(known_fn, known.in_avals, sizes))
    u_blocks = [a if a.ndim else a.update(shape=(1,)) for a in res_avals] + list(unknown.in_avals[n_res:])
    u_body, u_consts = close_over_consts(_trace_body(unknown_fn, u_blocks, sizes))
    if k_consts or u_consts:
        raise NotImplementedError("shard_map: differentiating a body that builds array constants in "
                                  "its primal part is not supported")
    n = math.prod(sizes.values())
    res_specs = tuple(((every,) + ((),) * (a.ndim - 1)) for a in u_blocks[:n_res])
    residuals = _new_vars([a.update(shape=(a.shape[0] * n,) + a.shape[1:], vma=frozenset()) for a in u_blocks[:n_res]])
    in_specs, out_specs = p["in_specs"], p["out_specs"]
    k_eqn = eqn.replace(invars=_pick(eqn.invars, uk_in, False), outvars=_pick(eqn.outvars, out_uk, False) + residuals,
                        params={**p, "jaxpr": k_body, "in_specs": tuple(_pick(in_specs, uk_in, False)),
                                "out_specs": tuple(_pick(out_specs, out_uk, False)) + res_specs})
    u_eqn = eqn.replace(invars=residuals + _pick(eqn.invars, uk_in), outvars=_pick(eqn.outvars, out_uk),
                        params={**p, "jaxpr": u_body, "in_specs": res_specs + tuple(_pick(in_specs, uk_in)),
                                "out_specs": tuple(_pick(out_specs, out_uk))})
    return [k_eqn], [u_eqn], out_uk


pe.partial_eval_jaxpr_custom_rules[shard_map_p] = _pe_shard_map


def _shard_map_batch(args, dims, *, jaxpr, mesh, in_specs, out_specs, manual_axes):
    """The batch axis (moved to the front) is not split: each device runs the batched body."""
    args = [x if d is batching.not_mapped else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    front = [batching.not_mapped if d is batching.not_mapped else 0 for d in dims]
    body, out_b = batch_jaxpr(jaxpr, axis_size_of(args, front), front)
    in_specs = tuple(s if d is batching.not_mapped else ((),) + tuple(s) for s, d in zip(in_specs, dims))
    out_specs = tuple(((),) + tuple(s) if b else s for s, b in zip(out_specs, out_b))
    outs = shard_map_p.bind(*args, jaxpr=body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                            manual_axes=manual_axes)
    return outs, _front_dims(out_b)


batching.primitive_batchers[shard_map_p] = _shard_map_batch


def _shard_map_lowering(ctx, *args, jaxpr, mesh, in_specs, out_specs, manual_axes):
    mctx = ctx.module_context
    if math.prod(mesh.axis_sizes) == 1:      # one device: the body as it is (XLA partitions nothing)
        return _with_axis_env(mctx, mesh, manual_axes, lambda: ctx.lower_jaxpr(jaxpr, *args))
    manual = [ir.StringAttr.get(n) for n in mesh.axis_names if n in manual_axes]
    per_value = lambda specs, avals: sdy.TensorShardingPerValueAttr.get(       # noqa: E731
        [sdy_sharding(mesh._replace(dims=s), a.ndim) for s, a in zip(specs, avals)])
    op = sdy.ManualComputationOp([mctx.ir_type(a) for a in ctx.avals_out], list(args),
                                 per_value(in_specs, ctx.avals_in), per_value(out_specs, ctx.avals_out),
                                 sdy.ManualAxesAttr.get(manual))
    block = op.body.blocks.append(*[mctx.ir_type(a) for a in jaxpr.in_avals])
    with ir.InsertionPoint(block):
        sdy.ReturnOp(list(_with_axis_env(mctx, mesh, manual_axes,
                                         lambda: ctx.lower_jaxpr(jaxpr, *block.arguments))))
    return list(op.results)


def _with_axis_env(mctx, mesh, manual_axes, lower):
    """``lower()`` with the mesh's axes known to the collectives' lowerings (groups of devices are
    over the whole mesh, manual axes or not)."""
    outer = getattr(mctx, "axis_env", None), getattr(mctx, "manual_axes", None), getattr(mctx, "mesh", None)
    mctx.axis_env, mctx.manual_axes, mctx.mesh = (mesh.axis_names, mesh.axis_sizes), tuple(manual_axes), mesh
    try:
        return lower()
    finally:
        mctx.axis_env, mctx.manual_axes, mctx.mesh = outer


mlir.register_lowering(shard_map_p, _shard_map_lowering)


def shard_map(f=None, /, *, out_specs, in_specs, mesh=None, axis_names=frozenset(), check_vma=True):
    """Run ``f`` on each device of ``mesh`` with its blocks of the arguments (``in_specs``) and
    assemble its results (``out_specs``); in ``f`` the collectives name the mesh's axes."""
    if f is None:
        return lambda g: shard_map(g, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                   axis_names=axis_names, check_vma=check_vma)
    from jaxprc import sharding as shd
    from jaxprc.ir.tree_util import tree_flatten, tree_unflatten
    from jaxprc.ir.tracing import get_aval
    from jaxprc.engine.spmd import broadcast

    @api_boundary
    def wrapped(*args):
        m = mesh if mesh is not None else shd.context_mesh()
        if not isinstance(m, shd.Mesh):
            raise ValueError("shard_map: give mesh=, or set one with jaxprc.set_mesh(mesh)")
        unknown = [a for a in axis_names if a not in m.axis_names]
        if unknown:
            raise ValueError(f"shard_map: axis_names {sorted(axis_names)} name axes {unknown} that are not in "
                             f"the mesh {m.axis_names}")
        manual = tuple(a for a in m.axis_names if not axis_names or a in axis_names)
        leaves, tree = tree_flatten(args)
        avals = [get_aval(x) for x in leaves]
        specs = [_spec_dims(s if s is not None else (), a.ndim, "shard_map in_specs")
                 for a, s in zip(avals, broadcast(in_specs, tree, "shard_map in_specs"))]
        _only_manual(specs, manual, "in_specs")
        sizes = _manual_sizes(m, manual)
        typed = frozenset(manual) if check_vma else frozenset()
        blocks = [a.update(shape=_block_shape(a.shape, s, sizes, "shard_map", f"argument {i}"),
                           vma=frozenset(n for axes in s for n in axes if n in typed))
                  for i, (a, s) in enumerate(zip(avals, specs))]
        out_box = []

        def body(*flat):
            out_leaves, out_tree = tree_flatten(f(*tree_unflatten(tree, list(flat))))
            out_box.append(out_tree)
            return out_leaves

        cj = _trace_body(body, blocks, sizes, typed)
        jaxpr, consts = close_over_consts(cj)
        out_tree = out_box[0]
        o_specs = [_spec_dims(s if s is not None else (), a.ndim, "shard_map out_specs")
                   for a, s in zip(jaxpr.out_avals, broadcast(out_specs, out_tree, "shard_map out_specs"))]
        _only_manual(o_specs, manual, "out_specs")
        if check_vma:
            from jaxprc.ir.tree_util import keystr, tree_flatten_with_path
            paths = [keystr(p) for p, _ in tree_flatten_with_path(out_tree.unflatten([0] * out_tree.num_leaves))[0]]
            check_out_specs(f, m, jaxpr.out_avals, o_specs, paths)
        param = ShardingParam.of(shd.NamedSharding(m, shd.PartitionSpec()))
        outs = shard_map_p.bind(*consts, *leaves, jaxpr=jaxpr, mesh=param,
                                in_specs=_replicated(consts) + tuple(specs),
                                out_specs=tuple(o_specs), manual_axes=manual)
        return tree_unflatten(out_tree, outs)
    return wrapped


def _only_manual(specs, manual, what: str) -> None:
    for spec in specs:
        for axes in spec:
            other = [a for a in axes if a not in manual]
            if other:
                raise ValueError(f"shard_map {what} can only refer to the manual axes {manual} (axis_names), "
                                 f"got a spec naming {other}")


# ------------------------------------------------------------------ collectives

def _same_type(name):
    def rule(x, *, axes):
        if not axes:
            raise JaxprTypeError(f"{name}: needs at least one axis name")
        return x
    return rule


def _reducer(name):
    p = Primitive(name)
    p.def_abstract_eval(_same_type(name))
    p.def_vma_rule(lambda x, *, axes: x.vma - frozenset(axes))    # the same along its axes
    p.def_params(axes=Tuple(Str()))
    return p


psum_p, pmax_p, pmin_p = _reducer("psum"), _reducer("pmax"), _reducer("pmin")
ad.defjvp_linear(psum_p)

all_gather_p = Primitive("all_gather")
all_gather_p.def_params(axes=Tuple(Str()), axis_size=Int(min=1), all_gather_dimension=Int(min=0), tiled=Bool())


def _all_gather_rule(x, *, axes, axis_size, all_gather_dimension, tiled):
    d = all_gather_dimension
    if d > x.ndim - (1 if tiled else 0):
        raise JaxprTypeError(f"all_gather: all_gather_dimension {d} is out of range for {x.str_short()}")
    shape = list(x.shape)
    if tiled:
        shape[d] *= axis_size
    else:
        shape.insert(d, axis_size)
    return x.update(shape=tuple(shape))


all_gather_p.def_abstract_eval(_all_gather_rule)
ad.defjvp_linear(all_gather_p)

psum_scatter_p = Primitive("psum_scatter")
psum_scatter_p.def_params(axes=Tuple(Str()), axis_size=Int(min=1), scatter_dimension=Int(min=0), tiled=Bool())


def _psum_scatter_rule(x, *, axes, axis_size, scatter_dimension, tiled):
    d = scatter_dimension
    if d >= x.ndim:
        raise JaxprTypeError(f"psum_scatter: scatter_dimension {d} is out of range for {x.str_short()}")
    n = x.shape[d]
    if (tiled and n % axis_size) or (not tiled and n != axis_size):
        raise JaxprTypeError(f"psum_scatter: dimension {d} of {x.str_short()} must be "
                             f"{'a multiple of' if tiled else 'equal to'} the axis size {axis_size}")
    shape = list(x.shape)
    if tiled:
        shape[d] //= axis_size
    else:
        del shape[d]
    return x.update(shape=tuple(shape))


psum_scatter_p.def_abstract_eval(_psum_scatter_rule)
ad.defjvp_linear(psum_scatter_p)

all_to_all_p = Primitive("all_to_all")     # the tiled form: all_to_all() adds/removes the axis
# axis_index_groups: indices along ``axes`` split into equal groups, each exchanging among itself
# (``axis_size`` is then a group's size); left out, one group of all
all_to_all_p.def_params(axes=Tuple(Str()), axis_size=Int(min=1), split_axis=Int(min=0), concat_axis=Int(min=0),
                        axis_index_groups=Optional(Tuple(Tuple(Int(min=0)))))


def _all_to_all_rule(x, *, axes, axis_size, split_axis, concat_axis, axis_index_groups=None):
    if axis_index_groups is not None and any(len(g) != axis_size for g in axis_index_groups):
        raise JaxprTypeError(f"all_to_all: axis_index_groups {axis_index_groups} must all have axis_size "
                             f"{axis_size} indices")
    if split_axis >= x.ndim or concat_axis >= x.ndim:
        raise JaxprTypeError(f"all_to_all: split_axis {split_axis} or concat_axis {concat_axis} is out of "
                             f"range for {x.str_short()}")
    if x.shape[split_axis] % axis_size:
        raise JaxprTypeError(f"all_to_all: dimension {split_axis} of {x.str_short()} must be a multiple of "
                             f"the axis size {axis_size}")
    shape = list(x.shape)
    shape[split_axis] //= axis_size
    shape[concat_axis] *= axis_size
    return x.update(shape=tuple(shape))


all_to_all_p.def_abstract_eval(_all_to_all_rule)
ad.defjvp_linear(all_to_all_p)

ppermute_p = Primitive("ppermute")
ppermute_p.def_params(axes=Tuple(Str()), perm=Tuple(Tuple(Int(min=0))))
ppermute_p.def_abstract_eval(lambda x, *, axes, perm: x)
ad.defjvp_linear(ppermute_p)

axis_index_p = Primitive("axis_index")
axis_index_p.def_params(axis_name=Str())
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), np.dtype(np.int32)))


def _tree_map(fn, x):
    from jaxprc.ir.tree_util import tree_map
    return tree_map(fn, x)


def _typed_state(v, axes, fn: str) -> None:
    """JAX's error for a collective over axes some of which ``v`` varies over and some not."""
    typed = tuple(a for a in axes if a in typed_axes())
    if typed:
        axes_state(_aval(v), typed, fn)


def _aval(v):
    from jaxprc.ir.tracing import get_aval
    return get_aval(v)


def _to_varying(v, axes):
    """``v`` typed as varying over ``axes`` (those typed in this body): a ``pvary`` where it is
    invariant, as JAX's collectives make their operands before exchanging them."""
    typed = typed_axes()
    missing = tuple(a for a in axes if a in typed and a not in _aval(v).vma)
    return pvary_p.bind(v, axes=missing) if missing else v


def vary_like(x, model):
    """``x`` typed as varying over the manual axes the aval ``model`` varies over."""
    missing = tuple(sorted(model.vma - _aval(x).vma))
    return pvary_p.bind(x, axes=missing) if missing else x


def psum(x, axis_name):
    axes = _axes(axis_name, "psum")

    def one(v):
        _typed_state(v, axes, "jax.lax.psum")
        return psum_p.bind(v, axes=axes)
    return _tree_map(one, x)


def pmax(x, axis_name):
    axes = _axes(axis_name, "pmax")
    return _tree_map(lambda v: pmax_p.bind(v, axes=axes), x)


def pmin(x, axis_name):
    axes = _axes(axis_name, "pmin")
    return _tree_map(lambda v: pmin_p.bind(v, axes=axes), x)


def pmean(x, axis_name):
    from jaxprc import lax
    n = axis_size(axis_name)
    return _tree_map(lambda v: lax.div(v, lax.convert_element_type(n, v.dtype)), psum(x, axis_name))


def all_gather(x, axis_name, *, axis: int = 0, tiled: bool = False, to: str = "varying"):
    if to not in ("varying", "reduced", "invarying"):
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` values are: "
                         "{'varying', 'reduced', 'invarying'}")
    if to == "reduced":
        raise NotImplementedError("lax.all_gather(to='reduced'): jaxprc types no reduced values")
    axes = _axes(axis_name, "all_gather")
    if to == "invarying":
        return _tree_map(lambda v: all_gather_invariant(v, axes, axis, tiled), x)
    return _tree_map(lambda v: all_gather_p.bind(_to_varying(v, axes), axes=axes, axis_size=axis_size(axis_name),
                                                 all_gather_dimension=int(axis) % (v.ndim + (0 if tiled else 1)),
                                                 tiled=bool(tiled)), x)


def all_gather_invariant(v, axes, axis: int, tiled: bool):
    """``all_gather(to="invarying")``: every device's block put in its place along ``axis`` of
    zeros and summed over ``axes``, so the result is typed as the same on every device (JAX's
    all_gather_invariant; a sum computes it, which transposes and batches as sums do)."""
    from jaxprc import lax
    d = int(axis) % (v.ndim + (0 if tiled else 1))
    if not tiled:
        v = lax.expand_dims(v, (d,))
    shape = list(v.shape)
    block, shape[d] = shape[d], shape[d] * axis_size(axes)
    start = [lax.full((), 0, np.int32)] * len(shape)
    start[d] = lax.mul(axis_index(axes), lax.full((), block, np.int32))
    placed = lax.dynamic_update_slice(lax.full(shape, 0, v.dtype), v, start)
    return psum_p.bind(placed, axes=tuple(axes))


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, tiled: bool = False):
    """The sum over ``axis_name``, of which each device keeps its block along ``scatter_dimension``."""
    axes = _axes(axis_name, "psum_scatter")

    def one(v):
        _typed_state(v, axes, "jax.lax.psum_scatter")
        return psum_scatter_p.bind(_to_varying(v, axes), axes=axes, axis_size=axis_size(axis_name),
                                   scatter_dimension=int(scatter_dimension) % v.ndim, tiled=bool(tiled))
    return _tree_map(one, x)


def _index_groups(axis_index_groups, axis_name, fn: str):
    """``axis_index_groups`` as a tuple of tuples, checked: equal groups covering every index
    along ``axis_name`` once (None stays None)."""
    if axis_index_groups is None:
        return None
    groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    n = axis_size(axis_name)
    if sorted(i for g in groups for i in g) != list(range(n)):
        raise ValueError(f"{fn}: axis_index_groups {axis_index_groups} must cover all indices exactly once "
                         f"(the {n} indices of axis {axis_name!r})")
    if len({len(g) for g in groups}) != 1:
        raise ValueError(f"{fn}: axis_index_groups {axis_index_groups} must all be the same size")
    return groups


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None, tiled: bool = False):
    """Split ``split_axis`` into one block per device along ``axis_name``, send block i to device
    i, and put the received blocks along ``concat_axis`` (a new axis unless ``tiled``). With
    ``axis_index_groups`` each group of indices along ``axis_name`` exchanges among itself."""
    from jaxprc import lax
    axes = _axes(axis_name, "all_to_all")
    groups = _index_groups(axis_index_groups, axis_name, "all_to_all")
    n = axis_size(axis_name) if groups is None else len(groups[0])
    extra = {} if groups is None else {"axis_index_groups": groups}

    def one(v):
        split, concat = int(split_axis) % v.ndim, int(concat_axis) % v.ndim
        if not tiled:
            if v.shape[split] != n:
                per = "" if groups is None else ", per group"
                raise ValueError(f"all_to_all: the size of axis {axis_name!r} ({n}{per}) must equal "
                                 f"x.shape[split_axis] ({v.shape[split]})")
            if split < concat:
                concat += 1
                v = lax.expand_dims(v, (concat,))
            elif split > concat:
                v = lax.expand_dims(v, (concat,))
                split += 1
        out = all_to_all_p.bind(_to_varying(v, axes), axes=axes, axis_size=n, split_axis=split,
                                concat_axis=concat, **extra)
        return lax.squeeze(out, (split,)) if not tiled and split != concat else out
    return _tree_map(one, x)


def pswapaxes(x, axis_name, axis: int, *, axis_index_groups=None):
    """Swap the device axis ``axis_name`` with ``x``'s axis ``axis`` (whose size is the number of
    devices in a group): ``all_to_all(x, axis_name, axis, axis)``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def pshuffle(x, axis_name, perm):
    """The value of device ``perm[i]`` along ``axis_name`` on device ``i``: a ``ppermute`` whose
    ``perm`` lists every index's source."""
    perm = list(perm)
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def ppermute(x, axis_name, perm):
    axes = _axes(axis_name, "ppermute")
    n = axis_size(axis_name)
    perm = tuple((int(s), int(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or not all(0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {perm} must pair distinct sources with distinct destinations in "
                         f"[0, {n}) (the size of axis {axis_name!r})")
    return _tree_map(lambda v: ppermute_p.bind(_to_varying(v, axes), axes=axes, perm=perm), x)


def axis_index(axis_name):
    """This member's position along ``axis_name``; over several axes, its row-major position in
    their product (the first axis varies slowest), as JAX numbers them."""
    from jaxprc import lax
    names = _axes(axis_name, "axis_index")
    one = lambda name: _to_varying(axis_index_p.bind(axis_name=name), (name,))   # noqa: E731
    index = one(names[0])
    for name in names[1:]:
        index = lax.add(lax.mul(index, lax.full((), axis_size(name), np.int32)), one(name))
    return index


def _vmapped(prim: str, axes) -> bool:
    """Whether the collective names the axis a vmap is batching now (``vmap(axis_name=)``)."""
    name = _batching_name()
    if name is None or name not in axes:
        return False
    if prim not in ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all") and axes != (name,):
        raise NotImplementedError(f"{prim} over a vmap axis together with other axes {axes} is not supported")
    return True


def _split_vmapped(prim: str, axes, axis_size: int):
    """For a collective over the vmapped axis and ``rest`` of ``axes``: (rest, their size, whether the
    vmapped axis comes first in the combined index). The combined index is row-major over ``axes``,
    so the vmapped axis must come first or last among them."""
    name = _batching_name()
    k = axes.index(name)
    rest = axes[:k] + axes[k + 1:]
    if 0 < k < len(axes) - 1:
        raise NotImplementedError(f"{prim} over axes {axes}: the vmapped axis {name!r} must come first or "
                                  "last among them")
    return rest, axis_size // _batching_size(), k == 0


def _at_front(x, d):
    """``x`` with the batch axis first (broadcast to the batch size when unbatched)."""
    from jaxprc import lax
    if d is batching.not_mapped:
        return lax.broadcast_in_dim(x, (_batching_size(),) + x.aval.shape, tuple(range(1, x.aval.ndim + 1)))
    return batching.moveaxis(x, d, 0)


def _reduce_batch(prim):
    """Across devices, elementwise within one: the batch axis stays put; over the vmapped axis a
    reduction along the batch axis (the result is the same for every example)."""
    def rule(args, dims, *, axes):
        from jaxprc import lax
        (x,), (d,) = args, dims
        if _vmapped(prim.name, axes):
            if d is batching.not_mapped:      # the same value in every example
                if prim.name == "psum":
                    x = lax.mul(x, lax.full((), _batching_size(), x.aval.dtype))
            else:
                x = {"psum": lax.reduce_sum, "pmax": lax.reduce_max, "pmin": lax.reduce_min}[prim.name](x, (d,))
                d = batching.not_mapped
            axes = tuple(a for a in axes if a != _batching_name())
        return (prim.bind(x, axes=axes) if axes else x), d
    return rule


for _p in (psum_p, pmax_p, pmin_p):
    batching.primitive_batchers[_p] = _reduce_batch(_p)


def _ppermute_batch(args, dims, *, axes, perm):
    """Over the vmapped axis: example ``dst`` gets example ``src``'s value, zeros where no pair
    sends to it."""
    from jaxprc import lax
    (x,), (d,) = args, dims
    if not _vmapped("ppermute", axes):
        return ppermute_p.bind(x, axes=axes, perm=perm), d
    n = _batching_size()
    x = batching.moveaxis(x, d, 0) if d is not batching.not_mapped else \
        lax.broadcast_in_dim(x, (n,) + x.aval.shape, tuple(range(1, x.aval.ndim + 1)))
    source = dict((dst, src) for src, dst in perm)
    zero = lax.full((1,) + x.aval.shape[1:], 0, x.aval.dtype)
    return lax.concatenate([lax.index_in_dim(x, source[b], 0) if b in source else zero for b in range(n)], 0), 0


batching.primitive_batchers[ppermute_p] = _ppermute_batch


def _per_example(prim, x, d, dim_param: str, dim: int, **params):
    """A collective over other axes than the vmapped one, on each example: the batch axis first,
    the collective's dimension ``dim_param`` shifted past it."""
    if d is batching.not_mapped:
        return prim.bind(x, **{dim_param: dim}, **params), d
    return prim.bind(batching.moveaxis(x, d, 0), **{dim_param: dim + 1}, **params), 0


def _merge_dims(x, g: int):
    """``x`` with dims ``g`` and ``g + 1`` merged into one (row-major)."""
    from jaxprc import lax
    shape = list(x.aval.shape)
    return lax.reshape(x, tuple(shape[:g] + [shape[g] * shape[g + 1]] + shape[g + 2:]))


def _all_gather_batch(args, dims, *, all_gather_dimension, axes, axis_size, tiled):
    """Over the vmapped axis the examples are gathered: the batch axis moves to the gathered
    dimension (then gathered over the other axes, and the two gathered dims merged in ``axes``'
    order)."""
    from jaxprc import lax
    x, d, g = args[0], dims[0], all_gather_dimension
    if not _vmapped("all_gather", axes):
        return _per_example(all_gather_p, x, d, "all_gather_dimension", g, axes=axes, axis_size=axis_size,
                            tiled=tiled)
    rest, rest_size, first = _split_vmapped("all_gather", axes, axis_size)
    x = batching.moveaxis(_at_front(x, d), 0, g)       # the examples along a new dimension g
    if rest:
        x = all_gather_p.bind(x, axes=rest, axis_size=rest_size, all_gather_dimension=g, tiled=False)
        if first:    # dims g, g+1 are (rest, vmapped); the combined index wants the vmapped axis major
            x = lax.transpose(x, tuple(range(g)) + (g + 1, g) + tuple(range(g + 2, x.aval.ndim)))
        x = _merge_dims(x, g)
    return (_merge_dims(x, g) if tiled else x), batching.not_mapped


batching.primitive_batchers[all_gather_p] = _all_gather_batch
rules_for_unbatched.update((psum_p, pmax_p, pmin_p, ppermute_p, all_gather_p))


def _psum_scatter_batch(args, dims, *, scatter_dimension, axes, axis_size, tiled):
    """Over the vmapped axis: the sum over the examples, of which example b keeps block b along
    the scatter dimension (split first into the vmapped axis and the others, in ``axes``' order,
    which then scatter the rest)."""
    from jaxprc import lax
    x, d, s = args[0], dims[0], scatter_dimension
    if not _vmapped("psum_scatter", axes):
        return _per_example(psum_scatter_p, x, d, "scatter_dimension", s, axes=axes, axis_size=axis_size,
                            tiled=tiled)
    rest, rest_size, first = _split_vmapped("psum_scatter", axes, axis_size)
    total = lax.reduce_sum(_at_front(x, d), (0,))
    shape = list(total.aval.shape)
    if tiled:           # blocks of the scattered dimension: (axis_size, block) there
        shape[s:s + 1] = [axis_size, shape[s] // axis_size]
    n = _batching_size()
    split = [n, rest_size] if first else [rest_size, n]
    shape[s:s + 1] = split if rest else [n]
    total = lax.reshape(total, tuple(shape))
    v = s if first or not rest else s + 1               # the vmapped axis' dimension
    out = batching.moveaxis(total, v, 0)                # example b keeps its block b
    if rest:
        out = psum_scatter_p.bind(out, axes=rest, axis_size=rest_size, scatter_dimension=s + 1, tiled=False)
    return out, 0


batching.primitive_batchers[psum_scatter_p] = _psum_scatter_batch


def _axis_index_batch(args, dims, *, axis_name):
    """Over the vmapped axis, each example's index."""
    from jaxprc import lax
    if axis_name != _batching_name():
        return axis_index_p.bind(axis_name=axis_name), batching.not_mapped
    return lax.iota(np.int32, _batching_size()), 0


batching.primitive_batchers[axis_index_p] = _axis_index_batch
rules_for_unbatched.update((psum_scatter_p, axis_index_p))


def _uses_axis(jaxpr, name) -> bool:
    """Whether ``jaxpr`` (its sub-programs too) has a collective over the axis ``name``."""
    return any((e.primitive in rules_for_unbatched and name in e.params.get("axes", (e.params.get("axis_name"),)))
               or any(_uses_axis(sub.jaxpr, name) for sub in subjaxprs(e)) for e in jaxpr.eqns)


def _size_if_sub_program_uses_vmapped_axis(eqn):
    name = _batching_name()
    if name is None or not any(_uses_axis(sub.jaxpr, name) for sub in subjaxprs(eqn)):
        return None
    return _batching_size()


sizes_for_unbatched.append(_size_if_sub_program_uses_vmapped_axis)
# all_gather is a psum of each block put in its place: the transposes are each other
ad.primitive_transposes[all_gather_p] = lambda ct, x, *, axes, axis_size, all_gather_dimension, tiled: [
    ct if isinstance(ct, Zero) else psum_scatter_p.bind(ct, axes=axes, axis_size=axis_size,
                                                        scatter_dimension=all_gather_dimension, tiled=tiled)]
ad.primitive_transposes[all_to_all_p] = lambda ct, x, *, split_axis, concat_axis, **params: [
    ct if isinstance(ct, Zero) else all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis, **params)]


def _all_to_all_batch(args, dims, *, split_axis, concat_axis, **params):
    from jaxprc import lax
    x, d = args[0], dims[0]
    if not _vmapped("all_to_all", params["axes"]):
        if d is batching.not_mapped:
            return all_to_all_p.bind(x, split_axis=split_axis, concat_axis=concat_axis, **params), d
        x = batching.moveaxis(x, d, 0)
        return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1, **params), 0
    # over the vmapped axis: example b gets chunk b of every example's split axis, concatenated
    # (source-major) along the concat axis
    if params.get("axis_index_groups") is not None:
        raise NotImplementedError("all_to_all with axis_index_groups over a vmap axis is not supported (nor is "
                                  "it in JAX)")
    if params["axes"] != (_batching_name(),):
        return _all_to_all_with_other_axes(x, d, split_axis, concat_axis, **params)
    n = _batching_size()
    x = batching.moveaxis(x, d, 0) if d is not batching.not_mapped else \
        lax.broadcast_in_dim(x, (n,) + x.aval.shape, tuple(range(1, x.aval.ndim + 1)))
    shape = list(x.aval.shape[1:])
    labels = ["src"] + [i for i in range(len(shape)) if i < split_axis] + ["chunk"] + \
        [i for i in range(len(shape)) if i >= split_axis]
    sizes = {"src": n, "chunk": n, **dict(enumerate(shape))}
    sizes[split_axis] //= n
    x = lax.reshape(x, tuple(sizes[lb] for lb in labels))
    order = ["chunk"] + [lb for i in range(len(shape)) for lb in (["src", i] if i == concat_axis else [i])]
    x = lax.transpose(x, tuple(labels.index(lb) for lb in order))
    out = [n] + [sizes[i] * (n if i == concat_axis else 1) for i in range(len(shape))]
    return lax.reshape(x, tuple(out)), 0


def _all_to_all_with_other_axes(x, d, split, concat, *, axes, axis_size):
    """all_to_all over the vmapped axis and one other: every example gathers all blocks (over both
    axes), then keeps, from each source, the chunk its combined index (row-major over ``axes``)
    selects, concatenated source-major along the concat axis."""
    from jaxprc import lax
    rest, rest_size, first = _split_vmapped("all_to_all", axes, axis_size)
    if len(rest) != 1:
        raise NotImplementedError(f"all_to_all over axes {axes}: over a vmap axis, only one other axis is "
                                  "supported")
    n, p = _batching_size(), 1 + split              # p: the split axis in the gathered array
    g, _ = _all_gather_batch([x], [d], all_gather_dimension=0, axes=axes, axis_size=axis_size, tiled=False)
    shape = list(g.aval.shape)                      # (sources, *x's shape)
    pair = [n, rest_size] if first else [rest_size, n]
    g = lax.reshape(g, tuple(shape[:p] + pair + [shape[p] // axis_size] + shape[p + 1:]))
    g = lax.dynamic_index_in_dim(g, axis_index_p.bind(axis_name=rest[0]), p + 1 if first else p,
                                 keepdims=False)    # this device's index along the other axis
    g = batching.moveaxis(g, p, 0)                  # the vmapped destination index: the batch
    g = batching.moveaxis(g, 1, 1 + concat)         # sources just before the concat axis
    return _merge_dims(g, 1 + concat), 0


batching.primitive_batchers[all_to_all_p] = _all_to_all_batch
rules_for_unbatched.add(all_to_all_p)
ad.primitive_transposes[psum_scatter_p] = lambda ct, x, *, axes, axis_size, scatter_dimension, tiled: [
    ct if isinstance(ct, Zero) else all_gather_p.bind(ct, axes=axes, axis_size=axis_size,
                                                      all_gather_dimension=scatter_dimension, tiled=tiled)]
ad.defjvp_zero(axis_index_p)
# Transposes in the per-device view of shard_map's transpose (replicated cotangents split evenly)
ad.primitive_transposes[psum_p] = lambda ct, x, *, axes: [ct if isinstance(ct, Zero) else psum_p.bind(ct, axes=axes)]
ad.primitive_transposes[ppermute_p] = lambda ct, x, *, axes, perm: [     # send the values back
    ct if isinstance(ct, Zero) else ppermute_p.bind(ct, axes=axes, perm=tuple((d, s) for s, d in perm))]


# ------------------------------------------------------------------ lowering

def _mesh_of(ctx, prim: str):
    env = getattr(ctx.module_context, "axis_env", None)
    if env is None:
        raise ValueError(f"{prim}: a collective outside shard_map (its axis names are unbound)")
    return env


def _groups(ctx, axes, prim, axis_index_groups=None):
    """Replica groups (logical device ids) of the devices that differ only along ``axes``; with
    ``axis_index_groups``, each such group split into those of its indices."""
    names, sizes = _mesh_of(ctx, prim)
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    keep = [i for i, n in enumerate(names) if n not in axes]
    order = keep + [names.index(a) for a in axes]
    groups = ids.transpose(order).reshape(-1, math.prod(sizes[names.index(a)] for a in axes))
    if axis_index_groups is None:
        return groups
    return np.concatenate([groups[:, list(g)] for g in axis_index_groups], axis=1).reshape(
        -1, len(axis_index_groups[0]))


def _dense(groups):
    groups = np.ascontiguousarray(groups, np.int64)
    return ir.DenseIntElementsAttr.get(groups, type=ir.IntegerType.get_signless(64), shape=groups.shape)


def _channel_id(ctx) -> int:
    mctx = ctx.module_context
    mctx.channels = getattr(mctx, "channels", 0) + 1
    return mctx.channels


def _channel(ctx):
    return hlo.ChannelHandle.get(_channel_id(ctx), 1)      # type 1: device to device


def _reduce_lowering(kind):
    def rule(ctx, x, *, axes):
        (aval,) = ctx.avals_in
        op = hlo.AllReduceOp([x.type], [x], _dense(_groups(ctx, axes, kind)), channel_handle=_channel(ctx),
                             use_global_device_ids=True)
        combine = hlo.add if kind == "psum" else max_min(kind[1:], aval.dtype)
        add_region(op.regions[0], [scalar_type(aval.dtype)] * 2, combine)
        return op.results[0]
    return rule


for _p in (psum_p, pmax_p, pmin_p):
    mlir.register_lowering(_p, _reduce_lowering(_p.name))


def _all_gather_lowering(ctx, x, *, axes, axis_size, all_gather_dimension, tiled):
    (aval,), (out,) = ctx.avals_in, ctx.avals_out
    if not tiled:
        shape = list(aval.shape)
        shape.insert(all_gather_dimension, 1)
        x = hlo.reshape(ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(aval.dtype)), x)
    op = hlo.AllGatherOp([ctx.module_context.ir_type(out)], [x], all_gather_dimension,
                         _dense(_groups(ctx, axes, "all_gather")), channel_handle=_channel(ctx),
                         use_global_device_ids=True)
    return op.results[0]


mlir.register_lowering(all_gather_p, _all_gather_lowering)


def _psum_scatter_lowering(ctx, x, *, axes, axis_size, scatter_dimension, tiled):
    (aval,), (out,) = ctx.avals_in, ctx.avals_out
    shape = list(aval.shape)
    shape[scatter_dimension] //= axis_size
    block = ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(aval.dtype))
    op = hlo.ReduceScatterOp(block, x, scatter_dimension, _dense(_groups(ctx, axes, "psum_scatter")),
                             channel_handle=_channel(ctx), use_global_device_ids=True)
    add_region(op.regions[0], [scalar_type(aval.dtype)] * 2, hlo.add)
    return op.result if tiled else hlo.reshape(ctx.module_context.ir_type(out), op.result)


mlir.register_lowering(psum_scatter_p, _psum_scatter_lowering)


def _all_to_all_lowering(ctx, x, *, axes, axis_size, split_axis, concat_axis, axis_index_groups=None):
    groups = _groups(ctx, axes, "all_to_all", axis_index_groups)
    op = hlo.AllToAllOp([x], split_axis, concat_axis, axis_size, _dense(groups),
                        channel_handle=_channel(ctx), results=[ctx.module_context.ir_type(ctx.avals_out[0])])
    return op.results[0]


mlir.register_lowering(all_to_all_p, _all_to_all_lowering)


def _ppermute_lowering(ctx, x, *, axes, perm):
    pairs = [(g[s], g[d]) for g in _groups(ctx, axes, "ppermute") for s, d in perm]
    return hlo.CollectivePermuteOp(x, _dense(pairs), channel_handle=_channel(ctx)).result


mlir.register_lowering(ppermute_p, _ppermute_lowering)


def _axis_index_lowering(ctx, *, axis_name):
    names, sizes = _mesh_of(ctx, "axis_index")
    i = names.index(axis_name)
    stride = math.prod(sizes[i + 1:])
    u32 = ir.RankedTensorType.get((), ir.IntegerType.get_unsigned(32))
    i32 = mlir.aval_to_ir_type(ShapedArray((), np.dtype(np.int32)))

    def index():
        pid = hlo.convert(i32, hlo.PartitionIdOp(results=[u32]).result)
        return hlo.remainder(hlo.divide(pid, mlir.ir_constant(np.int32(stride))), mlir.ir_constant(np.int32(sizes[i])))
    mctx = ctx.module_context
    auto = [n for n in names if n not in mctx.manual_axes]
    if not auto or math.prod(sizes) == 1:
        return index()
    # partially manual: the partition id only means something where every axis is manual (as JAX)
    mesh = mctx.mesh
    op = sdy.ManualComputationOp([i32], [], sdy.TensorShardingPerValueAttr.get([]),
                                 sdy.TensorShardingPerValueAttr.get([sdy_sharding(mesh._replace(dims=()), 0)]),
                                 sdy.ManualAxesAttr.get([ir.StringAttr.get(n) for n in auto]))
    with ir.InsertionPoint(op.body.blocks.append()):
        sdy.ReturnOp([index()])
    return op.results[0]


mlir.register_lowering(axis_index_p, _axis_index_lowering)


# ------------------------------------------------------------------ pbroadcast

pbroadcast_p = Primitive("pbroadcast")     # every device along the axes gets the source's value
pbroadcast_p.def_params(axes=Tuple(Str()), source=Int(min=0))


def _pbroadcast_rule(x, *, axes, source):
    if not axes:
        raise JaxprTypeError("pbroadcast: needs at least one axis name")
    return x


pbroadcast_p.def_abstract_eval(_pbroadcast_rule)
ad.defjvp_linear(pbroadcast_p)


def pbroadcast(x, axis_name, source):
    """``x`` of the device at index ``source`` along ``axis_name``, on every device along it
    (XLA's CollectiveBroadcast)."""
    axes = _axes(axis_name, "pbroadcast")
    n = axis_size(axis_name)
    if not isinstance(source, (int, np.integer)) or not 0 <= source < n:
        raise ValueError(f"pbroadcast: source {source!r} must be an index in [0, {n}) along {axis_name!r}")
    return _tree_map(lambda v: pbroadcast_p.bind(v, axes=axes, source=int(source)), x)


def _linear_index(axes):
    """The index of this device along ``axes`` (the first axis slowest), in the body being traced."""
    from jaxprc import lax
    index = None
    for a in axes:
        i = axis_index_p.bind(axis_name=a)
        index = i if index is None else lax.add(lax.mul(index, lax.full((), _axis_env()[a], np.int32)), i)
    return index


def _is_source(axes, source):
    from jaxprc import lax
    return lax.eq(_linear_index(axes), lax.full((), source, np.int32))


def _pbroadcast_transpose(ct, x, *, axes, source):
    """The source gets the sum of every device's cotangent, the others nothing."""
    from jaxprc import lax
    if isinstance(ct, Zero):
        return [ct]
    total = psum_p.bind(ct, axes=axes)
    return [lax.select(lax.broadcast_in_dim(_is_source(axes, source), ct.aval.shape, ()), total,
                       lax.full(ct.aval.shape, 0, ct.aval.dtype))]


ad.primitive_transposes[pbroadcast_p] = _pbroadcast_transpose


def _pbroadcast_batch(args, dims, *, axes, source):
    from jaxprc import lax
    (x,), (d,) = args, dims
    if not _vmapped("pbroadcast", axes):
        return pbroadcast_p.bind(x, axes=axes, source=source), d
    if d is batching.not_mapped:          # the same value in every example already
        return x, d
    picked = lax.index_in_dim(x, source, d, keepdims=True)
    return lax.broadcast_in_dim(picked, x.aval.shape, tuple(range(x.aval.ndim))), d


batching.primitive_batchers[pbroadcast_p] = _pbroadcast_batch
rules_for_unbatched.add(pbroadcast_p)


def _pbroadcast_lowering(ctx, x, *, axes, source):
    """The sum over ``axes`` of the source's value and zeros elsewhere (JAX's definition of
    pbroadcast): XLA's CPU backend has no collective-broadcast."""
    from jaxprc import lax
    names, sizes = _mesh_of(ctx, "pbroadcast")

    def fn(v):
        saved = _axis_env()
        _ENV.axes = {**saved, **dict(zip(names, sizes))}
        try:
            keep = lax.broadcast_in_dim(_is_source(axes, source), v.aval.shape, ())
            return psum_p.bind(lax.select(keep, v, lax.full(v.aval.shape, 0, v.aval.dtype)), axes=axes)
        finally:
            _ENV.axes = saved
    return mlir.lower_fun(fn, multiple_results=False)(ctx, x)


mlir.register_lowering(pbroadcast_p, _pbroadcast_lowering)


# ------------------------------------------------------------------ pcast

pvary_p = Primitive("pvary")     # the same values, typed as varying over ``axes`` (lax.pcast to="varying")
pvary_p.def_params(axes=Tuple(Str()))
_add_axes = lambda x, *, axes: x.vma | frozenset(axes)      # noqa: E731
pvary_p.def_abstract_eval(lambda x, *, axes: _same_type("pvary")(x, axes=axes).update(vma=_add_axes(x, axes=axes)))
pvary_p.def_vma_rule(_add_axes)      # (its typing rule adds them to an invariant operand too)
pvary_p.def_impl(lambda x, *, axes: x)
ad.defjvp_linear(pvary_p)
# In the per-device view of shard_map's transpose a replicated argument's cotangents are summed
# over its copies, which is JAX's psum transpose of pvary: here the cotangent passes as it is.
ad.primitive_transposes[pvary_p] = lambda ct, x, *, axes: [ct]
def _pvary_batch(args, dims, *, axes):
    rest = tuple(a for a in axes if a != _batching_name())      # the vmapped axis needs no type
    return (pvary_p.bind(args[0], axes=rest) if rest else args[0]), dims[0]


batching.primitive_batchers[pvary_p] = _pvary_batch
mlir.register_lowering(pvary_p, lambda ctx, x, *, axes: x)


def pcast(x, axis_name, *, to: str):
    """``x`` typed as varying over ``axis_name`` (``to="varying"``): what check_vma needs, say for a
    loop carry that starts replicated and becomes per-device. Its values are unchanged; outside a
    body typed with check_vma it is ``x``."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name} must be a tuple or a str. Got {axis_name}")
    if not axis_name:
        return x
    if to not in ("varying", "reduced", "unreduced"):
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: {'varying', 'unreduced', 'reduced'}")
    axes = _axes(axis_name, "pcast")

    def one(v):
        state = axes_state(_aval(v), axes, "jax.lax.pcast")
        if (state, to) in (("invarying", "reduced"), ("varying", "unreduced")):
            raise NotImplementedError(f"lax.pcast(to={to!r}): jaxprc types no reduced or unreduced values")
        if (state, to) != ("invarying", "varying"):
            raise ValueError(f"Unsupported pcast from={state}, {to=}")
        typed = tuple(a for a in axes if a in typed_axes())
        return pvary_p.bind(v, axes=typed) if typed else v
    return _tree_map(one, x)
