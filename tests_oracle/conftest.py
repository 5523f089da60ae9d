"""Oracle tests: compare jaxprc against the jax package. They run in a pytest process of their own.

Both libraries keep the x64 switch in process-global state, so every test starts with both in the
same mode: x64 off, or on for tests marked ``x64``. A module that flipped the flag at import time
would leak it into every module collected after it.
"""
import os

import jax
import pytest

os.environ["JAXPRC_VERIFY_PASSES"] = "1"     # every pass pipeline verifies its result in tests

import jaxprc  # noqa: E402

jaxprc.config.update("jaxprc_verify_passes", True)


def pytest_configure(config):
    config.addinivalue_line("markers", "x64: run with jax_enable_x64 on in both jax and jaxprc")


@pytest.fixture(autouse=True)
def _same_x64_mode(request):
    enabled = request.node.get_closest_marker("x64") is not None
    for lib in (jax, jaxprc):
        lib.config.update("jax_enable_x64", enabled)
    yield
    for lib in (jax, jaxprc):
        lib.config.update("jax_enable_x64", False)
