"""The benchmark chart: the performance guide's table of jaxprc/JAX ratios drawn as bars (an SVG
written by hand, no plotting library), so the picture always shows the table beside it."""
from __future__ import annotations

import re
from html import escape
from pathlib import Path

_ROW = re.compile(r"^\| (?P<name>[^|]+?) \| [^|]+ \| [^|]+ \| [^|]+ \| (?P<ratio>[0-9.]+) \|", re.M)


def ratios(guide_text: str) -> list[tuple[str, float]]:
    """(benchmark, jaxprc / JAX) for each row of the guide's benchmark table, in its order."""
    table = guide_text[guide_text.index("| benchmark | unit |"):].split("\n\n")[0]
    return [(m.group("name"), float(m.group("ratio"))) for m in _ROW.finditer(table)]


def chart_svg(rows: list[tuple[str, float]], label_width: int = 430, bar_width: int = 300) -> str:
    height, top = 18, 24
    scale = bar_width / max(1.5, max(r for _, r in rows))
    total_height = top + height * len(rows) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_width + bar_width + 60}" '
             f'height="{total_height}" font-family="sans-serif" font-size="11">',
             f'<text x="{label_width}" y="14">jaxprc time / JAX time (lower is better; the line is JAX)</text>']
    for i, (name, ratio) in enumerate(rows):
        y = top + i * height
        colour = "#3b7dd8" if ratio <= 1.0 else "#d8793b"
        parts += [f'<text x="{label_width - 6}" y="{y + 12}" text-anchor="end">{escape(name)}</text>',
                  f'<rect x="{label_width}" y="{y + 2}" width="{ratio * scale:.1f}" height="{height - 5}" '
                  f'fill="{colour}"/>',
                  f'<text x="{label_width + ratio * scale + 4:.1f}" y="{y + 12}">{ratio:.2f}</text>']
    parts += [f'<line x1="{label_width + scale:.1f}" y1="{top - 2}" x2="{label_width + scale:.1f}" '
              f'y2="{total_height - 6}" stroke="black" stroke-dasharray="3,2"/>', "</svg>"]
    return "\n".join(parts) + "\n"


def write_chart(guide: Path, out: Path) -> None:
    rows = ratios(guide.read_text())
    if not rows:
        raise RuntimeError(f"{guide}: no benchmark table rows to draw")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(chart_svg(rows))
