"""Programs over several devices: ``jit(in_shardings=, out_shardings=)`` and sharding constraints.

A jitted function whose arguments, results or ``with_sharding_constraint``s name
shardings is lowered as usual, then annotated for Shardy: ``mhlo.num_partitions``,
``sdy.sharding`` on ``main``'s arguments and results, one ``sdy.mesh @mesh``
(the mesh's devices, in flat order, are the executable's device assignment). XLA
partitions it; results come back as ShardedArrays with the shardings it chose.
"""
from __future__ import annotations

import inspect

import numpy as np
from jaxlib.mlir import ir, passmanager

from .. import runtime, sharding as shd
from .caches import BoundedCache
from .compile_guards import execution_refused
from .dispatch import runtime_aval
from ..ir.core import ClosedJaxpr, Primitive, subjaxprs
from ..ir.sharding_type import jax_type_text
from ..ir.tracing import get_aval
from ..ir.dtypes import config
from ..ir.tree_util import broadcast_prefix
from ..lax.sharding_constraint import constrain, named_sharding, sdy_sharding
from .lowering import lower_jaxpr
from ..runtime.sharded import ShardedArray, SpmdExecutable

__all__ = ["reshard"]


def reshard(xs, out_shardings):
    """``xs`` (a pytree) laid out as ``out_shardings`` (one sharding or PartitionSpec for all leaves,
    or a matching pytree), on any mesh axes: moved on the devices now, a layout constraint under a
    trace (JAX's ``jax.reshard``)."""
    from ..ir.tracing import Tracer
    from ..ir.tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(xs)
    outs = []
    for leaf, s in zip(leaves, broadcast(out_shardings, tree, "reshard out_shardings")):
        if s is None:
            raise ValueError("Reshard should only be used with out_shardings which are non-None and have a "
                             f"non-empty mesh. Got sharding {s}.")
        if isinstance(s, shd.PartitionSpec) and shd.context_mesh() is None:
            raise ValueError("Using PartitionSpec when you are not under a mesh context is not allowed. Please "
                             "pass a NamedSharding instance or enter into a mesh context via `jax.set_mesh`. "
                             f"Got {s}")
        target = shd.resolve(s, "reshard")
        if isinstance(target, shd.NamedSharding):      # the spec written for every dimension, as JAX does
            shape = tuple(leaf.shape) if hasattr(leaf, "shape") else np.shape(leaf)
            target.check_shape(shape, "reshard")
            target = shd.NamedSharding(target.mesh, shd.PartitionSpec(
                *target.spec, *[None] * (len(shape) - len(target.spec))))
        if isinstance(leaf, Tracer):
            outs.append(constrain([leaf], [target], "reshard")[0])
        else:
            from ..api import device_put
            outs.append(device_put(leaf, target))
    return tree_unflatten(tree, outs)




# --------------------------------------------------------------- jit

def broadcast(prefix, tree, what: str) -> list:
    """One entry per leaf of ``tree`` from ``prefix``: a sharding (or None) for a whole subtree,
    or a container matching the tree's own (JAX's error listing each mismatch otherwise)."""
    return broadcast_prefix(prefix, tree, what, is_leaf=lambda p: isinstance(p, (shd.Sharding, shd.PartitionSpec))
                            or hasattr(p, "platform"))


def broadcast_args(in_shardings, in_tree) -> list:
    """Per argument leaf (``in_tree``: (positional args, keyword args)): one sharding for all,
    or one per positional argument (keyword arguments then have none)."""
    if isinstance(in_shardings, (tuple, list)) and not isinstance(in_shardings, shd.PartitionSpec):
        return broadcast((tuple(in_shardings), None), in_tree, "in_shardings")
    return broadcast((in_shardings, in_shardings), in_tree, "in_shardings")


_MESH_PARAMS = {"sharding_constraint": "sharding", "shard_map": "mesh"}   # primitive -> its mesh param


def _uses_constraints(cj) -> bool:
    for eqn in cj.jaxpr.eqns:
        if eqn.primitive.name in _MESH_PARAMS or any(_uses_constraints(s) for s in subjaxprs(eqn)):
            return True
    return False


def _constraint_params(cj, found):
    """The shardings named by the program's constraints and shard_maps (nested ones too)."""
    for eqn in cj.jaxpr.eqns:
        if eqn.primitive.name in _MESH_PARAMS:
            found.append(eqn.params[_MESH_PARAMS[eqn.primitive.name]].named())
        for s in subjaxprs(eqn):
            _constraint_params(s, found)
    return found


def needs_spmd(cj, leaves, in_shardings, out_shardings) -> bool:
    return (in_shardings is not None or out_shardings is not None or _uses_constraints(cj)
            or any(isinstance(x, ShardedArray) for x in leaves)
            or any(getattr(a, "sharding_in_type", None) is not None for a in cj.in_avals)
            or any(isinstance(c, ShardedArray) for c in cj.consts))


class ShardedLowering:
    """A program annotated for its devices: the shardings of its arguments, results and
    constraints, which must all use one mesh's devices."""

    def __init__(self, cj: ClosedJaxpr, out_tree, name: str, donated, leaves, in_shardings=None,
                 out_shardings=None, describe=None):
        self.jaxpr, self.out_tree, self.name = cj, out_tree, name
        in_shardings = in_shardings or [None] * len(cj.in_avals)
        out_shardings = out_shardings or [None] * len(cj.out_avals)
        ins = [shd.resolve(s, f"jit of '{name}': in_shardings") if s is not None else None
               for s in in_shardings]
        check_committed_devices(leaves, ins, describe or (lambda: (name, [f"args[{i}]" for i in range(len(leaves))])))
        # an argument without a sharding of its own keeps the one it has
        ins = [s if s is not None or not isinstance(x, ShardedArray) else x.sharding
               for s, x in zip(ins, leaves)]
        outs = [shd.resolve(s, f"jit of '{name}': out_shardings") if s is not None else None
                for s in out_shardings]
        for s in outs:
            if isinstance(s, shd.NamedSharding) and any(p is shd.UNCONSTRAINED for p in s.spec):
                raise ValueError(f"Unconstrained dims are not allowed when passed to out_shardings: {s}")
        for s, a in zip(ins, cj.in_avals):
            if s is not None:
                s.check_shape(a.shape, f"jit of '{name}': in_shardings")
        for s, a in zip(outs, cj.out_avals):
            if s is not None:
                s.check_shape(a.shape, f"jit of '{name}': out_shardings")
        every = [s for s in ins + outs if s is not None] + _constraint_params(cj, [])
        # constants over several devices (a closed-over sharded array) name the program's mesh too
        every += [c.sharding for c in cj.consts if isinstance(c, ShardedArray) and c.sharding is not None]
        self.devices = _common_devices(every, name)
        self.mesh = next((s.mesh for s in every if isinstance(s, shd.NamedSharding)), None)
        # a result whose type names a sharding is laid out so (as JAX's results of Explicit axes)
        outs = [s if s is not None else self._typed(a) for s, a in zip(outs, cj.out_avals)]
        self.outs = outs
        self.lowered = lower_spmd(cj, name, donated, ins, outs, self.devices)


    def _typed(self, aval):
        typed = getattr(aval, "sharding_in_type", None)
        if typed is None or self.mesh is None or self.mesh.abstract_mesh != typed.mesh:
            return None
        return shd.NamedSharding(self.mesh, typed.spec)


class ShardedCall:
    """A jit cache entry for a program over several devices (same call interface as jit's)."""

    def __init__(self, plan: ShardedLowering):
        cj = self.jaxpr = plan.jaxpr
        self.plan = plan
        self.in_avals = [runtime_aval(a) for a in cj.in_avals]
        self.executable = SpmdExecutable(plan.lowered.module, plan.devices, plan.name, cj.out_avals,
                                         [s is None for s in plan.outs], plan.lowered.host_callbacks)
        self.out_shardings = [s if s is not None else self._named(h, a.ndim)
                              for s, h, a in zip(plan.outs, self.executable.out_hlo, cj.out_avals)]

    def _named(self, hlo, ndim):
        if self.plan.mesh is not None:
            found = shd.named_from_hlo(self.plan.mesh, hlo, ndim)
            if found is not None:
                return found
        if len(self.plan.devices) == 1:
            return shd.SingleDeviceSharding(self.plan.devices[0])
        return None

    def __call__(self, leaves):
        if config.jax_no_execution:
            raise execution_refused(self.executable.name)
        outs = self.executable.run(leaves, self.in_avals)
        for o, s in zip(outs, self.out_shardings):
            o.sharding = s
        return self.plan.out_tree.unflatten(outs)


def check_committed_devices(leaves, given, describe) -> None:
    """JAX's error when arguments committed to different devices (without an in_sharding of the
    call's) meet in one computation; ``describe()`` gives the function's name and the leaves'."""
    committed = [(i, x) for i, (x, s) in enumerate(zip(leaves, given))
                 if s is None and isinstance(x, ShardedArray) and x.sharding is not None]
    for i, x in committed[1:]:
        first_i, first = committed[0]
        if x.sharding._devices != first.sharding._devices:
            fun, names = describe()
            said = [f"argument {names[k]} of {fun} with shape {jax_type_text(get_aval(v))} and with device ids "
                    f"{[d.id for d in v.sharding._devices]} on platform {v.sharding._devices[0].platform.upper()}"
                    for k, v in ((first_i, first), (i, x))]
            raise ValueError(f"Received incompatible devices for jitted computation. Got {said[0]} and {said[1]}")


def _common_devices(shardings, name: str) -> tuple:
    if not shardings:
        return (runtime.backend().device,)
    devices = shardings[0]._devices
    for s in shardings[1:]:
        if s._devices != devices:
            raise ValueError(f"jit of '{name}': the shardings of its arguments, results and constraints "
                             f"use different devices ({[d.id for d in devices]} and "
                             f"{[d.id for d in s._devices]}); they must all use one mesh's devices")
    return devices


def lower_spmd(cj: ClosedJaxpr, name: str, donated, ins, outs, devices):
    """The module of ``cj`` annotated for partitioning over ``devices``."""
    num_partitions = len(devices)
    lowered = lower_jaxpr(cj, name=name, donated_invars=donated, platform=runtime.default_backend(),
                          devices=[d.id for d in devices])
    if lowered.runtime_token and num_partitions > 1:
        raise ValueError(f"jit of '{name}': ordered effects (ordered=True callbacks and prints) are "
                         "not supported in a program over more than 1 device")
    if lowered.runtime_token:
        raise NotImplementedError(f"jit of '{name}': ordered effects (ordered=True callbacks and "
                                  "prints) in a program with shardings are not supported")
    module = lowered.module
    with lowered.context, ir.Location.unknown():
        i32 = ir.IntegerType.get_signless(32)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, num_partitions)
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
        main = next(op for op in module.body.operations if op.operation.name == "func.func"
                    and ir.StringAttr(op.attributes["sym_name"]).value == "main")
        for key, shardings, avals in (("arg_attrs", ins, cj.in_avals), ("res_attrs", outs, cj.out_avals)):
            old = list(main.attributes[key]) if key in main.attributes else [None] * len(shardings)
            attrs = []
            for attr, s, a in zip(old, shardings, avals):
                d = {} if attr is None else {x.name: x.attr for x in ir.DictAttr(attr)}
                if isinstance(s, shd.NamedSharding):
                    d["sdy.sharding"] = sdy_sharding(shd.ShardingParam.of(s), a.ndim)
                attrs.append(ir.DictAttr.get(d))
            main.attributes[key] = ir.ArrayAttr.get(attrs)
        passmanager.PassManager.parse("builtin.module(sdy-lift-inlined-meshes)").run(module.operation)
    return lowered


# ------------------------------------------------------------ eager on devices

_EAGER_ON_DEVICES = BoundedCache()    # (primitive, params) -> the jit of one application


def apply_on_devices(prim: Primitive, args, params):
    """An eager op with an operand on other devices than the default one: the one-op program
    runs where the operands are (partitioned like them), not on the host."""
    from ..api import jit

    def make():
        def op(*xs):
            return prim.bind(*xs, **params)
        op.__name__ = op.__qualname__ = prim.name
        if len(args) <= 2:          # errors name the operands as JAX's lax functions do: lax.add(x, y)
            op.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY)
                                                  for n in "xy"[:len(args)]])
        return jit(op)
    key = (prim, tuple(params.items()))
    try:
        hash(key)
    except TypeError:          # an unhashable param: no caching
        return make()(*args)
    return _EAGER_ON_DEVICES.get(key, make)(*args)
