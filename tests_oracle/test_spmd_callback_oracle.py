"""debug.print / pure_callback in programs over 8 CPU devices vs jax: same results and same printed
lines; the checks (spmd_callback_oracle_checks.py) run in a process of their own."""
import pathlib
import subprocess
import sys


def test_spmd_callbacks_print_as_jax_on_8_cpu_devices():
    script = pathlib.Path(__file__).with_name("spmd_callback_oracle_checks.py")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr
