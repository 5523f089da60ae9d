"""``jaxprc.extend.mlir``: jaxlib's MLIR Python bindings (``ir``, ``passmanager``, ``dialects``),
the ones jaxprc lowers with, and jaxlib's StableHLO portable-artifact converters."""
from jaxlib import _jax
from jaxlib.mlir import dialects, ir, passmanager  # noqa: F401

__all__ = ["dialects", "ir", "passmanager", "serialize_portable_artifact",
           "deserialize_portable_artifact", "refine_polymorphic_shapes", "hlo_to_stablehlo"]

serialize_portable_artifact = _jax.mlir.serialize_portable_artifact
deserialize_portable_artifact = _jax.mlir.deserialize_portable_artifact
refine_polymorphic_shapes = _jax.mlir.refine_polymorphic_shapes
hlo_to_stablehlo = _jax.mlir.hlo_to_stablehlo
