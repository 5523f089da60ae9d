"""shard_map's varying-manual-axes types (check_vma) on 8 CPU devices: the checks
(tests/vma_checks.py) run in a process of their own, since the device count is fixed when the
client is created."""

from multidevice import run_script


def test_vma_checks_on_8_cpu_devices():
    run_script("vma_checks.py")
