"""Placement (device=/out_sharding= on creation, committed arrays, jit(device=), auto_axes and
explicit_axes, JAX's errors) vs jax on 8 CPU devices; the checks run in a process of their own
(placement_oracle_checks.py), since both libraries fix the device count when their client starts."""
import pathlib
import subprocess
import sys


def test_placement_matches_jax_on_8_cpu_devices():
    script = pathlib.Path(__file__).with_name("placement_oracle_checks.py")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
