"""The grammar page: the lark grammar the parser runs, and the terminals lark builds from it.

Read from the installed ``jaxprc.ir`` package at build time, so the page is the grammar."""
from __future__ import annotations

import importlib.resources

import lark


def grammar_text() -> str:
    return importlib.resources.files("jaxprc.ir").joinpath("grammar.lark").read_text()


def grammar_markdown() -> str:
    text = grammar_text()
    parser = lark.Lark(text, parser="lalr")
    terminals = [f"{t.name:<12} priority {t.priority}   /{_escape(t.pattern.value)}/"
                 for t in sorted(parser.terminals, key=lambda t: t.name)
                 if not t.name.startswith("__")]       # lark's names for anonymous "..." tokens
    rules = sorted({r.origin.name for r in parser.rules if not r.origin.name.startswith("_")})
    return "\n".join([
        "```{code-block} text",
        ":caption: ir/grammar.lark",
        "",
        text.rstrip(),
        "```",
        "",
        f"The grammar has {len(rules)} rules ({', '.join(f'`{r}`' for r in rules)}) and these "
        "terminals, as lark compiles them (where two match at one place, the higher priority wins):",
        "",
        "```text",
        *terminals,
        "```",
        "",
    ])


def _escape(pattern: str) -> str:
    return pattern.replace("\n", "\\n").replace("\t", "\\t")
