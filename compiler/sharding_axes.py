"""``jax.sharding.auto_axes`` and ``explicit_axes``: run a function with some axes of the context
mesh switched to another type.

``auto_axes(f, out_sharding=...)``: inside ``f`` the axes (all, or ``axes=``) are ``Auto``, so
its arguments' types are no longer split over them (XLA chooses the layouts); its results are
then laid out as ``out_sharding`` says, back on the Explicit axes. ``explicit_axes(f,
in_sharding=...)``: inside ``f`` the axes are ``Explicit`` and its arguments are laid out as
``in_sharding`` says (types split over them); its results leave them again. Both switch the mesh
of the thread's context for the call and reshard at its edges, as JAX 0.10 does.
"""
from __future__ import annotations

import functools

from . import sharding as shd
from .engine.spmd import reshard
from .ir.tree_util import tree_flatten, tree_map

__all__ = ["auto_axes", "explicit_axes"]

_MISSING = object()


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        target = _required(out_sharding, kwargs, "out_sharding")
        switch = _switched_mesh(axes, shd.AxisType.Auto, "auto_axes", target)
        if switch is None:
            return f(*args, **kwargs)
        previous, mesh, names = switch
        if {n for n, t in zip(previous.axis_names, previous.axis_types) if t == shd.AxisType.Auto} == set(names):
            return f(*args, **kwargs)
        with shd.set_mesh(mesh), shd.use_abstract_mesh(mesh.abstract_mesh):
            args = reshard(args, tree_map(lambda a: _explicit_only(a, mesh), args))
            out = f(*args, **kwargs)
        return reshard(out, target)
    return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        given = _required(in_sharding, kwargs, "in_sharding")
        switch = _switched_mesh(axes, shd.AxisType.Explicit, "explicit_axes")
        if switch is None:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to enter into a mesh "
                             "context when using `explicit_axes` API.")
        previous, mesh, _ = switch
        with shd.set_mesh(mesh), shd.use_abstract_mesh(mesh.abstract_mesh):
            args = reshard(args, given)
            out = f(*args, **kwargs)
        return reshard(out, tree_map(lambda o: _explicit_only(o, previous), out))
    return wrapped


def _required(given, kwargs, name: str):
    """The decorator's argument, else the call's keyword argument of that name (JAX's TypeError
    when neither is there)."""
    if given is not None:
        return given
    value = kwargs.pop(name, _MISSING)
    if value is _MISSING:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return value


def _explicit_only(value, mesh) -> shd.PartitionSpec:
    """``value``'s spec keeping only the axes that are Explicit in ``mesh``."""
    from .toplevel import typeof
    explicit = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if t == shd.AxisType.Explicit}
    entries = []
    for entry in typeof(value).sharding.spec:
        if isinstance(entry, tuple):
            entries.append(tuple(a for a in entry if a in explicit))
        else:
            entries.append(entry if entry in explicit else None)
    return shd.PartitionSpec(*entries)


def _switched_mesh(axes, axis_type, name: str, shardings=None):
    """(the context's concrete mesh, that mesh with ``axes`` (default all) of ``axis_type``, those
    axes); None without a mesh in context or in ``shardings``. JAX's errors when the shardings'
    mesh and the context's differ or a Manual axis would change type."""
    current = shd.context_mesh()
    from_shardings = None
    for s in tree_flatten(shardings)[0]:
        if isinstance(s, shd.NamedSharding):
            if from_shardings is not None and from_shardings.abstract_mesh != s.mesh.abstract_mesh:
                raise ValueError(f"Shardings passed to {name} should have the same mesh. Got one mesh "
                                 f"{from_shardings.abstract_mesh} and another {s.mesh}")
            from_shardings = s.mesh
    if current is None and from_shardings is None:
        return None
    if current is not None and from_shardings is not None and current.abstract_mesh != from_shardings.abstract_mesh:
        raise ValueError(f"Context mesh {current.abstract_mesh} must match the mesh passed to shardings "
                         f"{from_shardings.abstract_mesh}. Recommended approach is to use `jax.set_mesh` context "
                         "manager.")
    mesh = current if current is not None else from_shardings
    if not isinstance(mesh, shd.Mesh):
        raise ValueError(f"{name}: the shardings' mesh {mesh} has no devices; set a Mesh with jaxprc.set_mesh")
    names = mesh.axis_names if axes is None else (axes if isinstance(axes, tuple) else (axes,))
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    if any(types[a] == shd.AxisType.Manual for a in names):
        raise NotImplementedError("Going from `Manual` AxisType to `Auto` or `Explicit` AxisType is not allowed. "
                                  "Please file a bug at https://github.com/jax-ml/jax/issues with your use case")
    types.update({a: axis_type for a in names})
    return mesh, shd.Mesh(mesh.devices, mesh.axis_names, tuple(types[a] for a in mesh.axis_names)), names
