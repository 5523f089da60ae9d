"""Host callbacks in programs over several devices: the checks (tests/spmd_callback_checks.py) run on
8 CPU devices in a process of their own, since the device count is fixed when the client is created."""
import os
import pathlib
import subprocess
import sys


def test_spmd_callback_checks_on_8_cpu_devices():
    script = pathlib.Path(__file__).with_name("spmd_callback_checks.py")
    env = dict(os.environ, JAXPRC_NUM_CPU_DEVICES="8")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
