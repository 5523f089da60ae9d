"""The bytes of an ``Exported``: JAX's flatbuffer format, so artifacts move between JAX and jaxprc.

The schema is JAX's (``jax/_src/export/serialization.fbs``): an ``Exported``
table holding the function name, the input and output pytree definitions and
avals (shapes as dimension strings, ``"b"``, ``"2*b + 1"``), the platforms,
effects, disabled safety checks, the StableHLO portable artifact of the module,
the calling-convention version, the kept arguments, and optionally the
serialized ``Exported`` of its vjp (nested, one per order). Fields are written
by slot number as the schema numbers them; the reader accepts both the older
per-argument avals and the newer table of unique avals indexed by argument.
Shardings are read and dropped: jaxprc runs on one device (``nr_devices`` 1).
"""
from __future__ import annotations

import collections
import functools
import json
import types

import flatbuffers
import numpy as np
from flatbuffers.table import Table

from .ir import dtypes as dt
from .ir.core import ShapedArray
from .ir.effects import LibraryEffect
from .ir.shape_poly import SymbolicScope, symbolic_shape
from .ir.tree_util import PyTreeDef, registry
from .tree_util import tree_flatten, tree_structure

__all__ = ["DisabledSafetyCheck", "deserialize", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "serialize"]

# Schema version written in the artifact: JAX writes 3 (older readers accept only 2 or 3).
_WRITTEN_SERIALIZATION_VERSION = 3

# Slots of the tables (field numbers of the schema).
_TREE_KIND, _TREE_CHILDREN, _TREE_NAMES, _TREE_CUSTOM_NAME, _TREE_AUXDATA = range(5)
_AVAL_KIND, _AVAL_SHAPE, _AVAL_DTYPE, _AVAL_MEMORY_SPACE = range(4)
_CHECK_KIND, _CHECK_TARGET = range(2)
(_VERSION, _FUN_NAME, _IN_TREE, _IN_AVALS, _OUT_TREE, _OUT_AVALS, _NR_DEVICES_SHORT, _IN_SHARDINGS,
 _OUT_SHARDINGS, _PLATFORMS, _ORDERED_EFFECTS, _UNORDERED_EFFECTS, _DISABLED_CHECKS, _MODULE,
 _CALLING_CONVENTION, _KEPT_VAR_IDX, _USES_GLOBAL_CONSTANTS, _VJP, _NR_DEVICES, _UNIQUE_AVALS,
 _UNIQUE_MESHES, _UNIQUE_SHARDINGS, _IN_AVALS_IDXS, _OUT_AVALS_IDXS, _IN_SHARDINGS_IDXS,
 _OUT_SHARDINGS_IDXS) = range(26)
_N_EXPORTED_FIELDS = 26

# Enums of the schema.
_LEAF, _NONE, _TUPLE, _LIST, _DICT, _CUSTOM = range(6)
_SHAPED_ARRAY = 0
_MEMORY_DEVICE = 1
_CHECK_PLATFORM, _CHECK_CUSTOM_CALL, _CHECK_SHAPE_ASSERTIONS = range(3)
_DTYPE_CODES = {
    "bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint8": 5, "uint16": 6, "uint32": 7,
    "uint64": 8, "float16": 9, "float32": 10, "float64": 11, "complex64": 12, "complex128": 13,
    "bfloat16": 14, "int4": 15, "uint4": 16, "float8_e4m3b11fnuz": 17, "float8_e4m3fn": 18,
    "float8_e4m3fnuz": 19, "float8_e5m2": 20, "float8_e5m2fnuz": 21, "float0": 22, "float8_e4m3": 23,
    "float8_e3m4": 24, "float8_e8m0fnu": 25, "float4_e2m1fn": 26,
}


def _dtype_by_name(name: str) -> np.dtype | None:
    if name == "float0":
        return dt.float0
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else None


_CODE_OF_DTYPE = {d: code for name, code in _DTYPE_CODES.items() if (d := _dtype_by_name(name)) is not None}
_DTYPE_OF_CODE = {code: d for d, code in _CODE_OF_DTYPE.items()}



class DisabledSafetyCheck:
    """A safety check skipped when the Exported is called (kept in its serialized form):
    ``platform()`` (call on a platform it was not exported for) or ``custom_call(target)``."""

    def __init__(self, kind: str, target: str | None = None):
        self._kind, self._target = kind, target

    @classmethod
    def platform(cls) -> DisabledSafetyCheck:
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> DisabledSafetyCheck:
        return cls("custom_call", target_name)

    def is_custom_call(self) -> str | None:
        return self._target if self._kind == "custom_call" else None

    def __eq__(self, other):
        return (isinstance(other, DisabledSafetyCheck)
                and (self._kind, self._target) == (other._kind, other._target))

    def __hash__(self):
        return hash((self._kind, self._target))

    def __str__(self):       # as JAX prints one: "platform", "custom_call:<target>"
        return self._kind if self._target is None else f"{self._kind}:{self._target}"

    __repr__ = __str__


# ------------------------------------------------------- custom pytree nodes

# node type -> (its name in the bytes, auxdata -> bytes)
_serialization_registry: dict = {}
# name in the bytes -> (node type, bytes -> auxdata, (auxdata, children) -> node)
_deserialization_registry: dict = {}


def register_pytree_node_serialization(nodetype, *, serialized_name: str, serialize_auxdata,
                                       deserialize_auxdata, from_children=None):
    """Make pytree nodes of ``nodetype`` (already a registered pytree node) serializable under
    ``serialized_name``; ``from_children(auxdata, children)`` rebuilds one (by default the
    unflatten function the node was registered with)."""
    if nodetype in _serialization_registry:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. "
                         f"Previous registration was with serialized_name "
                         f"`{_serialization_registry[nodetype][0]}`.")
    if serialized_name in _deserialization_registry:
        raise ValueError("Duplicate serialization registration for "
                         f"serialized_name `{serialized_name}`. Previous registration was for type "
                         f"`{_deserialization_registry[serialized_name][0]}`.")
    if from_children is None:
        from_children = functools.partial(_unflatten_node, nodetype)
    _serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
    _deserialization_registry[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def _unflatten_node(nodetype, auxdata, children):
    """A ``nodetype`` node from its auxdata and children, by its registered unflatten function."""
    kids = [tree_flatten(c) for c in children]
    node = PyTreeDef.from_node_data_and_children(registry, (nodetype, auxdata), [t for _, t in kids])
    return node.unflatten([leaf for leaves, _ in kids for leaf in leaves])


def register_namedtuple_serialization(nodetype, *, serialized_name: str):
    """Make the namedtuple class ``nodetype`` serializable under ``serialized_name`` (its field
    names are kept, as JSON, and name the children when it is read back)."""
    if not (isinstance(nodetype, type) and issubclass(nodetype, tuple) and hasattr(nodetype, "_fields")):
        raise ValueError("Use `jaxprc.export.register_pytree_node_serialization` for types other "
                         "than `collections.namedtuple`.")
    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name,
        serialize_auxdata=lambda _: json.dumps(nodetype._fields).encode("utf-8"),
        deserialize_auxdata=lambda data: json.loads(data.decode("utf-8")),
        from_children=lambda fields, children: nodetype(**dict(zip(fields, children))))


def _ordered_dict_keys(keys) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only when the "
                                  f"keys are strings. Found keys: {keys}.")
    return json.dumps(list(keys)).encode("utf-8")


register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict", serialize_auxdata=_ordered_dict_keys,
    deserialize_auxdata=lambda data: json.loads(data.decode("utf-8")),
    from_children=lambda keys, children: collections.OrderedDict(zip(keys, children)))


# ------------------------------------------------------------------ writing

def serialize(exp, vjp_order: int = 0) -> bytearray:
    builder = flatbuffers.Builder(65536)
    builder.Finish(_write_exported(builder, exp, vjp_order))
    return builder.Output()


def _offsets_vector(builder, offsets) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def _strings(builder, texts) -> int:
    return _offsets_vector(builder, [builder.CreateString(t) for t in texts])


def _write_aval(builder, aval: ShapedArray) -> int:
    if aval.dtype not in _CODE_OF_DTYPE:
        raise ValueError(f"serialize: dtype {aval.dtype} has no code in the serialization format")
    shape = _strings(builder, [str(d) for d in aval.shape])
    builder.StartObject(4)
    builder.PrependInt8Slot(_AVAL_KIND, _SHAPED_ARRAY, 0)
    builder.PrependUOffsetTRelativeSlot(_AVAL_SHAPE, shape, 0)
    builder.PrependInt8Slot(_AVAL_DTYPE, _CODE_OF_DTYPE[aval.dtype], 0)
    builder.PrependInt8Slot(_AVAL_MEMORY_SPACE, _MEMORY_DEVICE, 0)
    return builder.EndObject()


def _write_tree(builder, treedef) -> int:
    node_data = treedef.node_data()
    children = treedef.children()
    children_off = _offsets_vector(builder, [_write_tree(builder, c) for c in children]) if children else 0
    names_off = custom_name = auxdata = 0
    node_type = node_data[0] if node_data is not None else None
    if node_data is None:
        kind = _LEAF
    elif node_type is types.NoneType:
        kind = _NONE
    elif node_type is tuple:
        kind = _TUPLE
    elif node_type is list:
        kind = _LIST
    elif node_type is dict:
        kind = _DICT
        keys = node_data[1]
        bad = [k for k in keys if not isinstance(k, str)]
        if bad:
            raise TypeError("Serialization is supported only for dictionaries with string keys. "
                            f"Found key {bad[0]} of type {type(bad[0])}.")
        names_off = _strings(builder, keys)
    elif node_type in _serialization_registry:
        kind = _CUSTOM
        name, serialize_auxdata = _serialization_registry[node_type]
        data = serialize_auxdata(node_data[1])
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError("The custom serialization function for `node_type` must return a "
                             f"`bytes` object. It returned a {type(data)}.")
        custom_name = builder.CreateString(name)
        auxdata = builder.CreateByteVector(bytes(data))
    else:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type `{node_type}`. "
                         "Use `export.register_pytree_node_serialization` or "
                         "`export.register_namedtuple_serialization`.")
    builder.StartObject(5)
    builder.PrependInt8Slot(_TREE_KIND, kind, 0)
    for slot, off in ((_TREE_CHILDREN, children_off), (_TREE_NAMES, names_off),
                      (_TREE_CUSTOM_NAME, custom_name), (_TREE_AUXDATA, auxdata)):
        if off:
            builder.PrependUOffsetTRelativeSlot(slot, off, 0)
    return builder.EndObject()


def _write_check(builder, check) -> int:
    target = check.is_custom_call()
    target_off = builder.CreateString(target) if target is not None else 0
    builder.StartObject(2)
    builder.PrependInt8Slot(_CHECK_KIND, _CHECK_CUSTOM_CALL if target is not None else _CHECK_PLATFORM, 0)
    if target_off:
        builder.PrependUOffsetTRelativeSlot(_CHECK_TARGET, target_off, 0)
    return builder.EndObject()


def _empty_sharding(builder) -> int:
    builder.StartObject(3)           # kind unspecified, no proto, no named sharding: one device
    return builder.EndObject()


def _uints(builder, values, dtype) -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype))


def _write_effect(builder, effect) -> int:
    """An effect is written as its class's name (``str(type)``, as JAX writes it) and read back by
    constructing its class with no arguments: that must give an equal effect."""
    try:
        replica = type(effect)()
    except Exception:
        raise NotImplementedError(f"Effect {effect} must have a nullary constructor to be serializable") from None
    try:
        same_hash = hash(effect) == hash(replica)
    except Exception:
        raise NotImplementedError(f"Effect {effect} must be hashable to be serializable") from None
    if effect != replica or not same_hash:
        raise NotImplementedError(f"Effect {effect} must have a nullary class constructor that produces an "
                                  "equal effect object.")
    name = builder.CreateString(str(type(effect)))
    builder.StartObject(1)
    builder.PrependUOffsetTRelativeSlot(0, name, 0)
    return builder.EndObject()


def _write_exported(builder, exp, vjp_order: int) -> int:
    fun_name = builder.CreateString(exp.fun_name)
    in_tree, out_tree = _write_tree(builder, exp.in_tree), _write_tree(builder, exp.out_tree)
    unique = list(dict.fromkeys((*exp.in_avals, *exp.out_avals)))
    index = {a: i for i, a in enumerate(unique)}
    in_avals = _offsets_vector(builder, [_write_aval(builder, a) for a in exp.in_avals])
    out_avals = _offsets_vector(builder, [_write_aval(builder, a) for a in exp.out_avals])
    in_shardings = _offsets_vector(builder, [_empty_sharding(builder) for _ in exp.in_avals])
    out_shardings = _offsets_vector(builder, [_empty_sharding(builder) for _ in exp.out_avals])
    platforms = _strings(builder, exp.platforms)
    ordered_effects = _offsets_vector(builder, [_write_effect(builder, e) for e in exp.ordered_effects])
    unordered_effects = _offsets_vector(builder, [_write_effect(builder, e) for e in exp.unordered_effects])
    checks = _offsets_vector(builder, [_write_check(builder, c) for c in exp.disabled_safety_checks])
    module = builder.CreateByteVector(bytes(exp.mlir_module_serialized))
    kept = _uints(builder, exp.module_kept_var_idx, np.uint16)
    vjp = 0
    if vjp_order > 0:
        if not exp.has_vjp():
            raise ValueError("serialization of an Exported that does not have vjps of high-enough order")
        vjp = _write_exported(builder, exp.vjp(), vjp_order - 1)
    unique_avals = _offsets_vector(builder, [_write_aval(builder, a) for a in unique])
    no_meshes, no_shardings = _offsets_vector(builder, []), _offsets_vector(builder, [])
    in_idxs = _uints(builder, [index[a] for a in exp.in_avals], np.uint32)
    out_idxs = _uints(builder, [index[a] for a in exp.out_avals], np.uint32)
    in_sh_idxs = _uints(builder, [0] * len(exp.in_avals), np.uint32)     # 0: no sharding
    out_sh_idxs = _uints(builder, [0] * len(exp.out_avals), np.uint32)

    builder.StartObject(_N_EXPORTED_FIELDS)
    builder.PrependUint16Slot(_VERSION, _WRITTEN_SERIALIZATION_VERSION, 0)
    for slot, off in ((_FUN_NAME, fun_name), (_IN_TREE, in_tree), (_IN_AVALS, in_avals),
                      (_OUT_TREE, out_tree), (_OUT_AVALS, out_avals), (_IN_SHARDINGS, in_shardings),
                      (_OUT_SHARDINGS, out_shardings), (_PLATFORMS, platforms),
                      (_ORDERED_EFFECTS, ordered_effects), (_UNORDERED_EFFECTS, unordered_effects),
                      (_DISABLED_CHECKS, checks), (_MODULE, module), (_KEPT_VAR_IDX, kept), (_VJP, vjp),
                      (_UNIQUE_AVALS, unique_avals), (_UNIQUE_MESHES, no_meshes),
                      (_UNIQUE_SHARDINGS, no_shardings), (_IN_AVALS_IDXS, in_idxs),
                      (_OUT_AVALS_IDXS, out_idxs), (_IN_SHARDINGS_IDXS, in_sh_idxs),
                      (_OUT_SHARDINGS_IDXS, out_sh_idxs)):
        if off:
            builder.PrependUOffsetTRelativeSlot(slot, off, 0)
    builder.PrependUint32Slot(_NR_DEVICES, exp.nr_devices, 0)
    builder.PrependUint16Slot(_CALLING_CONVENTION, exp.calling_convention_version, 0)
    builder.PrependBoolSlot(_USES_GLOBAL_CONSTANTS, exp.uses_global_constants, 0)
    return builder.EndObject()


# ------------------------------------------------------------------ reading

class _Reader:
    """One table of the buffer, read field by field (slot numbers of the schema)."""

    def __init__(self, buf, pos: int):
        self.tab = Table(buf, pos)

    def _field(self, slot: int) -> int:
        return self.tab.Offset(4 + 2 * slot)

    def scalar(self, slot: int, flags, default=0):
        o = self._field(slot)
        return self.tab.Get(flags, self.tab.Pos + o) if o else default

    def string(self, slot: int) -> str | None:
        o = self._field(slot)
        return self.tab.String(self.tab.Pos + o).decode("utf-8") if o else None

    def table(self, slot: int) -> _Reader | None:
        o = self._field(slot)
        return _Reader(self.tab.Bytes, self.tab.Indirect(self.tab.Pos + o)) if o else None

    def _vector(self, slot: int) -> tuple[int, int]:
        o = self._field(slot)
        return (self.tab.Vector(o), self.tab.VectorLen(o)) if o else (0, 0)

    def tables(self, slot: int) -> list[_Reader]:
        start, n = self._vector(slot)
        return [_Reader(self.tab.Bytes, self.tab.Indirect(start + 4 * i)) for i in range(n)]

    def strings(self, slot: int) -> list[str]:
        start, n = self._vector(slot)
        return [self.tab.String(start + 4 * i).decode("utf-8") for i in range(n)]

    def numbers(self, slot: int, dtype) -> np.ndarray:
        start, n = self._vector(slot)
        if not n:
            return np.zeros(0, dtype)
        return np.frombuffer(self.tab.Bytes, np.dtype(dtype).newbyteorder("<"), n, start)    # little-endian


def deserialize(ser, exported_type):
    """The ``exported_type`` (``export.Exported``) that the bytes ``ser`` describe."""
    buf = bytearray(ser)
    root = flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)
    return _read_exported(_Reader(buf, root), exported_type)


def _read_aval(r: _Reader, scope: SymbolicScope) -> ShapedArray:
    if r.scalar(_AVAL_KIND, flatbuffers.number_types.Int8Flags) != _SHAPED_ARRAY:
        raise NotImplementedError("deserialize: only arrays (not tokens) are supported as arguments and results")
    code = r.scalar(_AVAL_DTYPE, flatbuffers.number_types.Int8Flags)
    if code not in _DTYPE_OF_CODE:
        raise NotImplementedError(f"deserialize: dtype code {code} (extended dtypes such as PRNG keys) "
                                  "is not supported")
    shape = symbolic_shape(",".join(r.strings(_AVAL_SHAPE)), scope=scope)
    return ShapedArray(shape, _DTYPE_OF_CODE[code])


def _read_tree_as_pytree(r: _Reader, leaves):
    kind = r.scalar(_TREE_KIND, flatbuffers.number_types.Int8Flags)
    children = [_read_tree_as_pytree(c, leaves) for c in r.tables(_TREE_CHILDREN)]
    if kind == _LEAF:
        return next(leaves)
    if kind == _NONE:
        return None
    if kind == _TUPLE:
        return tuple(children)
    if kind == _LIST:
        return children
    if kind == _DICT:
        return dict(zip(r.strings(_TREE_NAMES), children))
    if kind == _CUSTOM:
        name = r.string(_TREE_CUSTOM_NAME)
        if name not in _deserialization_registry:
            raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type `{name}`. "
                             "Use `export.register_pytree_node_serialization` or "
                             "`export.register_namedtuple_serialization`.")
        _, deserialize_auxdata, from_children = _deserialization_registry[name]
        return from_children(deserialize_auxdata(r.numbers(_TREE_AUXDATA, np.uint8).tobytes()), children)
    raise ValueError(f"Cannot deserialize PyTreeDef with unknown kind: {kind}")


def _read_tree(r: _Reader):
    return tree_structure(_read_tree_as_pytree(r, iter(lambda: 0.0, None)))


def _read_check(r: _Reader):
    kind = r.scalar(_CHECK_KIND, flatbuffers.number_types.Int8Flags)
    if kind == _CHECK_CUSTOM_CALL:
        return DisabledSafetyCheck.custom_call(r.string(_CHECK_TARGET))
    if kind == _CHECK_PLATFORM:
        return DisabledSafetyCheck.platform()
    raise ValueError(f"Cannot deserialize DisabledSafetyCheck with unknown kind: {kind}")


def _read_exported(r: _Reader, exported_type):
    u16, u32, i16 = (flatbuffers.number_types.Uint16Flags, flatbuffers.number_types.Uint32Flags,
                     flatbuffers.number_types.Int16Flags)
    scope = SymbolicScope(())       # the format keeps no constraints (as JAX's)
    unique = [_read_aval(a, scope) for a in r.tables(_UNIQUE_AVALS)]

    def avals(idxs_slot, full_slot):
        idxs = r.numbers(idxs_slot, np.uint32)
        if len(idxs):
            return tuple(unique[i] for i in idxs)
        return tuple(_read_aval(a, scope) for a in r.tables(full_slot))

    nr_devices = r.scalar(_NR_DEVICES, u32) or r.scalar(_NR_DEVICES_SHORT, i16)
    vjp = r.table(_VJP)
    return exported_type.from_module(
        fun_name=r.string(_FUN_NAME) or "",
        in_tree=_read_tree(r.table(_IN_TREE)), in_avals=avals(_IN_AVALS_IDXS, _IN_AVALS),
        out_tree=_read_tree(r.table(_OUT_TREE)), out_avals=avals(_OUT_AVALS_IDXS, _OUT_AVALS),
        nr_devices=nr_devices, platforms=tuple(r.strings(_PLATFORMS)),
        disabled_safety_checks=tuple(_read_check(c) for c in r.tables(_DISABLED_CHECKS)),
        mlir_module_serialized=r.numbers(_MODULE, np.uint8).tobytes(),
        calling_convention_version=r.scalar(_CALLING_CONVENTION, u16),
        module_kept_var_idx=tuple(int(i) for i in r.numbers(_KEPT_VAR_IDX, np.uint16)),
        uses_global_constants=bool(r.scalar(_USES_GLOBAL_CONSTANTS, flatbuffers.number_types.BoolFlags)),
        vjp=None if vjp is None else (lambda: _read_exported(vjp, exported_type)),
        ordered_effects=tuple(_read_effect(e) for e in r.tables(_ORDERED_EFFECTS)),
        unordered_effects=tuple(_read_effect(e) for e in r.tables(_UNORDERED_EFFECTS)))


def _effect_types(base=LibraryEffect):
    for sub in base.__subclasses__():
        yield sub
        yield from _effect_types(sub)


def _read_effect(r: _Reader):
    """The effect whose class's name (``str(type)``) the table holds: one of the library effect
    classes defined in this process (``jaxprc.extend.core.Effect`` subclasses), built with no
    arguments."""
    name = r.string(0)
    for effect_type in _effect_types():
        if str(effect_type) == name:
            try:
                return effect_type()
            except Exception:
                raise NotImplementedError(f"deserializing effect {name} that does not have a nullary "
                                          "class constructor") from None
    raise NotImplementedError(f"cannot deserialize effect type {name}")
