"""Host callbacks in programs over several devices: the checks (tests/spmd_callback_checks.py) run on
8 CPU devices in a process of their own, since the device count is fixed when the client is created."""

from multidevice import run_script


def test_spmd_callback_checks_on_8_cpu_devices():
    run_script("spmd_callback_checks.py")
