"""The differences-from-JAX page, read from the tables the oracle tests enforce: the edge sweep's
``KNOWN_DIFFERENCES`` (values, derivatives and dtypes that deliberately differ from JAX's) and the
API coverage test's ``OWNED`` and ``NOT_APPLICABLE`` (JAX names jaxprc leaves out, with the reason).

Those test modules import jax, so the tables are read from their source (the assignments are
evaluated alone, with nothing but ``dict`` in scope) instead of importing them."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

EDGE_SWEEP = "tests_oracle/test_edge_sweep.py"
API_COVERAGE = "tests_oracle/test_api_coverage.py"


def load_tables(path: Path, names: list[str]) -> dict:
    """The values of the module-level assignments to ``names`` (and the constants they use)."""
    module = ast.parse(path.read_text())
    assigned = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            assigned[node.target.id] = node.value
    scope: dict = {"__builtins__": {}, "dict": dict}

    def evaluate(name):
        if name in scope:
            return
        expr = assigned[name]
        for used in {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} - {"dict"}:
            evaluate(used)
        scope[name] = eval(compile(ast.Expression(expr), str(path), "eval"), scope)  # noqa: S307

    for name in names:
        evaluate(name)
    return {name: scope[name] for name in names}


def differences_markdown(repo_root: Path) -> str:
    sweep = load_tables(repo_root / EDGE_SWEEP, ["KNOWN_DIFFERENCES"])["KNOWN_DIFFERENCES"]
    coverage = load_tables(repo_root / API_COVERAGE, ["OWNED", "NOT_APPLICABLE"])
    out = ["## Values, derivatives and dtypes", "",
           f"`{EDGE_SWEEP}` runs every elementwise function of both libraries on the same edge points "
           "(zeros, infinities, NaNs, extremes, empty arrays) in each dtype, with first and second "
           "derivatives and weak types, and fails on any difference not listed here, or on a listed "
           f"one that has gone. {len(sweep)} are listed:", "",
           "| function | check | why |", "|---|---|---|"]
    for (qualname, check), why in sorted(sweep.items()):
        out.append(f"| `{qualname}` | {check} | {_cell(why)} |")
    out += ["", "## JAX names jaxprc leaves out", "",
            f"`{API_COVERAGE}` compares every public name of JAX's modules with jaxprc's and fails on "
            "a name missing without a reason here (or listed here but present).", ""]
    for title, table in (("Not applicable to jaxprc", coverage["NOT_APPLICABLE"]),
                         ("Not there yet (another issue's work)", coverage["OWNED"])):
        out += [f"### {title}", "", "| module | names | why |", "|---|---|---|"]
        for module, names in sorted(table.items()):
            by_reason = defaultdict(list)
            for name, why in names.items():
                by_reason[why].append(name)
            for why, group in by_reason.items():
                out.append(f"| `{module}` | {', '.join(f'`{n}`' for n in sorted(group))} | {_cell(why)} |")
        out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
