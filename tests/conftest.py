"""Product tests: the `jax` package must never enter these processes (DESIGN.md, Testing)."""
import sys

import pytest


@pytest.fixture(autouse=True)
def _no_jax_in_product_process():
    yield
    assert "jax" not in sys.modules, "the jax package was imported in a product test process"
