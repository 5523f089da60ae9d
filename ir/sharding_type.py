"""Types' shardings: meshes' axes (``AbstractMesh``, ``AxisType``), ``PartitionSpec`` and the
``NamedSharding`` of an array type (``f32[8@x,4]``: dimension 0 split over mesh axis x).

Pure data, hashable, without devices: an aval carries one (``ShapedArray.sharding``); the
compiler's ``jaxprc.sharding`` adds devices to them (Mesh, NamedSharding on a Mesh).
"""
from __future__ import annotations

import enum
import math
from typing import NamedTuple

__all__ = ["AbstractMesh", "AxisType", "DuplicateSpecError", "ManualAxisType", "NamedSharding", "PartitionSpec",
           "UNCONSTRAINED"]


class AxisType(enum.Enum):
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


def _axis_types(axis_types, n: int, default) -> tuple:
    if axis_types is None:
        return (default,) * n
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if len(axis_types) != n or not all(isinstance(t, AxisType) for t in axis_types):
        raise ValueError(f"axis_types must be {n} AxisType values (one per mesh axis), got {axis_types}")
    return axis_types


def _axis_names(axis_names) -> tuple:
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"mesh axis names must be distinct strings, got {names}")
    return names


class AbstractMesh:
    """A mesh's axis names, sizes and types, without devices."""

    def __init__(self, axis_sizes, axis_names, axis_types=None, *, _platform=None):
        self.axis_names = _axis_names(axis_names)
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_sizes)} axis sizes for axis names {self.axis_names}")
        self.axis_types = _axis_types(axis_types, len(self.axis_names), AxisType.Auto)
        self._platform = _platform     # a concrete mesh's abstract mesh knows its devices' kind

    abstract_mesh = property(lambda self: self)

    # JAX's questions about the axis types (flax asks them before resharding)
    def _axes_of(self, kind) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t == kind)

    auto_axes = property(lambda self: self._axes_of(AxisType.Auto))
    explicit_axes = property(lambda self: self._axes_of(AxisType.Explicit))
    manual_axes = property(lambda self: self._axes_of(AxisType.Manual))
    are_all_axes_auto = property(lambda self: all(t == AxisType.Auto for t in self.axis_types))
    are_all_axes_explicit = property(lambda self: all(t == AxisType.Explicit for t in self.axis_types))
    are_all_axes_manual = property(lambda self: all(t == AxisType.Manual for t in self.axis_types))

    @property
    def devices(self):
        raise ValueError("AbstractMesh does not implement devices")

    shape = property(lambda self: dict(zip(self.axis_names, self.axis_sizes)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes))
    empty = property(lambda self: not self.axis_names)

    def _key(self):         # the platform is not part of the type: a parsed program names none
        return (self.axis_names, self.axis_sizes, self.axis_types)

    def __eq__(self, other):
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _short_repr(self):
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        kind = f", device_kind={self._platform}, num_cores=None, platform={self._platform}" if self._platform else ""
        return f"{type(self).__name__}({axes or '()'}, axis_types={self.axis_types}{kind})"

    __repr__ = _short_repr
    __str__ = _short_repr


class _Unconstrained:
    """``P.UNCONSTRAINED``: a dimension whose layout the compiler chooses."""

    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return (_unconstrained, ())


UNCONSTRAINED = _Unconstrained()


def _unconstrained():
    return UNCONSTRAINED


def _axis_set(value, what: str) -> frozenset:
    if not isinstance(value, (set, frozenset)):
        raise TypeError(f"{what} argument of PartitionSpec should of type `frozenset` or `set`. "
                        f"Got type {value}")
    return frozenset(value)


class PartitionSpec(tuple):
    """Per array dimension: None (not split), a mesh axis name, a tuple of names, or
    ``UNCONSTRAINED``; ``unreduced``/``reduced``: mesh axes over which the array holds partial
    sums still to be added up / copies known equal."""

    UNCONSTRAINED = UNCONSTRAINED

    def __new__(cls, *partitions, unreduced=frozenset(), reduced=frozenset()):
        for p in partitions:
            ok = p is None or p is UNCONSTRAINED or isinstance(p, str) or (
                isinstance(p, tuple) and all(isinstance(a, str) for a in p))
            if not ok:
                raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of "
                                f"names, got {p!r}")
        self = super().__new__(cls, partitions)
        self.unreduced = _axis_set(unreduced, "unreduced")
        self.reduced = _axis_set(reduced, "reduced")
        named = {a for axes in self.axes(len(self)) for a in axes}
        if named & self.unreduced:
            raise ValueError("partitions cannot overlap with unreduced axes passed to PartitionSpec. Got "
                             f"partitions: {tuple(self)} and unreduced axes: {self.unreduced}")
        if named & self.reduced:
            raise ValueError("partitions cannot overlap with reduced axes passed to PartitionSpec. Got "
                             f"partitions: {tuple(self)} and reduced axes: {self.reduced}")
        if self.unreduced & self.reduced:
            raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. Got "
                             f"unreduced: {self.unreduced} and reduced: {self.reduced}")
        return self

    def axes(self, ndim: int) -> tuple:
        """Per dimension of an ``ndim``-array: the tuple of mesh axes it is split over
        (none for an UNCONSTRAINED one)."""
        out = [() if p is None or p is UNCONSTRAINED else (p,) if isinstance(p, str) else tuple(p)
               for p in self]
        return tuple(out) + ((),) * (ndim - len(out))

    def update(self, partitions=None, unreduced=None, reduced=None) -> "PartitionSpec":
        return PartitionSpec(*(self if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)

    def _normalized_spec_for_aval(self, ndim: int) -> "PartitionSpec":
        return self.update(partitions=(*self, *[None] * (ndim - len(self))))

    def __repr__(self):
        parts = list(map(repr, self))
        if self.unreduced:
            parts.append(f"unreduced={set(sorted(self.unreduced))!r}")
        if self.reduced:
            parts.append(f"reduced={set(sorted(self.reduced))!r}")
        return f"P({', '.join(parts)}{',' if len(self) == 1 and len(parts) == 1 else ''})"

    def __eq__(self, other):      # not equal to plain tuples, as in JAX
        return (isinstance(other, PartitionSpec) and tuple.__eq__(self, other)
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):          # P('x') and P('x', None) differ but hash alike, as in JAX
        return hash((tuple(p for p in self if p is not None), self.unreduced, self.reduced))

    def __reduce__(self):
        return (_partition_spec, (tuple(self), self.unreduced, self.reduced))


def _partition_spec(partitions, unreduced, reduced):
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


class DuplicateSpecError(Exception):
    """A mesh axis named for two dimensions of one spec."""


class NamedSharding:
    """An array split over the axes of ``mesh`` as ``spec`` says. Over an AbstractMesh it is a
    type's sharding (``typeof(x).sharding``); ``jaxprc.sharding.NamedSharding`` adds devices."""

    def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):
        if not isinstance(mesh, AbstractMesh):
            raise TypeError(f"NamedSharding expects a Mesh or an AbstractMesh, got {type(mesh).__name__}")
        spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        used = [a for axes in spec.axes(len(spec)) for a in axes]
        for a in [*used, *sorted(spec.unreduced), *sorted(spec.reduced)]:
            if a not in mesh.axis_names:
                raise ValueError(f"Resource axis: {a} of {spec} is not found in mesh: {mesh.axis_names}.")
        for a in used:
            if used.count(a) > 1:
                raise DuplicateSpecError(
                    "A single NamedSharding spec specification can map every mesh axis to at most one "
                    f"positional dimension, but {spec} has duplicate entries for `{a}`")
        types = dict(zip(mesh.axis_names, mesh.axis_types))
        for what, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
            if any(types[a] != AxisType.Explicit for a in axes):
                raise ValueError(f"{what} axes can only refer to mesh axes that is of type `Explicit`. Got "
                                 f"{what.lower()} axes: {axes} and mesh: {mesh._short_repr()}")
        if any(p is UNCONSTRAINED for p in spec) and AxisType.Auto not in mesh.axis_types:
            raise ValueError(f"{spec} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. Got mesh "
                             f"axis_types: {mesh.axis_types}")
        self.mesh, self.spec, self.memory_kind = mesh, spec, memory_kind

    num_devices = property(lambda self: self.mesh.size)

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and other.mesh == self.mesh and other.spec == self.spec

    def __hash__(self):
        return hash((self.mesh, self.spec))

    def update(self, *, mesh=None, spec=None, memory_kind=None) -> "NamedSharding":
        return type(self)(self.mesh if mesh is None else mesh, self.spec if spec is None else spec,
                          memory_kind=self.memory_kind if memory_kind is None else memory_kind)

    def __repr__(self):
        memory = "" if type(self.mesh) is AbstractMesh else ", memory_kind=device"   # a Mesh has devices
        return f"NamedSharding(mesh={self.mesh._short_repr()}, spec={self.spec!r}{memory})"


class ShardingTypeError(Exception):
    """Operands whose shardings in type do not fit the operation (JAX's ``ShardingTypeError``)."""


def explicit_spec(sharding: NamedSharding, ndim: int) -> tuple:
    """Per dimension, the Explicit mesh axes ``sharding`` splits it over (a type's view)."""
    types = dict(zip(sharding.mesh.axis_names, sharding.mesh.axis_types))
    return tuple(tuple(a for a in axes if types[a] is AxisType.Explicit)
                 for axes in sharding.spec.axes(ndim))


def type_sharding(sharding: NamedSharding, shape) -> NamedSharding | None:
    """The normal form of a type's sharding: over the mesh without devices, one spec entry per
    dimension naming only Explicit axes; None when it splits no dimension."""
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"a type's sharding is a NamedSharding, got {type(sharding).__name__}")
    ndim = len(shape)
    if len(sharding.spec) > ndim:
        raise ValueError(f"the sharding {sharding.spec} has more entries than the {ndim} dimensions of "
                         f"shape {tuple(shape)}")
    dims = explicit_spec(sharding, ndim)
    if not any(dims):
        return None
    mesh = sharding.mesh
    for k, (n, axes) in enumerate(zip(shape, dims)):
        ways = math.prod(mesh.shape[a] for a in axes)
        if isinstance(n, int) and n % ways:
            raise ValueError(f"Sharding spec {spec_of(dims)} implies that array axis {k} is partitioned "
                             f"{ways} times, but does not evenly divide the dimension size {n}. Got shape: "
                             f"{tuple(shape)} and sharding {sharding}")
    abstract = mesh if type(mesh) is AbstractMesh else mesh.abstract_mesh
    spec = spec_of(dims)
    if type(sharding) is NamedSharding and sharding.mesh is abstract and sharding.spec == spec:
        return sharding
    return NamedSharding(abstract, spec)


def spec_of(dims) -> PartitionSpec:
    """The PartitionSpec of per-dimension axis tuples."""
    return PartitionSpec(*[None if not a else a[0] if len(a) == 1 else tuple(a) for a in dims])


_EMPTY = AbstractMesh((), ())


def unsharded(ndim: int) -> NamedSharding:
    """JAX's sharding of a type that names none: no dimension split, over an empty mesh."""
    return NamedSharding(_EMPTY, PartitionSpec(*[None] * ndim))


def axes_suffix(axes: tuple) -> str:
    """How a type writes the mesh axes of a dimension: ``@x``, ``@(x,y)``, nothing for none."""
    if not axes:
        return ""
    return "@" + (axes[0] if len(axes) == 1 else "(" + ",".join(axes) + ")")


def vma_suffix(vma) -> str:
    """How a type writes the manual axes it varies over, as JAX prints them: ``{V:x}``,
    ``{V:(x,y)}`` (sorted), nothing for none."""
    if not vma:
        return ""
    names = sorted(vma)
    return "{V:" + (names[0] if len(names) == 1 else "(" + ",".join(names) + ")") + "}"


class ManualAxisType(NamedTuple):
    """JAX's ``typeof(x).mat``: the manual axes a value varies over; jaxprc types no reduced or
    unreduced values, so those are always empty."""
    varying: frozenset = frozenset()
    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()


# ------------------------------------------------ helpers of the primitives' sharding rules
# A rule sees avals; ``dims(aval)`` is its per-dimension tuple of mesh axes (all empty when its
# type names no sharding) and ``typed(mesh, dims)`` the type sharding of a result.

def dims(aval) -> tuple:
    s = aval.sharding_in_type
    return s.spec.axes(aval.ndim) if s is not None else ((),) * aval.ndim


def common_mesh(name: str, avals) -> AbstractMesh | None:
    """The abstract mesh of the operands' shardings; an error when two operands name different ones."""
    meshes = {a.sharding_in_type.mesh for a in avals if getattr(a, "sharding_in_type", None) is not None}
    if len(meshes) > 1:
        raise ShardingTypeError(f"{name}: operands are sharded over different meshes: "
                                f"{', '.join(sorted(map(repr, meshes)))}")
    return meshes.pop() if meshes else None


def typed(mesh: AbstractMesh | None, per_dim) -> NamedSharding | None:
    """The type sharding splitting dimension i over ``per_dim[i]`` (None when none is split)."""
    per_dim = tuple(tuple(a) for a in per_dim)
    if mesh is None or not any(per_dim):
        return None
    used = [a for axes in per_dim for a in axes]
    if len(set(used)) != len(used):
        raise ShardingTypeError(f"a mesh axis would split two dimensions of the result: {spec_of(per_dim)}")
    return NamedSharding(mesh, spec_of(per_dim))


def _spec_text(d: tuple) -> str:
    return repr(tuple(None if not a else a[0] if len(a) == 1 else a for a in d))


def illegal_result(name: str, avals, out, per_dim) -> ShardingTypeError:
    """JAX's error for a result that would split two dimensions over one mesh axis."""
    written = ",".join(f"{n}{axes_suffix(a)}" for n, a in zip(out.shape, per_dim))
    return ShardingTypeError(f"{name} operation with inputs: {', '.join(a.str_short() for a in avals)} produces "
                             f"an illegally sharded result: {out.str_short().split('[')[0]}[{written}]")


def same_shape_rule(name: str):
    """The sharding rule of an elementwise primitive: per dimension, the operands' axes (an
    unsplit dimension fits any); operands split differently are an error, as in JAX."""
    def rule(outs, *avals, **_):
        mesh = common_mesh(name, avals)
        ndim = outs[0].ndim
        shaped = [dims(a) for a in avals if getattr(a, "ndim", -1) == ndim and a.sharding_in_type is not None]
        merged = []
        for k in range(ndim):
            choices = {d[k] for d in shaped if d[k]}
            if len(choices) > 1:
                raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                        f"{', '.join(_spec_text(d) for d in shaped)}.")
            merged.append(choices.pop() if choices else ())
        used = [a for axes in merged for a in axes]
        if len(set(used)) != len(used):
            raise illegal_result(name, avals, outs[0], merged)
        return [typed(mesh, merged) for _ in outs] if len(outs) > 1 else typed(mesh, merged)
    return rule


def reshape_dims(in_shape, in_dims, out_shape) -> tuple:
    """Per result dimension of a reshape, the mesh axes it keeps: a split dimension's axes go to
    the first piece when they divide it, a merge keeps the axes of the merged group's leading
    dimension when the others are not split; any other split dimension's axes are dropped."""
    out = [()] * len(out_shape)
    i = j = 0
    while i < len(in_shape) or j < len(out_shape):
        gi, gj = [i] if i < len(in_shape) else [], [j] if j < len(out_shape) else []
        a = in_shape[i] if gi else 1
        b = out_shape[j] if gj else 1
        i, j = i + bool(gi), j + bool(gj)
        while a != b:
            if a < b and i < len(in_shape):
                a *= in_shape[i]; gi.append(i); i += 1
            elif b < a and j < len(out_shape):
                b *= out_shape[j]; gj.append(j); j += 1
            else:
                break
        if not gi or not gj:
            continue
        lead = in_dims[gi[0]]
        if lead and not any(in_dims[k] for k in gi[1:]):
            out[gj[0]] = lead       # sizes divisible: checked when the result's type is formed
    return tuple(out)


def with_dims(aval, per_dim) -> "NamedSharding | None":
    """The sharding of ``aval``'s mesh splitting the dimensions of a reshaped type as ``per_dim``
    says (None when ``aval`` names no sharding)."""
    s = aval.sharding_in_type
    return None if s is None else typed(s.mesh, per_dim)


def whole_dims_rule(name: str):
    """The sharding rule of a slice: a dimension taken whole keeps its mesh axes, a cut one is
    gathered (whole on each device)."""
    def rule(outs, x, *_, **__):
        kept = [a if n == m else () for a, n, m in zip(dims(x), x.shape, outs[0].shape)]
        return typed(common_mesh(name, [x]), kept)
    return rule


def jax_type_text(aval) -> str:
    """A type as JAX's errors write it: ``float32[8@x,4@y]``, ``float32[4]{V:x}``."""
    return (f"{aval.dtype.name}[{','.join(f'{n}{axes_suffix(a)}' for n, a in zip(aval.shape, dims(aval)))}]"
            f"{vma_suffix(getattr(aval, 'vma', ()))}")


def unsplit_axis_rule(what: str):
    """The sharding rule of an operation along one axis that must be whole on each device
    (cumulative ops): the result keeps the operand's sharding."""
    def rule(outs, x, *, axis, **_):
        if dims(x)[axis]:
            raise ShardingTypeError(f"Input should be unsharded over the axis being {what}. Got input type="
                                    f"{jax_type_text(x)} and axis={axis}")
        return x.sharding_in_type
    return rule
