"""``jaxprc.experimental.layout``: JAX's memory-layout descriptors.

``Layout`` (the order of an array's dimensions in memory, major to minor) and ``Format`` (a layout
paired with a sharding) are the types libraries test for and pass around. jaxprc lets XLA choose
every layout: ``jit`` does not take them as shardings (it raises on one it is given).
"""
from __future__ import annotations

import dataclasses

__all__ = ["Layout", "Format"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """The dimensions' order in memory (``major_to_minor``), with XLA's optional tiling."""
    major_to_minor: tuple[int, ...] | None = None
    tiling: tuple[tuple[int, ...], ...] | None = None
    sub_byte_element_size_in_bits: int = 0


@dataclasses.dataclass(frozen=True)
class Format:
    """A layout with a sharding (either may be None: left to the compiler)."""
    layout: Layout | None = None
    sharding: object = None
