"""The Sphinx extension that writes the generated pages before Sphinx reads the sources.

``generate(docs_dir)`` writes ``docs/_generated/`` (fragments the hand-written pages
``{include}``: grammar, verifier errors, command-line session, differences from JAX; and the
benchmark chart), ``docs/reference/families/*.md`` (a page per primitive family) and
``docs/api/*.md`` (the API reference). The three folders are build outputs (ignored by git)."""
from __future__ import annotations

import importlib
import inspect
import shutil
from pathlib import Path

import api_pages
import bench_chart
import cli_page
import differences_page
import grammar_page
import params_page
import verifier_page


def _jax_names():
    """``has(name)`` for JAX's public names when jax is installed (the test extra has it), else None."""
    try:
        importlib.import_module("jax")
    except ImportError:
        return None

    def has(full_name: str) -> bool:
        module, _, name = full_name.rpartition(".")
        try:
            return hasattr(importlib.import_module(module), name)
        except ImportError:
            return False
    return has


def generate(docs_dir: Path) -> None:
    repo_root = docs_dir.parent
    fragments, api, families = docs_dir / "_generated", docs_dir / "api", docs_dir / "reference" / "families"
    for folder in (fragments, api, families):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    pages = {
        "grammar.md": grammar_page.grammar_markdown(),
        "verifier.md": verifier_page.verifier_markdown(),
        "cli.md": cli_page.cli_markdown(repo_root, fragments / "images"),
        "differences.md": differences_page.differences_markdown(repo_root),
    }
    for name, text in pages.items():
        (fragments / name).write_text(text)
    for family, text in params_page.family_pages().items():
        (families / f"{params_page.page_name(family)}.md").write_text(text)
    bench_chart.write_chart(docs_dir / "guides" / "performance.md", fragments / "images" / "benchmarks.svg")
    modules = api_pages.public_modules()
    jax_has, first_names = _jax_names(), {}
    for module in modules:
        (api / f"{module}.md").write_text(api_pages.module_page(module, jax_has, first_names))
    (api / "index.md").write_text(api_pages.index_page(modules))


def _on_builder_inited(app) -> None:
    generate(Path(app.srcdir))


def _drop_type_docstring(app, what, name, obj, options, lines) -> None:
    """A module constant (``jaxprc.numpy.pi``, a rule table) has no docstring of its own: autodoc
    would show its type's (``dict``'s, ``float``'s), which says nothing about it."""
    type_doc = getattr(type(obj), "__doc__", None)
    if what in ("data", "attribute") and isinstance(type_doc, str) and \
            "\n".join(lines).strip() == inspect.cleandoc(type_doc).strip():
        lines.clear()


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    app.connect("autodoc-process-docstring", _drop_type_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
