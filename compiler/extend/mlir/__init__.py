"""``jaxprc.extend.mlir``: jaxlib's MLIR Python bindings (``ir``, ``passmanager``, ``dialects``),
the ones jaxprc lowers with."""
from jaxlib.mlir import dialects, ir, passmanager  # noqa: F401

__all__ = ["dialects", "ir", "passmanager"]
