"""Shardings in types through control flow, random samplers and iota vs jax on 8 CPU devices; the
checks run in a process of their own (sharding_rules_oracle_checks.py)."""
import pathlib
import subprocess
import sys


def test_sharding_rules_match_jax_on_8_cpu_devices():
    script = pathlib.Path(__file__).with_name("sharding_rules_oracle_checks.py")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
