"""``jaxprc.debug.visualize_sharding`` / ``visualize_array_sharding``: which device holds which
block of a 1-D or 2-D array, drawn as a box table in plain text.

The layout follows JAX's (cells sized by the blocks' share of each dimension,
labelled ``CPU 0,1`` with the devices holding a block), without colors: JAX
draws with ``rich``, which jaxprc does not depend on.
"""
from __future__ import annotations

from .ir.tracing import Tracer

__all__ = ["visualize_array_sharding", "visualize_sharding"]

_HEIGHT_TO_WIDTH = 2.5     # a text line is about 2.5 columns high


def _blocks(shape, sharding) -> dict:
    """(row, column) of each block -> (its fraction of the rows or None for 1-D, of the columns,
    the ids of the devices holding it)."""
    starts = [sorted({(s[d].start or 0) for s in sharding.devices_indices_map(shape).values()})
              for d in range(len(shape))]
    cells: dict = {}
    for dev, index in sharding.devices_indices_map(tuple(shape)).items():
        spans = [(s.start or 0, shape[d] if s.stop is None else s.stop) for d, s in enumerate(index)]
        pos = tuple(starts[d].index(a) for d, (a, _) in enumerate(spans))
        fractions = [(b - a) / shape[d] if shape[d] else 1.0 for d, (a, b) in enumerate(spans)]
        if len(shape) == 1:
            pos, fractions = (0,) + pos, [None] + fractions
        cells.setdefault(pos, (fractions[0], fractions[1], set()))[2].add(dev.id)
    return cells


def visualize_sharding(shape, sharding, *, use_color: bool = True, scale: float = 1.0, min_width: int = 9,
                       max_width: int = 80, color_map=None):
    """Print the blocks of an array of ``shape`` laid out as ``sharding`` (``use_color`` and
    ``color_map`` have no effect: the table is plain text)."""
    shape = tuple(shape)
    if not 1 <= len(shape) <= 2:
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 dimensions.")
    kind = next(iter(sharding.device_set)).platform.upper()
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / max(shape[0], 1))
    cells = _blocks(shape, sharding)
    rows = max(r for r, _ in cells) + 1
    cols = max(c for _, c in cells) + 1
    labels, widths, heights = {}, [0] * cols, [1] * rows
    for (r, c), (h, w, ids) in cells.items():
        labels[r, c] = f"{kind} " + ",".join(map(str, sorted(ids)))
        width = min(max(int(w * base_width * _HEIGHT_TO_WIDTH), min_width), max_width)
        widths[c] = max(widths[c], width - 2, len(labels[r, c]) + 2)
        if h is not None:
            heights[r] = max(heights[r], int(h * base_height) - 1)
    lines = ["┌" + "┬".join("─" * w for w in widths) + "┐"]
    for r in range(rows):
        for k in range(heights[r]):
            middle = k == (heights[r] - 1) // 2
            lines.append("│" + "│".join((labels[r, c] if middle else "").center(widths[c])
                                        for c in range(cols)) + "│")
        lines.append(("├" + "┼".join("─" * w for w in widths) + "┤") if r < rows - 1 else
                     ("└" + "┴".join("─" * w for w in widths) + "┘"))
    print("\n".join(lines), end="\n\n")


def visualize_array_sharding(arr, **kwargs):
    """Print how the array ``arr`` is laid out over its devices (see ``visualize_sharding``)."""
    if isinstance(arr, Tracer):
        raise TypeError("visualize_array_sharding: the layout of a traced value is chosen when the "
                        "program compiles; call it on the program's result instead")
    if not hasattr(arr, "sharding"):
        raise TypeError(f"visualize_array_sharding expects a jaxprc Array, got {type(arr).__name__}")
    visualize_sharding(arr.shape, arr.sharding, **kwargs)
