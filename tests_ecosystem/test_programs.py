"""Each library's quickstart-style program (tests_ecosystem/programs/) on jaxprc and on JAX.

A program prints its results as one JSON object on its last line. It runs twice, each time in its
own process: with ``jax`` read as ``jaxprc`` (``python -m jaxprc.compat``) and on JAX itself;
every number must agree within the program's tolerance (most agree bit for bit).
"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"

# program -> relative tolerance (jaxprc's float rounding differs from XLA-via-JAX's in a few ops)
TOLERANCE = {
    "blackjax_hmc_nuts": 1e-5,
    "chex_jaxopt": 1e-5,
    "diffrax_ode_sde": 1e-5,
    "distrax_flows": 1e-5,
    "equinox_mlp": 1e-5,
    "flax_linen_mlp": 1e-5,
    "flax_nnx_mlp": 1e-5,
    "lineax_optimistix": 1e-5,
    "numpyro_nuts_svi": 1e-3,
    "optax_adam": 1e-5,
}


def _start(*args):
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=PROGRAMS)


def _result(proc, what):
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"{what} failed:\n{err[-4000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_every_program_is_listed():
    assert sorted(p.stem for p in PROGRAMS.glob("*.py")) == sorted(TOLERANCE)


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_program_gives_jax_results(name):
    path = str(PROGRAMS / f"{name}.py")
    on_jaxprc, on_jax = _start("-m", "jaxprc.compat", path), _start(path)   # the two run at once
    got, want = _result(on_jaxprc, "under jaxprc.compat"), _result(on_jax, "on JAX")
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=TOLERANCE[name],
                                   atol=1e-6, err_msg=f"{name}: {key}")
