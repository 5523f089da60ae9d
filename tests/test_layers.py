"""The layering check (tools/check_layers.py) passes on the project, and fails where it should."""
import pathlib
import shutil
import subprocess
import sys

import pytest

from jaxprc.tools import check_layers

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_project_keeps_its_layers():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_layers.py"), str(ROOT)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("layers: ok (") and int(proc.stdout.split("(")[1].split()[0]) > 200


def test_a_wrong_root_fails_instead_of_passing_on_zero_files(tmp_path):
    assert check_layers.main([str(tmp_path)]) == 1
    assert check_layers.main([str(ROOT / "compiler")]) == 1


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The project's layers' folders, copied."""
    root = tmp_path_factory.mktemp("project")     # (the checker reads files only: no import)
    for folder in check_layers.ALLOWED:
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


ADDED = [   # (file, an import added to it, what the check must say about it)
    ("compiler/lax/shapes.py", "from jaxprc import numpy", "sub-layer 'lax' imports 'jaxprc.numpy'"),
    ("compiler/lax/slicing.py", "from ..api import jit", "sub-layer 'lax' imports 'jaxprc.api'"),
    ("compiler/lax/sorting.py", "from jaxprc.transformations.ad import grad",
     "sub-layer 'lax' imports 'jaxprc.transformations.ad' from sub-layer 'transformations'"),
    ("compiler/engine/lowering.py", "from jaxprc.numpy import zeros", "sub-layer 'engine' imports 'jaxprc.numpy'"),
    ("compiler/engine/segmenting.py", "import jaxprc", "sub-layer 'engine' imports 'jaxprc' from sub-layer 'api'"),
    ("compiler/engine/evaluate.py", "from jaxprc.transformations.running import evaluate",
     "sub-layer 'engine' imports 'jaxprc.transformations.running' from sub-layer 'transformations'"),
    ("compiler/lax/support/operands.py", "from jaxprc.random import key", "sub-layer 'lax' imports 'jaxprc.random'"),
    ("compiler/lax/control_flow/loops.py", "from jaxprc.transformations.vmap import vmap",
     "sub-layer 'lax' imports 'jaxprc.transformations.vmap'"),
    ("passes/dce.py", "from jaxprc.lax import add_p", "layer 'passes' imports 'jaxprc.lax'"),
    ("ir/core.py", "from jaxprc.passes import dce", "layer 'ir' imports 'jaxprc.passes.dce'"),
    ("runtime/array.py", "import jax.numpy", "the product must not import the jax package"),
]


def test_each_added_upward_import_fails(copy):
    for path, line, _ in ADDED:
        with open(copy / path, "a") as f:
            f.write(f"\n\ndef _added():\n    {line}\n")
    problems, _, _ = check_layers.check(copy)
    assert len(problems) == len(ADDED), problems
    for (path, _, expected), problem in zip(sorted(ADDED), sorted(problems)):
        assert problem.startswith(path + ":") and expected in problem, (problem, expected)


def test_a_known_upward_import_that_is_gone_fails():
    problems, _, _ = check_layers.check(ROOT, check_layers.KNOWN_UPWARD | {("jaxprc.lax.shapes", "jaxprc.numpy")})
    assert problems == ["tools/check_layers.py: KNOWN_UPWARD lists jaxprc.lax.shapes importing jaxprc.numpy, "
                        "which no longer happens: remove the entry"]


def test_no_import_circle_among_the_root_modules():
    assert check_layers.root_module_circles(ROOT) == []


def test_an_import_circle_among_the_root_modules_fails(tmp_path):
    for folder in check_layers.ALLOWED:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    added = {   # image -> tree -> tree_util -> image when they load; image -> typing -> image only
        "image.py": "from . import tree, typing  # noqa: E402",     # later (typing's import is in a function)
        "tree.py": "from .tree_util import register_pytree_node  # noqa: E402",
        "tree_util.py": "if True:\n    from .image import resize  # noqa: E402",
        "typing.py": "def _late():\n    from . import image",
    }
    for name, line in added.items():
        with open(tmp_path / "compiler" / name, "a") as f:
            f.write(f"\n\n{line}\n")
    problems, _, _ = check_layers.check(tmp_path)
    assert problems == ["compiler/: the root modules jaxprc.image, jaxprc.tree, jaxprc.tree_util import each "
                        "other when they load (an import circle): move what they share into one of them or below"]


def _primitives_defined_in(path: pathlib.Path, module_name: str) -> list:
    """The primitives ``path``'s module binds to its own top-level names (not the ones it imports)."""
    import ast
    import importlib

    from jaxprc.ir.core import Primitive
    module = importlib.import_module(module_name)
    assigned = {t.id for node in ast.parse(path.read_text()).body if isinstance(node, ast.Assign)
                for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    return [n for n in sorted(assigned) if isinstance(getattr(module, n, None), Primitive)]


def test_each_module_directly_in_lax_is_a_primitive_family_and_support_holds_none():
    """A module of compiler/lax/ defines primitives (a family); what defines none is in lax/support/."""
    lax_dir = ROOT / "compiler" / "lax"
    families = sorted(p for p in lax_dir.glob("*.py") if p.stem != "__init__")
    assert len(families) > 25
    assert [p.stem for p in families if not _primitives_defined_in(p, f"jaxprc.lax.{p.stem}")] == []
    support = sorted(p for p in (lax_dir / "support").glob("*.py") if p.stem != "__init__")
    assert "operands" in [p.stem for p in support]
    assert {p.stem: _primitives_defined_in(p, f"jaxprc.lax.support.{p.stem}") for p in support} == \
        {p.stem: [] for p in support}
