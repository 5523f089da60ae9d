"""``jaxprc.vmap``: trace at one example's types, run the vmap pass, evaluate in the current context.

At top level the batched jaxpr is compiled (once per program structure) and
runs; inside another trace (``jit``, ``grad``, an outer ``vmap``) it is
inlined into that trace, which is how transformations compose
(``evaluate.evaluate_jaxpr``). The per-example trace gets no concrete values, so
Python control flow on batched values raises ``ConcretizationTypeError``, as
in JAX.
"""
from __future__ import annotations

import collections
import functools
import inspect

from jaxprc.ir.tracing import Tracer, current_builder, type_str, get_aval, trace_to_jaxpr
from jaxprc.ir.tree_util import (broadcast_prefix, keystr, tree_flatten, tree_flatten_with_path, tree_leaves,
                                 tree_unflatten)
from jaxprc.passes.registry import verify_pass_result
from jaxprc.passes.vmap import BatchSpecError, unbatched_aval, vmap_typed_jaxpr

from .. import ref as _ref
from ..engine.evaluate import evaluate_jaxpr
from .tracer_styles import VmapStyle
from ..lax.parallel import batching_axis, named_axis
from ..engine.traceback_filtering import api_boundary

__all__ = ["vmap"]


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """Vectorizing map: ``fun`` mapped over the ``in_axes`` of its arguments (JAX's ``jax.vmap``).

    ``in_axes``/``out_axes`` are ints (negative ones count from the end), None
    (not mapped / not batched), or pytrees of those that are prefixes of the
    arguments tuple / the outputs. Keyword arguments are mapped over axis 0.
    ``axis_size`` gives the batch size when no argument is mapped.
    ``axis_name`` names the mapped axis for the collectives ``fun`` calls (``psum pmean pmax pmin
    all_gather``; compiler/lax/parallel.py).
    ``spmd_axis_name`` (JAX: the mesh axis the batch dimension is split over inside ``shard_map``
    or a sharded ``jit``) is accepted and does not change values; jaxprc lays the batch out as the
    enclosing program's shardings say.

    >>> xs, ys = jnp.ones((2, 3)), jnp.arange(6.0).reshape(2, 3)
    >>> jaxprc.vmap(jnp.dot)(xs, ys)                  # a dot product per row
    Array([ 3., 12.], dtype=float32)
    >>> jaxprc.vmap(jnp.dot, in_axes=(None, 0))(xs[0], ys)
    Array([ 3., 12.], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"vmap requires a callable as its first argument, got {fun!r} of type "
                        f"{type(fun).__name__}")
    if isinstance(in_axes, list):   # JAX accepts a list at the top level for the argument tuple
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got {in_axes}.")
    if not all(type(a) is int for a in tree_leaves(in_axes)):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container "
                        f"with those types as leaves, but got {in_axes}.")
    if not all(type(a) is int for a in tree_leaves(out_axes)):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container "
                        f"with those types as leaves, but got {out_axes}.")

    @api_boundary
    @functools.wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                             "to the positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        all_flat, in_tree = tree_flatten((args, kwargs))
        all_axes = _flatten_axes("vmap in_axes", in_tree, (in_axes, 0))
        if getattr(fun, "_threaded_refs", None) is None:      # not already threading them
            if _ref.has_refs(all_flat):
                return _vmap_threading_refs(fun, in_axes, out_axes, axis_name, axis_size, args, kwargs)
            try:
                return _call(args, kwargs, all_flat, in_tree, all_axes)
            except _ref.Unthreaded as e:     # a ref of the calling code: its value threaded through
                if e.ref._trace is not current_builder():
                    raise
                return _vmap_threading_refs(fun, in_axes, out_axes, axis_name, axis_size, args, kwargs)
        return _call(args, kwargs, all_flat, in_tree, all_axes)

    def _call(args, kwargs, all_flat, in_tree, all_axes):
        # Leaves that are not mapped and that no array can be (a config object, a function) are
        # passed to fun as they are, as in JAX; the rest are traced.
        closed = {i: x for i, (x, a) in enumerate(zip(all_flat, all_axes))
                  if a is None and not _is_array_leaf(x)}
        args_flat = [x for i, x in enumerate(all_flat) if i not in closed]
        axes = [a for i, a in enumerate(all_axes) if i not in closed]
        avals = [get_aval(x) for x in args_flat]
        axes = [_canonical_in_axis(a, aval) for a, aval in zip(axes, avals)]
        traced_axes = iter(axes)
        size = _mapped_axis_size(fun, in_tree, all_flat,
                                 [None if i in closed else get_aval(x) for i, x in enumerate(all_flat)],
                                 [None if i in closed else next(traced_axes) for i in range(len(all_flat))],
                                 axis_size)
        out_tree, raw_outs = [], []

        def flat_fun(*traced):
            remaining = iter(traced)
            flat = [closed[i] if i in closed else next(remaining) for i in range(len(all_flat))]
            a, kw = tree_unflatten(in_tree, flat)
            leaves, tree = tree_flatten(fun(*a, **kw))
            out_tree.append(tree)
            raw_outs.append(_untraced_outputs(leaves, traced, args_flat, axes))
            return leaves

        name = getattr(fun, "__name__", "fun")
        with named_axis(axis_name, size):      # collectives may name the mapped axis
            per_example = trace_to_jaxpr(flat_fun, [unbatched_aval(a, d) for a, d in zip(avals, axes)],
                                         name=f"vmap({name})", style=VmapStyle(avals, size))
        out_axes_flat = _flatten_axes("vmap out_axes", out_tree[0], out_axes)
        try:
            with batching_axis(axis_name, size):
                batched = verify_pass_result("vmap", vmap_typed_jaxpr(per_example, axes, size, out_axes_flat, avals))
        except BatchSpecError as e:
            _check_ref_batching(fun, out_tree[0], e.leaf_idx)
            leaf_numbers = tree_unflatten(out_tree[0], range(out_tree[0].num_leaves))
            path, _ = tree_flatten_with_path(leaf_numbers)[0][e.leaf_idx]
            raise ValueError(f"at vmap out_axes{keystr(path)}, got axis spec {e.dst} "
                             f"but output was batched on axis {e.src}") from None
        outs = evaluate_jaxpr(batched, args_flat, f"vmap_{name}")
        outs = [raw if d is None and raw is not _TRACED else out
                for out, raw, d in zip(outs, raw_outs[0], out_axes_flat)]
        return tree_unflatten(out_tree[0], outs)

    return vmap_f


def _vmap_threading_refs(fun, in_axes, out_axes, axis_name, axis_size, args, kwargs):
    """vmap of a function that uses refs, as arguments (batched along their in_axes) or of the
    calling code (unbatched): their values go in, and their final values come out (at the
    same axes) and are written back, as JAX batches refs."""
    flat, tree = tree_flatten((args, kwargs))
    axes = _flatten_axes("vmap in_axes", tree, (in_axes, 0))
    ref_axes = [_canonical_in_axis(a, x.aval) for x, a in zip(flat, axes) if isinstance(x, _ref.Ref)]
    args, kwargs, refs = _ref.unwrap_refs(args, kwargs)
    arg_axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    closed: list = []

    def call():
        threaded = _ref.thread_refs(fun, tuple(closed))

        def with_values(values, *a, **k):
            return threaded(*a, **k, **{_ref.CLOSED_VALUES: values})
        with_values._threaded_refs = refs + closed
        with_values.__name__ = getattr(fun, "__name__", "fun")
        mapped = vmap(with_values, (None, *arg_axes), (out_axes, ref_axes, [None] * len(closed)),
                      axis_name, axis_size)
        return mapped([r._value for r in closed], *args, **kwargs)
    outs, finals, closed_finals = _ref.discover_closed_refs(call, closed, refs, getattr(fun, "__name__", "fun"))
    _ref.write_back(refs, finals)
    _ref.write_back(closed, closed_finals)
    return outs


def _check_ref_batching(fun, out_tree, leaf_idx) -> None:
    """A batched value written to a ref that is not batched (its final value has out_axes
    None): JAX's error."""
    refs = getattr(fun, "_threaded_refs", None)
    n_results = out_tree.children()[0].num_leaves if refs is not None else 0
    if refs is not None and leaf_idx >= n_results:
        raise _ref.RefEscapeError(
            f"performing a set/swap operation with vmapped value on an unbatched array reference of type "
            f"{refs[leaf_idx - n_results].aval!r}. Move the array reference to be an argument to the vmapped function?")


def _is_array_leaf(x) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


_TRACED = object()


def _untraced_outputs(leaves, in_tracers, args_flat, axes):
    """Per output: the object itself where ``fun`` returned something it did not compute from the
    inputs (a Python scalar, a numpy or concrete array) or an unmapped argument as it was given;
    _TRACED otherwise. An unbatched output (out_axes None) is returned as this object, as JAX
    does: a Python float stays a Python float."""
    raws = []
    for leaf in leaves:
        arg = next((i for i, t in enumerate(in_tracers) if leaf is t), None)
        if arg is not None:
            raws.append(args_flat[arg] if axes[arg] is None else _TRACED)
        else:
            raws.append(_TRACED if isinstance(leaf, Tracer) else leaf)
    return raws


def _flatten_axes(name: str, treedef, axis_tree) -> list:
    """One axis per leaf of ``treedef``, broadcasting ``axis_tree`` (a tree prefix; None is a leaf).
    A pair ``(in_axes, 0)`` over the pair (positional, keyword) arguments reports mismatches of
    ``in_axes`` at their paths in the positional arguments, as JAX does."""
    if isinstance(axis_tree, tuple) and len(axis_tree) == 2 and axis_tree[1] == 0 and name.endswith("in_axes"):
        args_tree, kwargs_tree = treedef.children()
        return broadcast_prefix(axis_tree[0], args_tree, name) + [0] * kwargs_tree.num_leaves
    return broadcast_prefix(axis_tree, treedef, name)


def _canonical_in_axis(axis, aval):
    if axis is None:
        return None
    if not -aval.ndim <= axis < aval.ndim:
        min_rank = axis + 1 if axis >= 0 else -axis
        raise ValueError(f"vmap was requested to map its argument along axis {axis}, which implies "
                         f"that its rank should be at least {min_rank}, but is only {aval.ndim} "
                         f"(its shape is {aval.shape})")
    return axis % aval.ndim


def _mapped_axis_size(fun, in_tree, args_flat, avals, axes, axis_size) -> int:
    """The batch size all mapped axes (and ``axis_size``) agree on; JAX's error text otherwise."""
    sizes = [None if d is None else aval.shape[d] for aval, d in zip(avals, axes)]
    distinct = set(s for s in sizes if s is not None) | ({axis_size} if axis_size is not None else set())
    if len(distinct) == 1:
        return distinct.pop()
    if not distinct:
        if not args_flat:
            args, kwargs = tree_unflatten(in_tree, args_flat)
            raise ValueError("vmap wrapped function must be passed at least one argument containing an "
                             f"array or axis_size must be specified, got empty *args={args} and "
                             f"**kwargs={kwargs}")
        raise ValueError("vmap must have at least one non-None value in in_axes "
                         "or axis_size must be specified")
    args, kwargs = tree_unflatten(in_tree, args_flat)
    try:
        params = list(inspect.signature(fun).bind(*args, **kwargs).signature.parameters)
    except (TypeError, ValueError):
        params = None

    def arg_name(path):
        i = path[0].idx
        if params is None or i >= len(params):
            return f"args{keystr(path)}"
        return f"argument {params[i]}" + (keystr(path[1:]) if len(path) > 1 else "")

    arg_paths = [arg_name(p) for p, _ in tree_flatten_with_path(args)[0]]
    kwarg_paths = [f"kwargs{keystr(p)}" for p, _ in tree_flatten_with_path(kwargs)[0]]
    where = [f"{p} of type {type_str(aval) if aval else type(x).__name__}"
             for p, aval, x in zip(arg_paths + kwarg_paths, avals, args_flat)]
    counts = collections.Counter(s for s in sizes if s is not None).most_common()
    msg = ["vmap got inconsistent sizes for array axes to be mapped:\n"]
    if axis_size is not None:
        msg.append(f"  * the `axis_size` argument was {axis_size};\n")
    for k, (sz, ct) in enumerate(counts):
        i = sizes.index(sz)
        if ct == 1:
            msg.append(f"  * one axis had size {sz}: axis {axes[i]} of {where[i]};\n")
        else:
            most = "most" if k == 0 else "some"
            msg.append(f"  * {most} axes ({ct} of them) had size {sz}, e.g. axis {axes[i]} of {where[i]};\n")
    raise ValueError("".join(msg)[:-2])
