"""jaxprc.sharding and jit with shardings, on 8 CPU devices: the checks (tests/sharding_checks.py)
run in a process of their own, since the device count is fixed when the client is created."""

from multidevice import run_script


def test_sharding_checks_on_8_cpu_devices():
    run_script("sharding_checks.py")
