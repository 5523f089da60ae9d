"""The dataflow picture of a program: Graphviz DOT, or an SVG laid out here.

Both writers walk the same graph: one node per input, constant and equation,
one ``out`` node per jaxpr, an edge per use of a value (labelled with the
value's name and type, the names being those the text printer gives, so the
picture and the text can be read side by side). Sub-jaxprs in params (cond
branches, loop bodies, custom rules' functions) are drawn as nested clusters
beside the equation that holds them.

The SVG layout is deliberately simple: the rows of a jaxpr are the dataflow
depths of its nodes, a node holding sub-jaxprs is a box around their
layouts, edges are straight lines. Use DOT and Graphviz for large programs.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, Literal
from jaxprc.ir.printer import Namer, format_scalar, is_definition

MAX_PARAM_TEXT = 40


# ----------------------------------------------------------------- graph

@dataclass
class Node:
    label: str
    kind: str                       # "in", "const", "eqn", "literal", "out"
    subgraphs: list = field(default_factory=list)   # [(title, Graph)] for eqns holding jaxprs


@dataclass
class Graph:
    nodes: list                     # [Node]
    edges: list                     # [(src index, dst index, label)]


def _subjaxprs(key, value):
    """(title, ClosedJaxpr) for each jaxpr in a param value (also inside tuples)."""
    if isinstance(value, ClosedJaxpr):
        return [(key, value)]
    if isinstance(value, Jaxpr):
        return [(key, ClosedJaxpr(value, [None] * len(value.constvars)))]
    if isinstance(value, tuple):
        return [sub for i, v in enumerate(value) for sub in _subjaxprs(f"{key}[{i}]", v)]
    return []


def _param_text(key, value) -> str | None:
    if _subjaxprs(key, value):
        return None
    if is_definition(value):       # a custom rule: named as in the text form
        shown = "@" + str(getattr(value, "name", None) or getattr(value, "__name__", "rule"))
    else:
        shown = dt.short_name(value) if isinstance(value, np.dtype) else value
    text = f"{key}={shown}"
    return text if len(text) <= MAX_PARAM_TEXT else text[:MAX_PARAM_TEXT - 3] + "..."


def build_graph(cj: ClosedJaxpr, namer: Namer | None = None) -> Graph:
    """The dataflow graph of ``cj``; names follow the printer's (binding order, shared counter)."""
    namer = namer if namer is not None else Namer()
    jaxpr = cj.jaxpr
    nodes, edges, producer = [], [], {}

    def add(node) -> int:
        nodes.append(node)
        return len(nodes) - 1

    def use(atom, dst: int):
        if isinstance(atom, Literal):
            src = add(Node(f"{format_scalar(atom.val, atom.aval.dtype)}", "literal"))
            edges.append((src, dst, atom.aval.str_short()))
        else:
            edges.append((producer[atom], dst, f"{namer.ref(atom)}:{atom.aval.str_short()}"))

    for kind, vars_ in (("const", jaxpr.constvars), ("in", jaxpr.invars)):
        for v in vars_:
            producer[v] = add(Node(f"{namer.bind(v)}:{v.aval.str_short()}", kind))
    for eqn in jaxpr.eqns:
        params = [t for k in sorted(eqn.params) if (t := _param_text(k, eqn.params[k])) is not None]
        node = Node("\n".join([eqn.primitive.name, *params]), "eqn")
        dst = add(node)
        for a in eqn.invars:
            use(a, dst)
        for v in eqn.outvars:
            namer.bind(v)
            producer[v] = dst
        for key in sorted(eqn.params):
            for title, sub in _subjaxprs(key, eqn.params[key]):
                inner = namer.scope()
                node.subgraphs.append((title, build_graph(sub, inner)))
                namer.count = inner.count
    out = add(Node("out", "out"))
    for a in jaxpr.outvars:
        use(a, out)
    return Graph(nodes, edges)


# ------------------------------------------------------------------- DOT

_DOT_SHAPES = {"in": "ellipse", "const": "note", "eqn": "box", "literal": "plaintext", "out": "house"}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(cj: ClosedJaxpr) -> str:
    """Graphviz DOT text; sub-jaxprs are ``cluster`` subgraphs linked to their equation."""
    lines = ["digraph jaxpr {", "  compound=true;",
             '  node [fontname="monospace", fontsize=10];', '  edge [fontname="monospace", fontsize=8];']
    counter = [0]

    def emit(graph: Graph, indent: str) -> list[str]:
        ids = []
        for node in graph.nodes:
            ids.append(f"n{counter[0]}")
            counter[0] += 1
            lines.append(f"{indent}{ids[-1]} [shape={_DOT_SHAPES[node.kind]}, label={_dot_quote(node.label)}];")
        for src, dst, label in graph.edges:
            lines.append(f"{indent}{ids[src]} -> {ids[dst]} [label={_dot_quote(label)}];")
        for node, node_id in zip(graph.nodes, ids):
            for title, sub in node.subgraphs:
                cluster = f"cluster{counter[0]}"
                lines.append(f"{indent}subgraph {cluster} {{")
                lines.append(f"{indent}  label={_dot_quote(title)}; style=dashed;")
                sub_ids = emit(sub, indent + "  ")
                lines.append(f"{indent}}}")
                lines.append(f"{indent}{node_id} -> {sub_ids[0]} [lhead={cluster}, style=dashed, "
                             "arrowhead=odot];")
        return ids

    emit(build_graph(cj), "  ")
    lines.append("}")
    return "\n".join(lines)


# ------------------------------------------------------------------- SVG

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7, 14, 8, 18, 34
_FILL = {"in": "#e3f2fd", "const": "#f3e5f5", "eqn": "#fffde7", "literal": "#ffffff", "out": "#e8f5e9"}


@dataclass
class Box:
    """A laid-out node or jaxpr: size, and its drawing relative to its top-left corner."""
    w: float
    h: float
    draw: callable          # (x, y, out: list[str]) -> None


def _text_lines(x, y, lines, size=11, anchor="middle") -> str:
    spans = "".join(f'<tspan x="{x:.0f}" dy="{0 if i == 0 else LINE_H}">{html.escape(t)}</tspan>'
                    for i, t in enumerate(lines))
    return (f'<text x="{x:.0f}" y="{y:.0f}" font-family="monospace" font-size="{size}" '
            f'text-anchor="{anchor}">{spans}</text>')


def _node_box(node: Node) -> Box:
    lines = node.label.split("\n")
    text_w = max(len(t) for t in lines) * CHAR_W + 2 * PAD
    text_h = len(lines) * LINE_H + PAD
    subs = [(title, _graph_box(g)) for title, g in node.subgraphs]
    subs_w = sum(b.w for _, b in subs) + GAP_X * max(len(subs) - 1, 0)
    w = max(text_w, subs_w + 2 * PAD)
    h = text_h + (max(b.h for _, b in subs) + LINE_H + PAD if subs else 0)

    def draw(x, y, out):
        rx = 12 if node.kind in ("in", "out") else 3
        stroke = "none" if node.kind == "literal" else "#555"
        out.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="{rx}" '
                   f'fill="{_FILL[node.kind]}" stroke="{stroke}"/>')
        out.append(_text_lines(x + w / 2, y + LINE_H, lines))
        sx = x + (w - subs_w) / 2
        for title, box in subs:
            out.append(_text_lines(sx + 2, y + text_h + LINE_H - 2, [title], size=9, anchor="start"))
            box.draw(sx, y + text_h + LINE_H, out)
            sx += box.w + GAP_X
    return Box(w, h, draw)


def _graph_box(graph: Graph) -> Box:
    """Rows by dataflow depth, nodes left to right, each row centred."""
    depth = [0] * len(graph.nodes)
    incoming: dict[int, list[int]] = {}
    for src, dst, _ in graph.edges:
        incoming.setdefault(dst, []).append(src)
    for i, node in enumerate(graph.nodes):     # nodes are in dataflow order, except literals
        if node.kind in ("eqn", "out"):
            preds = [depth[s] for s in incoming.get(i, []) if graph.nodes[s].kind != "literal"]
            depth[i] = 1 + max(preds, default=0)
    for src, dst, _ in graph.edges:             # a literal sits in the row above its user
        if graph.nodes[src].kind == "literal":
            depth[src] = depth[dst] - 1
    boxes = [_node_box(n) for n in graph.nodes]
    rows: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        rows.setdefault(d, []).append(i)
    row_keys = sorted(rows)
    row_w = {r: sum(boxes[i].w for i in rows[r]) + GAP_X * (len(rows[r]) - 1) for r in row_keys}
    row_h = {r: max(boxes[i].h for i in rows[r]) for r in row_keys}
    w = max(row_w.values()) + 2 * PAD
    h = sum(row_h.values()) + GAP_Y * (len(row_keys) - 1) + 2 * PAD
    pos, y = {}, PAD
    for r in row_keys:
        x = (w - row_w[r]) / 2
        for i in rows[r]:
            pos[i] = (x, y)
            x += boxes[i].w + GAP_X
        y += row_h[r] + GAP_Y

    def draw(x0, y0, out):
        out.append(f'<rect x="{x0:.0f}" y="{y0:.0f}" width="{w:.0f}" height="{h:.0f}" fill="none" '
                   'stroke="#999" stroke-dasharray="4 3"/>')
        for src, dst, label in graph.edges:
            (sx, sy), (dx, dy) = pos[src], pos[dst]
            x1, y1 = x0 + sx + boxes[src].w / 2, y0 + sy + boxes[src].h
            x2, y2 = x0 + dx + boxes[dst].w / 2, y0 + dy
            out.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                       'stroke="#333" marker-end="url(#arrow)"/>')
            out.append(f'<text x="{(x1 + x2) / 2 + 3:.0f}" y="{(y1 + y2) / 2:.0f}" font-family="monospace" '
                       f'font-size="9" fill="#666">{html.escape(label)}</text>')
        for i, box in enumerate(boxes):
            box.draw(x0 + pos[i][0], y0 + pos[i][1], out)
    return Box(w, h, draw)


def to_svg(cj: ClosedJaxpr) -> str:
    """A standalone SVG picture of the program."""
    box = _graph_box(build_graph(cj))
    body: list[str] = []
    box.draw(PAD, PAD, body)
    w, h = box.w + 2 * PAD, box.h + 2 * PAD
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
        f'viewBox="0 0 {w:.0f} {h:.0f}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>',
        *body, "</svg>"])
