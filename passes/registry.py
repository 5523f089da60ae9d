"""Passes by name, pipelines of passes, and a hook to observe the IR after each pass.

A pass is ``fn(closed_jaxpr, **options) -> closed_jaxpr``. A pipeline is a
comma-separated list of pass names, each optionally followed by
``:key=value`` options (values are Python literals, else strings), e.g.
``"jvp,dce"`` or ``"vmap:axis_size=4:in_axes=(0,None),dce"``.
"""
from __future__ import annotations

import ast
from typing import Callable, Sequence

from jaxprc.ir.core import ClosedJaxpr, Jaxpr

PASSES: dict[str, Callable[..., ClosedJaxpr]] = {}


def register_pass(name: str, fn: Callable[..., ClosedJaxpr]) -> Callable[..., ClosedJaxpr]:
    PASSES[name] = fn
    return fn


def get_pass(name: str) -> Callable[..., ClosedJaxpr]:
    try:
        return PASSES[name]
    except KeyError:
        raise KeyError(f"Unknown pass '{name}'; registered passes: {', '.join(sorted(PASSES))}") from None


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets, so option values may hold tuples."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _option_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_pipeline(spec: str | Sequence) -> list[tuple[str, dict]]:
    """``"a,b:k=1"`` or ``["a", ("b", {"k": 1})]`` -> ``[("a", {}), ("b", {"k": 1})]``."""
    items = _split_top_level(spec, ",") if isinstance(spec, str) else list(spec)
    steps = []
    for item in items:
        if isinstance(item, tuple):
            steps.append((item[0], dict(item[1])))
            continue
        name, *opts = _split_top_level(item, ":")
        options = {}
        for opt in opts:
            key, eq, value = opt.partition("=")
            if not eq:
                raise ValueError(f"Pass option '{opt}' of pass '{name}' in pipeline '{spec}' "
                                 "must be written key=value")
            options[key.strip()] = _option_value(value.strip())
        get_pass(name)
        steps.append((name, options))
    return steps


def run_pipeline(cj: ClosedJaxpr, spec: str | Sequence,
                 observe: Callable[[str, ClosedJaxpr], None] | None = None) -> ClosedJaxpr:
    """Run the passes of ``spec`` in order; ``observe(name, jaxpr)`` sees the IR after each."""
    for name, options in parse_pipeline(spec):
        cj = get_pass(name)(cj, **options)
        if observe is not None:
            observe(name, cj)
    return cj


# ----------------------------------------------------------- sub-jaxprs

def map_subjaxprs(params: dict, fn: Callable[[ClosedJaxpr], ClosedJaxpr]) -> dict:
    """``params`` with every ClosedJaxpr (also inside tuples) replaced by ``fn(it)``.

    Passes that rewrite programs wholesale (cse, inline) recurse into the
    bodies of control flow and calls with this; thunks are left unforced.
    ``params`` itself comes back when it holds no jaxpr.
    """
    if not any(isinstance(v, (ClosedJaxpr, Jaxpr, tuple)) for v in params.values()):
        return params

    def visit(v):
        if isinstance(v, ClosedJaxpr):
            return fn(v)
        if isinstance(v, Jaxpr):
            return fn(ClosedJaxpr(v, [None] * len(v.constvars))).jaxpr
        if isinstance(v, tuple) and any(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
            return tuple(visit(x) for x in v)
        return v
    new = {k: visit(v) for k, v in params.items()}
    return params if all(new[k] is v for k, v in params.items()) else new
