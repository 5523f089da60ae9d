"""Checks that need several CPU devices run in a process of their own, since the device count is
fixed when the client is created: a checks script (``tests/*_checks.py``) marks its checks with
``@check`` and ends with ``run()``; its pytest test calls ``run_script("..._checks.py")``."""
import os
import pathlib
import subprocess
import sys
import traceback


CHECKS = []      # this process's checks, in the order the script defines them


def check(fn):
    """Marks ``fn`` as one of the script's checks."""
    CHECKS.append(fn)
    return fn


def raises(exc, fn, text=""):
    """Asserts that ``fn()`` raises ``exc`` with ``text`` in its message."""
    try:
        fn()
    except exc as e:
        assert text in str(e), e
    else:
        raise AssertionError(f"{fn} did not raise {exc.__name__}")


def run(checks=CHECKS) -> None:
    """Every check, each reported ok or FAIL with its traceback; the exit status counts failures."""
    failed = 0
    for check in checks:
        try:
            check()
            print("ok", check.__name__)
        except Exception:   # noqa: BLE001  (report every failing check, not just the first)
            failed += 1
            print("FAIL", check.__name__)
            traceback.print_exc()
    sys.exit(1 if failed else 0)


def run_script(name: str, devices: int = 8) -> None:
    """Runs ``tests/<name>`` with ``devices`` CPU devices and asserts that all its checks passed."""
    script = pathlib.Path(__file__).with_name(name)
    env = dict(os.environ, JAXPRC_NUM_CPU_DEVICES=str(devices))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
