"""Product tests: the `jax` package must never enter these processes.

Every pass pipeline verifies the program after each pass while the tests run (in this process
and in the subprocesses it starts, which inherit the environment variable).
"""
import json
import os
import secrets
import subprocess
import sys

import pytest

os.environ["JAXPRC_VERIFY_PASSES"] = "1"


@pytest.fixture(autouse=True)
def _verify_passes():
    """Verification after each pass, on for every test (a test may switch it off inside)."""
    from jaxprc.ir.dtypes import config
    config.update("jaxprc_verify_passes", True)
    yield
    config.update("jaxprc_verify_passes", True)


@pytest.fixture(autouse=True)
def _no_jax_in_product_process():
    yield
    assert "jax" not in sys.modules, "the jax package was imported in a product test process"


@pytest.fixture(scope="session")
def builtins():
    """The primitives a fresh ``import jaxprc`` registers (asked of a subprocess: tests register
    primitives of their own in the same open registry)."""
    from jaxprc.ir import PRIMITIVES
    names = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, jaxprc; print(json.dumps(sorted(jaxprc.ir.PRIMITIVES)))"],
        check=True, capture_output=True, text=True).stdout)
    assert len(names) > 100
    return [PRIMITIVES[n] for n in names]


# the fuzz tests draw their cases from one seed per run: a new one unless replaying a run
os.environ.setdefault("JAXPRC_FUZZ_SEED", str(secrets.randbits(32)))


def pytest_report_header(config):
    return [f"fuzz run seed: JAXPRC_FUZZ_SEED={os.environ['JAXPRC_FUZZ_SEED']}"]


SLOW_TESTS = os.path.join(os.path.dirname(__file__), "slow_tests.txt")


def pytest_collection_modifyitems(config, items):
    """Marks `slow` the test functions slow_tests.txt lists, so `-m "not slow"` is the fast tier."""
    with open(SLOW_TESTS) as f:
        slow = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)
