"""Placement as JAX 0.10 has it (creation's device=/out_sharding=, committed arrays, jit(device=),
auto_axes/explicit_axes) on 8 CPU devices: the checks (tests/placement_checks.py) run in a process
of their own, since the device count is fixed when the client is created."""

from multidevice import run_script


def test_placement_checks_on_8_cpu_devices():
    run_script("placement_checks.py")
