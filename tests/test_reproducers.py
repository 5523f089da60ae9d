"""Crash reproducers: --reproducer DIR (opt, lower, run), the jaxprc_reproducer_dir config option
for jit, and `jaxprc repro FILE` replaying them (in process)."""
import glob
import os

import numpy as np
import pytest

import jaxprc
from jaxprc.ir import ClosedJaxpr, Jaxpr, Primitive
from jaxprc.passes import register_pass
from jaxprc.passes.reproducer import ReproducerError, read_reproducer
from in_process import cli

# A primitive with a typing rule and nothing else: lowering it fails, as XLA failing would.
unlowerable_p = Primitive("test_unlowerable")
unlowerable_p.def_abstract_eval(lambda x: x)
unlowerable_p.def_impl(lambda x: x)


def _breaks_types(cj):
    """A pass that returns an ill-typed program (its output claims another type)."""
    j = cj.jaxpr
    eqn = j.eqns[0]
    bad = eqn.replace(outvars=[type(eqn.outvars[0])(eqn.outvars[0].aval.update(shape=(7,)))])
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, [bad.outvars[0]], [bad]), cj.consts)


register_pass("test_breaks_types", _breaks_types)

PROGRAM = "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = test_unlowerable b in (c,) }\n"



@pytest.fixture
def prog(tmp_path):
    path = tmp_path / "prog.jaxpr"
    path.write_text(PROGRAM)
    return path


def only_file(directory):
    (path,) = glob.glob(os.path.join(directory, "*.jaxpr"))
    return path


@pytest.mark.parametrize("argv, stage, error", [
    (["opt", "{prog}", "--passes", "cse,jvp,dce"], "pass", "NotImplementedError: Differentiation rule for 'test_unlowerable'"),
    (["opt", "{prog}", "--passes", "test_breaks_types"], "verify", "PassVerificationError: pass 'test_breaks_types' produced"),
    (["lower", "{prog}"], "lower", "NotImplementedError: MLIR lowering rule for primitive 'test_unlowerable'"),
    (["lower", "{prog}", "--emit", "hlo"], "lower", "NotImplementedError: MLIR lowering rule"),
    (["run", "{prog}", "--input", "1.0"], "lower", "NotImplementedError: MLIR lowering rule"),
])
def test_a_failing_command_writes_a_reproducer_that_replays_to_the_same_error(prog, tmp_path, argv, stage, error):
    out = tmp_path / "crashes"
    r = cli(*[a.format(prog=prog) for a in argv], "--reproducer", str(out))
    assert r.returncode == 1 and "reproducer: " in r.stderr
    path = only_file(out)
    assert path in r.stderr
    repro = read_reproducer(open(path).read())
    assert repro.stage == stage and repro.error.startswith(error), repro.error
    assert "jaxlib 0.10.2" in repro.versions and repro.flags["jax_enable_x64"] is False
    assert repro.pipeline == {"pass": "jvp", "verify": "test_breaks_types"}.get(stage, "")
    assert "test_unlowerable" in repro.program
    r = cli("repro", path)
    assert r.returncode == 0 and "reproduces" in r.stdout, r.stdout
    assert cli("repro", str(out)).returncode == 0          # a directory: each reproducer in it
    cli("check", path)                  # the file is a text IR program too (comments are skipped)


def test_jit_writes_reproducers_with_the_config_option(tmp_path):
    f = jaxprc.jit(lambda x: unlowerable_p.bind(x * 2.0))
    jaxprc.config.update("jaxprc_reproducer_dir", str(tmp_path))
    try:
        with pytest.raises(NotImplementedError) as info:
            f(np.ones(3, np.float32))
    finally:
        jaxprc.config.update("jaxprc_reproducer_dir", None)
    path = only_file(tmp_path)
    assert f"reproducer: {path}" in info.value.__notes__
    assert cli("repro", path).returncode == 0


def test_repro_says_when_the_failure_is_gone_or_different(tmp_path):
    fixed = tmp_path / "fixed.jaxpr"
    fixed.write_text("# jaxprc reproducer: `jaxprc repro THIS_FILE` replays it\n# stage: compile\n"
                     "# error: RuntimeError: XLA crashed\n{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }\n")
    r = cli("repro", str(fixed))
    assert r.returncode == 1 and "does not reproduce: stage compile succeeded" in r.stdout
    other = tmp_path / "other.jaxpr"
    other.write_text(fixed.read_text().replace("sin a", "test_unlowerable a").replace("compile", "lower"))
    r = cli("repro", str(other))
    assert r.returncode == 3 and "fails differently" in r.stdout and "recorded: RuntimeError: XLA crashed" in r.stdout


def test_a_file_that_is_not_a_reproducer_is_a_clear_error(prog):
    r = cli("repro", str(prog))
    assert r.returncode == 1 and "not a jaxprc reproducer" in r.stderr
    with pytest.raises(ReproducerError, match="stage 'link' is not one of"):
        read_reproducer("# jaxprc reproducer: `jaxprc repro THIS_FILE` replays it\n# stage: link\n# error: x\n")
