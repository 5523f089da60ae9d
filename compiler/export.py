"""``jaxprc.export``: JAX's ``jax.export`` API over jaxprc programs, in memory.

``export(jit(f))(*arg_specs)`` traces ``f`` once for argument specs whose
shapes may hold symbolic dimensions (``symbolic_shape("b, 784")``) and gives an
``Exported``: the program with its calling convention (input and output pytrees
and types). ``Exported.call`` runs it on arrays of any sizes that satisfy the
dimension variables' constraints, specialising the program to those sizes
(``passes.specialize``) and compiling once per set of sizes.

Not here yet: serialization (JAX's flatbuffer format), the dynamic StableHLO of a
polymorphic program (``mlir_module()`` works for static shapes only), vjp of an
Exported, and multi-platform lowering.
"""
from __future__ import annotations

from typing import Callable, Sequence

from . import passes
from .api import ShapeDtypeStruct, default_backend, jaxpr_as_fun, jit
from .ir.core import ClosedJaxpr
from .ir.shape_poly import SymbolicScope, is_symbolic_dim, split_top_level, symbolic_shape
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["Exported", "SymbolicScope", "default_export_platform", "export", "is_symbolic_dim",
           "symbolic_args_specs", "symbolic_shape"]


def default_export_platform() -> str:
    return default_backend()


class Exported:
    """A traced function with its calling convention (JAX's ``jax.export.Exported``)."""

    def __init__(self, fun_name: str, jaxpr: ClosedJaxpr, in_tree, out_tree, platforms):
        self.fun_name = fun_name
        self.jaxpr = jaxpr
        self.in_tree, self.out_tree = in_tree, out_tree
        self.in_avals, self.out_avals = tuple(jaxpr.in_avals), tuple(jaxpr.out_avals)
        self.platforms = tuple(platforms)
        self.nr_devices = 1
        self._run = None

    def __str__(self):
        return f"Exported(fun_name={self.fun_name}, in_avals={self.in_avals}, out_avals={self.out_avals})"

    __repr__ = __str__

    def mlir_module(self) -> str:
        """The StableHLO text of the program (static shapes only, for now)."""
        if passes.is_polymorphic(self.jaxpr):
            raise NotImplementedError(
                f"Exported.mlir_module of '{self.fun_name}': the program has symbolic dimensions "
                f"({', '.join(a.str_short() for a in self.in_avals)}), and jaxprc does not emit dynamic "
                "StableHLO yet; call() runs it, specialised to the arguments' sizes.")
        specs = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in self.in_avals]
        return jit(jaxpr_as_fun(self.jaxpr)).lower(*specs).as_text()

    def call(self, *args, **kwargs):
        """Run the exported function on arguments of its pytree structure and types; sizes of
        symbolic dimensions come from the arguments (checked against the constraints)."""
        here = default_backend()
        if here not in self.platforms:
            raise ValueError(f"Function '{self.fun_name}' was exported for platforms {self.platforms} "
                             f"but it is used on '{here}'.")
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise ValueError(f"Exported '{self.fun_name}' called with arguments of pytree structure "
                             f"{tree}, but it was exported for {self.in_tree}.")
        for i, (x, aval) in enumerate(zip(leaves, self.in_avals)):
            dtype = getattr(x, "dtype", None)
            if dtype is not None and dtype != aval.dtype:
                raise TypeError(f"Exported '{self.fun_name}': argument {i} has dtype {dtype}, but it was "
                                f"exported for {aval.str_short()}.")
        if self._run is None:
            self._run = jit(jaxpr_as_fun(self.jaxpr))
        return tree_unflatten(self.out_tree, self._run(*leaves))


def export(fun_jit, *, platforms: Sequence[str] | None = None, disabled_checks=()) -> Callable[..., Exported]:
    """``export(jit(f))(*arg_specs)``: trace ``f`` for the specs (arrays or ``ShapeDtypeStruct``s,
    with symbolic dimensions allowed) into an ``Exported``."""
    if not hasattr(fun_jit, "trace"):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: {fun_jit!r}")
    here = default_backend()
    platforms = (here,) if platforms is None else tuple(platforms)

    def do_export(*args, **kwargs) -> Exported:
        traced = fun_jit.trace(*args, **kwargs)
        return Exported(traced.fun_name, traced.jaxpr, traced._in_tree, traced._out_tree, platforms)

    return do_export


def symbolic_args_specs(args, shapes_specs, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None):
    """``ShapeDtypeStruct``s for the pytree ``args`` with the shapes ``shapes_specs`` gives (one
    spec for all, or a matching pytree; ``_`` keeps the argument's own size), in one scope."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot use both `scope` and `constraints`")
    leaves, tree = tree_flatten(args)
    specs = ([shapes_specs] * len(leaves) if isinstance(shapes_specs, str) or shapes_specs is None
             else tree_flatten(shapes_specs, is_leaf=lambda s: s is None)[0])
    if len(specs) != len(leaves):
        raise ValueError(f"symbolic_args_specs: {len(specs)} shape specs for {len(leaves)} arguments")

    def one(x, spec):
        shape = tuple(x.shape)
        if spec is None:
            dims = shape
        else:
            texts = [t for t in split_top_level(spec.strip().strip("()")) if t]
            if len(texts) != len(shape):
                raise ValueError(f"shape spec {spec!r} has {len(texts)} dimensions, the argument {len(shape)}")
            dims = tuple(d if t == "_" else symbolic_shape(t, scope=scope)[0] for t, d in zip(texts, shape))
        return ShapeDtypeStruct(dims, x.dtype)

    return tree_unflatten(tree, [one(x, s) for x, s in zip(leaves, specs)])
