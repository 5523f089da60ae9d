"""pmap, pbroadcast, eager ops on sharded arrays, resharding, on 8 CPU devices: the checks (tests/pmap_checks.py)
run in a process of their own, since the device count is fixed when the client is created."""
import os
import subprocess
import sys

from multidevice import run_script


def test_pmap_checks_on_8_cpu_devices():
    run_script("pmap_checks.py")


def test_cli_runs_a_pmap_program_on_n_devices(tmp_path):
    """`jaxprc run --devices 4` runs a program over a 4-device mesh; `lower --devices 4` shows it
    partitioned; without the devices the error names the count."""
    make = ("import jaxprc as jx, numpy as np\nfrom jaxprc import lax\n"
            "print(jx.make_jaxpr(jx.pmap(lambda v: v * lax.psum(v, 'i'), 'i'))(np.zeros(4, np.float32)))")
    env = dict(os.environ, JAXPRC_NUM_CPU_DEVICES="4")
    text = subprocess.run([sys.executable, "-c", make], env=env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    prog = tmp_path / "p.jaxpr"
    prog.write_text(text.stdout)
    env.pop("JAXPRC_NUM_CPU_DEVICES")
    cli = [sys.executable, "-m", "jaxprc"]
    run = subprocess.run(cli + ["run", str(prog), "--devices", "4", "-i", "[1.0, 2.0, 3.0, 4.0]"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "[10., 20., 30., 40.]" in run.stdout, run.stdout + run.stderr
    low = subprocess.run(cli + ["lower", str(prog), "--devices", "4"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert "sdy.manual_computation" in low.stdout and "mhlo.num_partitions = 4" in low.stdout, low.stderr
    bad = subprocess.run(cli + ["run", str(prog), "-i", "[1.0, 2.0, 3.0, 4.0]"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode != 0 and "JAXPRC_NUM_CPU_DEVICES" in bad.stderr
