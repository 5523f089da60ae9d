"""JAX's primitives tutorial (the seed, docs: jax-primitives.md) with its own JAX import lines,
run with ``jax`` read as ``jaxprc`` (``python -m jaxprc.compat``).

examples/multiply_add.py is the tutorial with only its import lines changed to jaxprc's; the test
puts the tutorial's lines back and checks that under compat the program runs through (its
asserts hold) and prints exactly what the jaxprc version prints. (Real JAX 0.10.2 cannot run the
tutorial as written: ``jax.core.Primitive`` is gone from it.)
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "multiply_add.py"

# jaxprc's import line in the example -> the tutorial's
SEED_IMPORTS = {
    "from jaxprc import lax": "from jax import lax",
    "import jaxprc as api": "from jax._src import api",
    "import jaxprc.numpy as jnp": "import jax.numpy as jnp",
    "from jaxprc import core": "from jax import core",
    "from jaxlib.mlir.dialects import stablehlo as hlo": "from jax._src.lib.mlir.dialects import hlo",
    "from jaxprc.interpreters import mlir": "from jax.interpreters import mlir",
    "from jaxprc.interpreters import ad": "from jax.interpreters import ad",
    "from jaxprc.interpreters import batching": "from jax.interpreters import batching",
}


def _run(args):
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return re.sub(r"0x[0-9a-f]+", "0x?", proc.stdout)     # object addresses differ run to run


def test_seed_runs_with_jax_read_as_jaxprc(tmp_path):
    lines = EXAMPLE.read_text().splitlines()
    replaced = [SEED_IMPORTS.get(line, line) for line in lines]
    assert sum(a != b for a, b in zip(lines, replaced)) >= len(SEED_IMPORTS)   # every line found
    assert not [line for line in replaced if line.startswith(("import jaxprc", "from jaxprc"))]
    seed = tmp_path / "jax_primitives_seed.py"
    seed.write_text("\n".join(replaced) + "\n")
    under_compat = _run(["-m", "jaxprc.compat", str(seed)])
    assert under_compat == _run([str(EXAMPLE)])
    assert "grad(square_add_lax) =  4.0" in under_compat and "multiply_add_lowering" in under_compat
