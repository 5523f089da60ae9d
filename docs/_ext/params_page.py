"""The primitive family pages: a page per family module, listing every registered primitive it
defines with its param schema (the verifier's ``param_schema``, as its checkers describe
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


RULES = ("jvp", "transpose", "vmap", "jet", "partial eval", "dce", "lowering")


def rules_of(prim) -> list[str]:
    """The names in ``RULES`` of the passes that have a rule for ``prim``."""
    from jaxprc.interpreters import ad, batching, mlir, partial_eval as pe
    from jaxprc.passes import jet
    present = (prim in ad.primitive_jvps, prim in ad.primitive_transposes, prim in batching.primitive_batchers,
               prim in jet.jet_rules, prim in pe.partial_eval_jaxpr_custom_rules, prim in pe.dce_rules,
               mlir.has_lowering(prim))
    return [name for name, has in zip(RULES, present) if has]


def schema_lines(prim) -> list[str]:
    schema = prim.param_schema
    if schema is None:
        return ["params: not declared (left to the typing rule)"]
    if not schema:
        return ["params: none"]
    return [f"`{name}`: {_escape(str(checker))}" for name, checker in schema.items()]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def page_name(family: str) -> str:
    """The family's page, a file name: ``jaxprc.lax.elementwise``, ``user-primitives``."""
    return re.sub(r"[^\w.]+", "-", family)


def _summary(family: str) -> str:
    """The first paragraph of the family module's docstring (none for user primitives)."""
    module = sys.modules.get(family)
    doc = inspect.cleandoc(module.__doc__ or "") if module else ""
    return _escape(doc.split("\n\n", 1)[0].replace("\n", " "))


def family_pages() -> dict[str, str]:
    """family -> its page: the module's summary, then a row per primitive: results, params, and a
    column per pass of ``RULES`` (a check where it has a rule for the primitive)."""
    pages = {}
    for fam, prims in families().items():
        out = [f"# `{fam}`", "", _summary(fam), "",
               f"{len(prims)} primitive{'s' if len(prims) != 1 else ''}. A pass without a rule applies its "
               "default (see [writing a primitive](../../guides/writing-a-primitive.md)).", "",
               "| primitive | results | params (schema) | " + " | ".join(RULES) + " |",
               "|---|---|---|" + "---|" * len(RULES)]
        for p in prims:
            has = set(rules_of(p))
            out.append(f"| `{p.name}` | {'several' if p.multiple_results else 'one'} | "
                       f"{'<br>'.join(schema_lines(p))} | " + " | ".join("✓" if r in has else "" for r in RULES) + " |")
        pages[fam] = "\n".join(out) + "\n"
    return pages
