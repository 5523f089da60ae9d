"""The documentation tells the truth: every code block of every page runs and prints what the
page shows, the generated reference pages follow the code they are generated from, and the site
builds with warnings as errors (where Sphinx is installed: the ``docs`` and ``test`` extras)."""
import importlib
import importlib.util
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(Path(__file__).parent))

import doc_blocks  # noqa: E402

PAGES = sorted(p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md", *DOCS.rglob("*.md")]
               if not {"_generated", "api", "_build"} & set(p.relative_to(ROOT).parts)
               and doc_blocks.blocks(p.read_text()))


def test_the_guides_have_code_to_run():
    assert {f"docs/guides/{g}.md" for g in ("getting-started", "custom-derivatives", "writing-a-primitive",
                                            "writing-a-pass", "many-devices", "performance")} <= set(PAGES)


# pages whose blocks need a tool beyond Python -> that tool
NEEDS = {"docs/guides/foreign-functions.md": "g++"}


@pytest.mark.parametrize("page", PAGES)
def test_page_code_blocks_print_what_the_page_shows(page):
    """Each page in a process of its own, from the repository root, its blocks in order."""
    if page in NEEDS and shutil.which(NEEDS[page]) is None:
        pytest.skip(f"{page} builds a C++ handler: no {NEEDS[page]} on this machine")
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "doc_blocks.py"), "run", page], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    outputs = json.loads(run.stdout.rstrip().rsplit("\n", 1)[-1])
    blocks = doc_blocks.blocks((ROOT / page).read_text())
    assert len(outputs) == len(blocks)
    for block, output in zip(blocks, outputs):
        shown = doc_blocks.normalize(block.expected or "")
        assert _same_text(doc_blocks.normalize(output), shown), (
            f"{page}, the block at line {block.line} printed something else than the page shows "
            f"(python tests/doc_blocks.py update {page} rewrites it):\n{output}")


_NUMBER = re.compile(r"-?\d+\.\d*(?:e[+-]?\d+)?")


def _same_text(printed: str, shown: str) -> bool:
    """Equal text, except that decimal numbers may differ in their last digits (another CPU's
    XLA may vectorize a transcendental function differently)."""
    if _NUMBER.split(printed) != _NUMBER.split(shown):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=1e-5, abs_tol=1e-7)
               for a, b in zip(_NUMBER.findall(printed), _NUMBER.findall(shown)))


def test_same_text_tolerates_last_digits_only():
    assert _same_text("[0.6043678  0.1]", "[0.6043679  0.1]")
    assert not _same_text("[0.6043678  0.1]", "[0.6053678  0.1]")
    assert not _same_text("f32[3] 1.0", "f32[4] 1.0") and not _same_text("a 1.", "b 1.")


def test_grammar_page_is_the_parser_grammar():
    import grammar_page
    page, text = grammar_page.grammar_markdown(), grammar_page.grammar_text()
    assert text.rstrip() in page
    assert text == (ROOT / "ir" / "grammar.lark").read_text()
    for rule in ("closed_jaxpr", "definition", "eqn", "effects", "param", "value", "consts"):
        assert f"`{rule}`" in page


def test_family_pages_follow_the_registries():
    """A page per family: each primitive in its family's page, with its schema and a column per rule
    (the schema and the rule tables change the page), and every page in the site's tree."""
    import params_page
    from jaxprc.interpreters import ad
    from jaxprc.ir import PRIMITIVES, Primitive
    from jaxprc.ir.params import Int, Tuple
    pages = params_page.family_pages()
    for fam, prims in params_page.families().items():
        assert all(f"| `{p.name}` |" in pages[fam] for p in prims)
    assert sum(page.count("\n| `") for page in pages.values()) == len(PRIMITIVES)
    reduce_sum = PRIMITIVES["reduce_sum"]
    assert f"`axes`: {reduce_sum.param_schema['axes']}" in pages["jaxprc.lax.reductions"]
    sin_row = next(line for line in pages["jaxprc.lax.elementwise"].splitlines() if line.startswith("| `sin` |"))
    assert sin_row.endswith("| ✓ |  | ✓ | ✓ |  |  | ✓ |")              # jvp, vmap, jet, lowering
    probe = Primitive("docs_probe_primitive")          # a schema or a rule changes the page
    try:
        probe.def_params(width=Int(min=1))
        page = params_page.family_pages()["user primitives"]
        row = lambda page: next(line for line in page.splitlines() if "`docs_probe_primitive`" in line)
        assert "`width`: an integer >= 1" in row(page) and row(page).count("✓") == 0
        probe.def_params(width=Tuple(Int(min=0), length=2))
        ad.primitive_transposes[probe] = lambda *args, **params: args
        changed = params_page.family_pages()["user primitives"]
        assert "`width`: a tuple of 2 items, each an integer >= 0" in row(changed)
        assert "`width`: an integer >= 1" not in changed and row(changed).count("✓") == 1
        assert params_page.page_name("user primitives") == "user-primitives"
    finally:
        del PRIMITIVES["docs_probe_primitive"]
        ad.primitive_transposes.pop(probe, None)
    assert "families/*" in (DOCS / "reference" / "primitives.md").read_text()


def test_verifier_examples_fail_as_shown():
    """Each bad program still fails, in text and built in Python (the page generator raises if one
    passes), and each check of the verifier has its section."""
    import verifier_page
    page = verifier_page.verifier_markdown()
    for check in verifier_page.CHECKS:
        assert f"## {check.title}" in page
        assert verifier_page.verify_error(check).startswith("JaxprTypeError: ")
    for phrase in ("is bound twice", "is used before it is bound", "is not bound in the jaxpr",
                   "declared output types", "typing rule failed", "got unexpected param", "lacks param",
                   "is not an integer", "does not have its declared type", "its value has type"):
        assert phrase in page, phrase


def test_command_line_page_runs_every_command():
    import cli_page
    from jaxprc.tools import cli
    parser = cli.build_parser()
    commands = set(next(a for a in parser._actions if a.dest == "command").choices)
    shown = {line.split()[1] for _, line in cli_page.SESSION if not line.split()[1].startswith("-")}
    assert shown == commands
    rc, text = cli_page.run_cli(["check", str(ROOT / "examples" / "clipped_norm.jaxpr")])
    assert rc == 0 and text


def test_differences_page_lists_every_table_entry():
    import differences_page
    tables = differences_page.load_tables(ROOT / differences_page.API_COVERAGE, ["OWNED", "NOT_APPLICABLE"])
    sweep = differences_page.load_tables(ROOT / differences_page.EDGE_SWEEP, ["KNOWN_DIFFERENCES"])
    page = differences_page.differences_markdown(ROOT)
    assert page.count("\n| `") == len(sweep["KNOWN_DIFFERENCES"]) + sum(
        len(set(names.values())) for table in tables.values() for names in table.values())
    for table in tables.values():
        for names in table.values():
            assert all(f"`{name}`" in page for name in names)


def _enforced_modules():
    """The jaxprc modules ``tests_oracle/test_api_coverage.py`` compares with JAX's (its literal
    entries; the scipy.stats distributions are added there by a loop)."""
    import ast
    tree = ast.parse((ROOT / "tests_oracle" / "test_api_coverage.py").read_text())
    node = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "ENFORCED")
    return {v.value for v in node.values if isinstance(v, ast.Constant)}


def test_api_reference_has_every_public_module_and_name():
    import api_pages
    modules = api_pages.public_modules()
    assert _enforced_modules() <= set(modules)
    assert {f"jaxprc.scipy.stats.{n}" for n in ("norm", "gamma", "t")} <= set(modules)
    for module_name in modules:
        page = api_pages.module_page(module_name)
        for name in api_pages.public_names(importlib.import_module(module_name)):
            assert f"{module_name}.{name}" in page, (module_name, name)
    assert ".. autofunction:: jaxprc.lax.scan" in api_pages.module_page("jaxprc.lax")


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_parser") is None
                    or importlib.util.find_spec("furo") is None,
                    reason="the docs extra (sphinx, myst-parser, furo) is not installed")
def test_site_builds_without_warnings(tmp_path):
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                            str(DOCS), str(tmp_path / "html")], cwd=ROOT, capture_output=True, text=True,
                           timeout=900)
    assert build.returncode == 0, build.stderr[-6000:]
    for page in ("index", "reference/ir-language", "reference/verifier", "api/jaxprc.lax",
                 "reference/families/jaxprc.lax.elementwise",
                 "guides/differences-from-jax"):
        assert (tmp_path / "html" / f"{page}.html").exists(), page


def test_benchmark_chart_draws_every_row_of_the_table(tmp_path):
    import bench_chart
    guide = DOCS / "guides" / "performance.md"
    rows = bench_chart.ratios(guide.read_text())
    assert len(rows) >= 20 and "tracing: make_jaxpr(chain)" in dict(rows)
    bench_chart.write_chart(guide, tmp_path / "chart.svg")
    svg = (tmp_path / "chart.svg").read_text()
    assert svg.count("<rect") == len(rows) and "make_jaxpr(grad(chain))" in svg


def test_readme_is_a_front_door():
    """Under 120 lines, the two commands first, and what grew out of it is a page it links."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 120
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert readme.startswith("# jaxprc\n\n```bash\n") and len(first_block) == 2
    assert first_block[0].endswith("jaxprc demo") and "pytest" in first_block[1]
    for page in ("docs/guides/shape-polymorphism.md", "docs/guides/jax-libraries.md"):
        assert f"]({page})" in readme and (ROOT / page).exists()
        assert page.removeprefix("docs/").removesuffix(".md") in (DOCS / "index.md").read_text()


def test_architecture_picture_names_files_that_exist():
    """The picture on the architecture page names the file of each step: the files are there."""
    page = (DOCS / "architecture.md").read_text()
    picture = page.split("## The picture", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    paths = re.findall(r"\b(?:compiler|ir|passes|runtime)/[\w/]*(?:\.py|/)", picture)
    assert len(paths) >= 10
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, missing
