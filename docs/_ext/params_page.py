"""The primitives page: every registered primitive, grouped by the family module that defines
it, with its param schema (the verifier's ``param_schema``, as its checkers describe
themselves) and which passes have a rule for it (the ``jaxprc.interpreters`` tables)."""
from __future__ import annotations

import inspect
import re
import sys
from collections import defaultdict


def families() -> dict[str, list]:
    """family module name -> its primitives, sorted by name."""
    import jaxprc  # noqa: F401  -- registers the built-in primitives
    from jaxprc.ir import PRIMITIVES, Primitive
    holders = defaultdict(list)           # primitive -> (module, attribute) holding it
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("jaxprc.") and mod is not None:
            for attr, value in vars(mod).items():
                if isinstance(value, Primitive):
                    holders[value].append((mod_name, attr))
    grouped = defaultdict(list)
    for prim in PRIMITIVES.values():
        grouped[_defining_module(holders[prim])].append(prim)
    return {fam: sorted(prims, key=lambda p: p.name) for fam, prims in sorted(grouped.items())}


def _defining_module(holders) -> str:
    """The module that assigns the primitive to a name of its own (``sin_p = ...``, or one of a
    tuple of names); re-exports import it instead."""
    found = []
    for mod_name, attr in holders:
        try:
            source = inspect.getsource(sys.modules[mod_name])
        except (OSError, TypeError):
            continue
        if re.search(rf"^\s*(\w+\s*,\s*)*{re.escape(attr)}\s*(,\s*\w+\s*)*(:[^=\n]*)?=(?!=)", source, re.M):
            found.append(mod_name)
    if not found:
        return "user primitives" if not holders else min(h[0] for h in holders)
    return max(found, key=lambda m: (m.startswith("jaxprc.lax."), -m.count("checkify")))


def rules_of(prim) -> list[str]:
    from jaxprc.interpreters import ad, batching, jet, mlir, partial_eval as pe
    tables = [("jvp", prim in ad.primitive_jvps), ("transpose", prim in ad.primitive_transposes),
              ("vmap", prim in batching.primitive_batchers), ("jet", prim in jet.jet_rules),
              ("partial eval", prim in pe.partial_eval_jaxpr_custom_rules),
              ("dce", prim in pe.dce_rules), ("lowering", mlir.has_lowering(prim))]
    return [name for name, present in tables if present]


def schema_lines(prim) -> list[str]:
    schema = prim.param_schema
    if schema is None:
        return ["params: not declared (left to the typing rule)"]
    if not schema:
        return ["params: none"]
    return [f"`{name}`: {_escape(str(checker))}" for name, checker in schema.items()]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def primitives_markdown() -> str:
    out = []
    fams = families()
    out.append(f"{sum(map(len, fams.values()))} primitives in {len(fams)} family modules.\n")
    for fam, prims in fams.items():
        out += [f"## `{fam}`", "", "| primitive | results | params (schema) | rules |", "|---|---|---|---|"]
        for p in prims:
            results = "several" if p.multiple_results else "one"
            out.append(f"| `{p.name}` | {results} | {'<br>'.join(schema_lines(p))} | "
                       f"{', '.join(rules_of(p)) or '—'} |")
        out.append("")
    return "\n".join(out)
