"""``jaxprc.pmap``: a map over a leading array axis, one example per device (JAX's ``jax.pmap``).

As in JAX 0.10, pmap is ``jit`` of a ``shard_map`` over a one-axis mesh named
``axis_name`` of the first ``n`` devices: each mapped argument is split along
its mapped axis into blocks of one, the body squeezes that axis away, calls the
function (whose collectives name ``axis_name``), and puts the axis back where
``out_axes`` says. Everything else (vmap, grad, text IR, lowering) is
shard_map's. Results are arrays sharded over the devices.

Nested pmaps (``pmap(pmap(f, 'i'), 'j')``) run on a mesh of the product of
their sizes (axes ``('j', 'i')``, the outer one major), as JAX documents: the
outer pmap's shard_map is over every axis, with its arguments split along its
own and whole along the inner ones; an inner pmap takes its device's entry of
its mapped axes (``axis_index``) and gathers its results back
(``all_gather``), so the inner axes' collectives act between devices. The outer
pmap learns the inner axes from its body: an inner pmap whose axis the mesh
lacks raises ``_InnerAxis`` and the outer one traces again on a bigger mesh.
(JAX 0.10.2's own shard_map-based pmap raises a ValueError on nesting.)
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np

from jaxprc.ir.tracing import Tracer, get_aval
from jaxprc.ir.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

from .. import lax, runtime, sharding as shd
from ..api import jit
from ..lax.parallel import _axis_env, _ENV, all_gather, axis_index, shard_map
from ..engine.traceback_filtering import api_boundary
from .vmap import _flatten_axes

__all__ = ["pmap"]

_DEFAULT_AXIS = "_internal_pmap_axis_name"


class _InnerAxis(Exception):
    """An inner pmap's axis that the outer pmap's mesh does not have yet."""

    def __init__(self, name: str, size: int):
        super().__init__(f"pmap axis {name!r} of size {size} (nested)")
        self.name, self.size = name, size


def _pmap_axes() -> dict:
    """Axis name -> size of the pmaps whose bodies are being traced."""
    return getattr(_ENV, "pmap_axes", {})


def _hidden_axes() -> dict:
    """The mesh axes the outer pmap holds for inner pmaps not yet entered: name -> size."""
    return getattr(_ENV, "pmap_hidden", {})


@contextlib.contextmanager
def _pmap_scope(axes: dict, hidden: dict):
    """Trace with the pmap axes ``axes`` bound and ``hidden`` held back for inner pmaps."""
    saved = _axis_env(), _pmap_axes(), _hidden_axes()
    _ENV.axes = {**{n: k for n, k in saved[0].items() if n not in hidden}, **axes}
    _ENV.pmap_axes, _ENV.pmap_hidden = {**saved[1], **axes}, {**{n: k for n, k in saved[2].items() if n not in axes},
                                                               **hidden}
    try:
        yield
    finally:
        _ENV.axes, _ENV.pmap_axes, _ENV.pmap_hidden = saved


def _index_tuple(nums, what: str) -> tuple:
    nums = (nums,) if isinstance(nums, int) else tuple(nums)
    if not all(isinstance(i, int) for i in nums):
        raise TypeError(f"pmap {what} must be an int or a collection of ints, got {nums}")
    return nums


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(), devices=None,
         backend=None, axis_size=None, donate_argnums=()):
    """``fun`` mapped over the ``in_axes`` of its arguments, one example on each device; the
    collectives in ``fun`` (``lax.psum`` ...) name ``axis_name``."""
    if not callable(fun):
        raise TypeError(f"pmap requires a callable as its first argument, got {fun!r}")
    axis_name = _DEFAULT_AXIS if axis_name is None else axis_name
    if not isinstance(axis_name, str):
        raise TypeError(f"pmap: axis_name must be a string in jaxprc, got {axis_name!r}")
    if backend is not None and backend != runtime.default_backend():
        raise ValueError(f"pmap: backend {backend!r} is not this process's backend "
                         f"{runtime.default_backend()!r}")
    if devices is not None:
        devices = tuple(devices)
        if not devices:
            raise ValueError("'devices' argument to pmap must be non-empty, or None.")
    static = _index_tuple(static_broadcasted_argnums, "static_broadcasted_argnums")
    donate = _index_tuple(donate_argnums, "donate_argnums")
    # donated positions among the dynamic (non-static) arguments
    donate = tuple(i - sum(s < i for s in static) for i in donate if i not in static)
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        if not all(type(a) is int for a in tree_leaves(axes)):
            raise TypeError(f"pmap {what} must be an int, None, or (nested) container with those "
                            f"types as leaves, but got {axes}.")
    cache: dict = {}
    per_tree: dict = {}      # (argument structure, static positions) -> (in_axes per leaf, donated leaves)
    inner_axes: dict = {}    # cache key -> the inner pmaps' axes found in the body ((name, size), ...)

    @api_boundary
    @functools.wraps(fun)
    def pmapped(*args, **kwargs):
        return _run(args, kwargs, lambda jitted, flat: jitted(*flat))

    def lower(*args, **kwargs):
        return _run(args, kwargs, lambda jitted, flat: jitted.lower(*flat))

    def _run(args, kwargs, call):
        outer = [n for n in _axis_env() if n not in getattr(_ENV, "vmap_names", ())]
        if any(n not in _pmap_axes() for n in outer):
            raise NotImplementedError("pmap inside shard_map is not supported")
        if outer:
            return _nested(args, kwargs)
        while True:
            key, flat = _prepare(args, kwargs)
            try:
                return call(_jitted(key), flat)
            except _InnerAxis as e:      # trace again on a mesh with the inner pmap's axis
                if (e.name, e.size) in inner_axes.get(key, ()):     # held, yet not found: a bug
                    raise RuntimeError(f"pmap: the inner pmap over {e.name!r} missed its mesh axis") from e
                inner_axes[key] = inner_axes.get(key, ()) + ((e.name, e.size),)

    def _jitted(key):
        full = (key, inner_axes.get(key, ()))
        if full not in cache:
            cache[full] = _build(*key, full[1])
        return cache[full]

    def _nested(args, kwargs):
        """Inside an outer pmap: this device's entries of the mapped axes, ``fun`` on them, and the
        devices' results gathered along ``out_axes``."""
        if devices is not None:
            raise ValueError("Nested pmaps with devices specified in either the inner or outer pmap are not "
                             "supported")
        (in_tree, axes, size, statics, _, _), flat = _prepare(args, kwargs)
        name = axis_name if axis_name != _DEFAULT_AXIS else f"{_DEFAULT_AXIS}_{len(_pmap_axes())}"
        if name in _pmap_axes():
            raise ValueError(f"pmap: axis name {name!r} is already bound by an enclosing pmap")
        held = _hidden_axes()
        if name not in held:
            raise _InnerAxis(name, size)
        if held[name] != size:
            raise ValueError(f"pmap: nested pmaps over axis {name!r} map sizes {held[name]} and {size}; one "
                             "outer pmap needs each inner axis to have one size")
        with _pmap_scope({name: size}, {}):
            i = axis_index(name)
            flat = [x if a is None else lax.dynamic_index_in_dim(x, i, a, keepdims=False)
                    for x, a in zip(flat, axes)]
            out = _call(in_tree, statics, flat)
            leaves, tree = tree_flatten(out)
            out_axes_flat = _flatten_axes("pmap out_axes", tree, out_axes)
            leaves = [x if a is None else all_gather(x, name, axis=a % (np.ndim(x) + 1))
                      for x, a in zip(leaves, out_axes_flat)]
        return tree_unflatten(tree, leaves)

    def _call(in_tree, statics, flat):
        dyn, kw = tree_unflatten(in_tree, flat)
        it = iter(dyn)
        full = [statics[static.index(i)] if i in static else next(it) for i in range(len(dyn) + len(statics))]
        return fun(*full, **kw)

    def _prepare(args, kwargs):
        if static and max(static) >= len(args):
            raise ValueError(f"pmapped function has static_broadcasted_argnums={static} but was called "
                             f"with only {len(args)} positional argument{'s' if len(args) != 1 else ''}. "
                             "All static broadcasted arguments must be passed positionally.")
        dyn_pos = [i for i in range(len(args)) if i not in static]
        statics = tuple(args[i] for i in static)
        dyn = [args[i] for i in dyn_pos]
        dyn_in_axes = (tuple(in_axes[i] for i in dyn_pos) if static and isinstance(in_axes, tuple)
                       else in_axes)
        flat, in_tree = tree_flatten((tuple(dyn), kwargs))
        tree_key = (in_tree, len(args))
        if tree_key not in per_tree:
            per_tree[tree_key] = (_flatten_axes("pmap in_axes", in_tree, (dyn_in_axes, 0)),
                                  tuple(j for j, leaf in enumerate(_leaf_owners(in_tree)) if leaf in donate))
        leaf_axes, donated = per_tree[tree_key]
        axes = [_canonical(a, x) for a, x in zip(leaf_axes, flat)]
        size = _mapped_size(flat, axes)
        if axis_size is not None and axis_size != size:
            raise ValueError(f"Specified axis_size {axis_size} doesn't match received axis_size {size}.")
        traced = any(isinstance(x, Tracer) for x in flat)
        try:
            key = (in_tree, tuple(axes), size, statics, traced, donated)
            hash(key)
        except TypeError:
            raise ValueError("Non-hashable static arguments are not supported: the static arguments "
                             f"{statics!r} of the pmapped function must be hashable") from None
        return key, flat

    def _build(in_tree, axes, size, statics, traced, donated, inner):
        devs = devices if devices is not None else tuple(runtime.devices())
        if size == 0:
            raise ValueError("pmap: the mapped axis has size 0; it must have one entry per device it runs on")
        if inner and devices is not None:
            raise ValueError("Nested pmaps with devices specified in either the inner or outer pmap are not "
                             "supported")
        shape = (size,) + tuple(k for _, k in inner)
        if math.prod(shape) > len(devs):
            raise ValueError(f"compiling computation that requires {math.prod(shape)} logical devices, but only "
                             f"{len(devs)} XLA devices are available (pmap over axes of sizes {shape})")
        grid = np.empty(math.prod(shape), dtype=object)
        grid[:] = devs[:math.prod(shape)]
        mesh = shd.Mesh(grid.reshape(shape), (axis_name,) + tuple(n for n, _ in inner))
        in_specs = tuple(_spec(axis_name, a) for a in axes)
        out_specs = tree_map(lambda a: _spec(axis_name, a), out_axes, is_leaf=lambda x: x is None)

        def body(*flat):
            flat = [x if a is None else lax.squeeze(x, (a,)) for x, a in zip(flat, axes)]
            with _pmap_scope({axis_name: size}, dict(inner)):
                out = _call(in_tree, statics, flat)
            leaves, tree = tree_flatten(out)
            out_axes_flat = _flatten_axes("pmap out_axes", tree, out_axes)
            leaves = [x if a is None else lax.expand_dims(x, (a % (np.ndim(x) + 1),))
                      for x, a in zip(leaves, out_axes_flat)]
            return tree_unflatten(tree, leaves)
        body.__name__ = f"pmap_{getattr(fun, '__name__', 'fun')}"
        mapped = shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
        mapped.__name__ = body.__name__
        if traced:            # inside another trace: no placement of its own (as JAX)
            return jit(mapped, donate_argnums=donated)
        named = lambda spec: shd.NamedSharding(mesh, spec)      # noqa: E731
        return jit(mapped, donate_argnums=donated, in_shardings=tuple(named(s) for s in in_specs),
                   out_shardings=tree_map(named, out_specs))

    pmapped.lower = api_boundary(lower)
    return pmapped


def _leaf_owners(in_tree) -> list:
    """For each flat leaf of ``(dyn_args, kwargs)``: its dynamic argument's position (kwargs: None)."""
    dyn, kw = tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    owners = [None] * in_tree.num_leaves
    for pos, arg in enumerate(dyn):
        for j in tree_leaves(arg):
            owners[j] = pos
    return owners


def _spec(axis_name, axis):
    return shd.PartitionSpec() if axis is None else shd.PartitionSpec(*[None] * axis, axis_name)


def _canonical(axis, x):
    if axis is None:
        return None
    ndim = get_aval(x).ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"pmap was requested to map its argument along axis {axis}, which implies that "
                         f"its rank should be at least {axis + 1 if axis >= 0 else -axis}, but is only "
                         f"{ndim} (its shape is {get_aval(x).shape})")
    return axis % ndim


def _mapped_size(flat, axes) -> int:
    sizes = {get_aval(x).shape[a] for x, a in zip(flat, axes) if a is not None}
    if not sizes:
        raise ValueError("pmap requires at least one argument with a mapped axis.")
    if len(sizes) > 1:
        raise ValueError(f"pmap got inconsistent sizes for array axes to be mapped: {sorted(sizes)}")
    return sizes.pop()
