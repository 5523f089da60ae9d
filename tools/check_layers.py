#!/usr/bin/env python3
"""Check that imports between the project's layers, and between the sub-layers of ``compiler/``, flow
one way (docs/architecture.md draws them).

Usage: ``python tools/check_layers.py [PROJECT_ROOT]`` (default: the current directory), or
``python -m jaxprc.tools.check_layers ROOT``. Prints one line per violation and exits 1 if there is
any (or if ROOT is not the project: a folder missing or holding no Python file), else prints a
summary and exits 0. tests/test_layers.py runs it on every test run.

The layers, by folder: ``ir`` imports nothing of jaxprc; ``passes`` only ``ir``; ``runtime``
nothing; ``compiler`` (the ``jaxprc`` package) all three; ``tools`` everything. No folder imports
the ``jax`` package.

The sub-layers of ``compiler/``, by module (the first name under ``jaxprc``):

- ``lax`` (the primitive families) imports neither the API modules (``numpy``, ``scipy``, ``nn``,
  ``random``, ``api``, ... and the package root) nor the transformations' front ends;
- the engine (lowering, dispatch, evaluation, segmenting, SPMD execution, the rule tables of
  ``interpreters``) imports neither the API modules nor the transformations' front ends;
- the transformations' front ends and the API modules import anything below them;
- the modules at the root of ``compiler/`` (the API modules) form no import circle when they load.
"""
from __future__ import annotations

import ast
import pathlib
import sys

# folder -> the jaxprc subpackages it may import (besides itself)
ALLOWED = {
    "ir": set(),
    "passes": {"ir"},
    "runtime": set(),
    "compiler": {"ir", "passes", "runtime", "compiler"},
    "tools": {"ir", "passes", "runtime", "compiler", "tools"},
}
SUBPACKAGE = {"ir": "ir", "passes": "passes", "runtime": "runtime", "tools": "tools"}

# Sub-layers of compiler/ by the module's first name under jaxprc (a package after the restructure,
# a root module before it). Every other name under jaxprc is an API module.
LAX = {"lax"}
ENGINE = {"engine", "interpreters", "lowering", "dispatch", "cpp_dispatch", "evaluate", "segmenting", "spmd",
          "compile_guards", "float_checks", "caches"}
TRANSFORMATIONS = {"transformations", "ad", "vmap", "pmap", "custom_derivatives", "custom_batching",
                   "ad_checkpoint", "nested_tracing"}
# sub-layer -> the sub-layers it may not import
FORBIDDEN = {"lax": {"api", "transformations"}, "engine": {"api", "transformations"}}

# Upward imports between sub-layers not fixed yet (importing module, imported module): reported as
# known, not as violations. An entry that no longer occurs is itself a violation, so the list only
# shrinks. Each needs its shared piece moved down or passed in (issue 30):
KNOWN_UPWARD = {
    # the engine and shard_map run programs through the API's jit (resharding, eager collectives
    # on several devices) and device_put them onto shardings
    ("jaxprc.engine.spmd", "jaxprc.api"),
    ("jaxprc.lax.parallel", "jaxprc.api"),
    # shardings (JAX's public jaxprc.sharding) are defined with the API's device_put and resharding
    ("jaxprc.engine.spmd", "jaxprc.sharding"),
    ("jaxprc.lax.host_local", "jaxprc.sharding"),
    ("jaxprc.lax.parallel", "jaxprc.sharding"),
    ("jaxprc.lax.sharding_constraint", "jaxprc.sharding"),
    # rules written with jaxprc.numpy; lax.dtype is jaxprc.dtypes'
    ("jaxprc.lax.linalg", "jaxprc.numpy"),
    ("jaxprc.lax.support.conveniences", "jaxprc.dtypes"),
}


def layer_of_module(name: str):
    """Map an absolute module name to the folder (layer) that holds it."""
    parts = name.split(".")
    if parts[0] != "jaxprc":
        return None
    if len(parts) > 1 and parts[1] in SUBPACKAGE:
        return parts[1]
    return "compiler"


def sublayer_of_module(name: str) -> str:
    """The sub-layer of a module of the ``jaxprc`` package (layer 'compiler')."""
    first = name.split(".")[1] if "." in name else ""
    for sublayer, names in (("lax", LAX), ("engine", ENGINE), ("transformations", TRANSFORMATIONS)):
        if first in names:
            return sublayer
    return "api"


def imported_modules(tree: ast.AST, module_name: str, is_package: bool):
    """(line, name) for each import; ``from m import n`` yields m.n (n: a module, or a name of m's)."""
    base = module_name.split(".")
    if not is_package:
        base = base[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                yield node.lineno, f"{mod}.{alias.name}"


def _resolve(mod: str, known: set) -> str:
    """``from jaxprc import numpy`` names module jaxprc.numpy; ``from jaxprc.api import jit`` names
    module jaxprc.api: the longest prefix that is a module of the project."""
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return mod


def project_files(root: pathlib.Path):
    """(layer, module name, path) of every Python file of the layers' folders."""
    for layer in ALLOWED:
        folder = root / layer
        prefix = "jaxprc" if layer == "compiler" else f"jaxprc.{layer}"
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield layer, ".".join([prefix] + parts), path


def _load_time_imports(tree: ast.Module) -> ast.Module:
    """The imports a module runs when it loads: all but those inside functions (which run when
    called, after every module has loaded)."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return ast.Module(body=found, type_ignores=[])


def root_module_circles(root: pathlib.Path) -> list[list[str]]:
    """The import circles among the modules at the root of ``compiler/`` (the public API modules):
    each a sorted list of modules that import each other, directly or around, when they load."""
    files = list(project_files(root))
    known = {name for _, name, _ in files}
    roots = {name: path for _, name, path in files
             if path.parent == root / "compiler" and path.name != "__init__.py"}
    graph = {}
    for name, path in roots.items():
        try:
            tree = _load_time_imports(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        except SyntaxError:         # reported by check() with its line
            continue
        graph[name] = {t for _, mod in imported_modules(tree, name, False)
                       if (t := _resolve(mod, known)) in roots and t != name}
    return _circles(graph)


def _circles(graph: dict) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(circles)


def check(root: pathlib.Path, known_upward=KNOWN_UPWARD) -> tuple[list[str], int, int]:
    """The violations under ``root`` (one line each), the number of files read, and the number of
    known upward imports met."""
    missing = [f for f in ALLOWED if not (root / f).is_dir() or not any((root / f).rglob("*.py"))]
    if missing:
        return [f"{root}: not the project's root: no Python files under {', '.join(missing)}/"], 0, 0
    files = list(project_files(root))
    known = {name for _, name, _ in files}
    problems, met = [], set()
    for layer, module_name, path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as e:
            problems.append(f"{path.relative_to(root)}:{e.lineno}: syntax error: {e.msg}")
            continue
        seen = set()
        for lineno, mod in imported_modules(tree, module_name, path.name == "__init__.py"):
            target = _resolve(mod, known)
            problem = _problem(layer, module_name, target)
            if problem and (module_name, target) in known_upward:
                met.add((module_name, target))
            elif problem and (lineno, problem) not in seen:
                seen.add((lineno, problem))
                problems.append(f"{path.relative_to(root)}:{lineno}: {problem}")
    for circle in root_module_circles(root):
        problems.append(f"compiler/: the root modules {', '.join(circle)} import each other when they load "
                        f"(an import circle): move what they share into one of them or below")
    for importer, imported in sorted(set(known_upward) - met):
        problems.append(f"tools/check_layers.py: KNOWN_UPWARD lists {importer} importing {imported}, "
                        f"which no longer happens: remove the entry")
    return problems, len(files), len(met)


def _problem(layer: str, module_name: str, mod: str) -> str | None:
    top = mod.split(".")[0]
    if top == "jax":
        return f"imports '{mod}': the product must not import the jax package (tests may)"
    target = layer_of_module(mod)
    if target is None:
        return None
    if target != layer and target not in ALLOWED[layer]:
        return (f"layer '{layer}' imports '{mod}' from layer '{target}', which it may not "
                f"(allowed: {sorted(ALLOWED[layer]) or 'none'})")
    if layer == target == "compiler" and mod != "jaxprc" or layer == "compiler" and mod == "jaxprc":
        mine, theirs = sublayer_of_module(module_name), sublayer_of_module(mod)
        if theirs in FORBIDDEN.get(mine, ()) and mine != theirs:
            return (f"sub-layer '{mine}' imports '{mod}' from sub-layer '{theirs}', which it may not "
                    f"(it may not import: {sorted(FORBIDDEN[mine])})")
    return None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = pathlib.Path(argv[0] if argv else ".").resolve()
    problems, files, known = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} violation(s) in {files} files")
        return 1
    print(f"layers: ok ({files} files; {known} known upward imports to fix, see KNOWN_UPWARD)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
