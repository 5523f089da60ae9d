"""JAX 0.10's sharding API and shardings in types, on 8 CPU devices: the checks
(tests/sharding_types_checks.py) run in a process of their own, since the device count is fixed
when the client is created."""

from multidevice import run_script


def test_sharding_types_checks_on_8_cpu_devices():
    run_script("sharding_types_checks.py")
