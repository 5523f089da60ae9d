"""Pass instrumentation: run_pipeline's hooks, and the command line's --timing,
--print-ir-after-change, --print-ir-diff, --print-ir-before and --load-pass-plugin (in process)."""
import io
import os

import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.passes import run_pipeline
from jaxprc.passes.instrument import IRPrinter, PassTiming
from in_process import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "examples", "model.py")

PROGRAM = """{ lambda ; a:f32[3]. let
    b:f32[3] = log a
    c:f32[3] = exp b
    d:f32[3] = transpose[permutation=(0,)] c
    e:f32[3] = sin a
  in (d,) }
"""
RULES = """from jaxprc import lax
from jaxprc.passes.patterns import Pat, pattern


@pattern("my_rules", Pat(lax.exp_p, Pat(lax.log_p, "x")))
def exp_of_log(x):
    return x
"""



@pytest.fixture
def files(tmp_path):
    (tmp_path / "prog.jaxpr").write_text(PROGRAM)
    (tmp_path / "rules.py").write_text(RULES)
    return tmp_path


def test_run_pipeline_calls_instrumentations_around_each_pass():
    calls = []

    class Spy:
        def run_before_pass(self, label, program):
            calls.append(("before", label, len(program.eqns)))

        def run_after_pass(self, label, program, seconds):
            assert seconds >= 0
            calls.append(("after", label, len(program.eqns)))

    cj = jaxprc.make_jaxpr(lambda x: (jnp.sin(x), jnp.cos(x))[0])(1.0)
    timing = PassTiming()
    run_pipeline(cj, "cse,dce", instrument=[Spy(), timing])
    assert calls == [("before", "cse", 2), ("after", "cse", 2), ("before", "dce", 2), ("after", "dce", 1)]
    assert [(r[0], r[2], r[3]) for r in timing.rows] == [("cse", 2, 2), ("dce", 2, 1)]
    table = timing.report()
    assert "Total Execution Time" in table and table.rstrip().endswith("Total") and "2 -> 1  dce" in table


def test_printer_after_change_and_diff():
    cj = jaxprc.make_jaxpr(lambda x: (jnp.sin(x), jnp.cos(x))[0])(1.0)
    changed, diff = io.StringIO(), io.StringIO()
    for printer in (IRPrinter(after_change=True, stream=changed), IRPrinter(diff=True, stream=diff)):
        printer.start(cj)
        run_pipeline(cj, "cse,dce,cse", instrument=[printer])
    assert changed.getvalue().count("// -----// IR after") == 1 and "IR after dce" in changed.getvalue()
    assert diff.getvalue().startswith("--- IR before dce\n+++ IR after dce\n") and "c:~f32[] = cos a in (b,) }\n+{" in diff.getvalue()


def test_opt_user_pattern_set_from_the_command_line(files):
    r = cli("opt", str(files / "prog.jaxpr"), "--load-pass-plugin", str(files / "rules.py"),
            "--passes", "rewrite:set=my_rules,dce")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "{ lambda ; a:f32[3]. let b:f32[3] = transpose[permutation=(0,)] a in (b,) }"


def test_opt_timing_table_and_diffs(files):
    r = cli("opt", str(files / "prog.jaxpr"), "--load-pass-plugin", str(files / "rules.py"), "--passes",
            "rewrite:set=my_rules,dce,cse,canonicalize", "--timing", "--print-ir-diff")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "{ lambda ; a:f32[3]. let  in (a,) }"
    err = r.stderr
    assert err.count("--- IR before") == 3 and "IR before cse" not in err     # (cse changes nothing)
    assert "-    c:f32[3] = exp b" in err
    for row in ("4  parse and verify", "4 -> 3  rewrite:set='my_rules'", "3 -> 1  dce", "1 -> 1  cse",
                "1 -> 0  canonicalize", "print", "(100.0%)"):
        assert row in err, row


def test_opt_print_ir_after_change_and_before(files):
    r = cli("opt", str(files / "prog.jaxpr"), "--passes", "cse,dce,cse", "--print-ir-after-change",
            "--print-ir-before", "dce")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("// -----// IR after") == 1 and "IR after dce" in r.stderr
    assert r.stderr.count("// -----// IR before dce") == 1 and "sin a" in r.stderr.split("IR after")[0]


def test_trace_timing_and_after_change():
    r = cli("trace", f"{MODEL}:loss", "--args", "f32[8,4], f32[8]", "--transform", "grad", "--passes",
            "cse,dce", "--timing", "--print-ir-after-change")
    assert r.returncode == 0, r.stderr
    assert "// -----// IR after trace" in r.stderr and "// -----// IR after grad" in r.stderr
    for row in ("  trace\n", "  cse\n", "  dce\n", "emit jaxpr", "Total"):
        assert row in r.stderr, row


def test_trace_print_ir_diff():
    r = cli("trace", f"{MODEL}:loss", "--args", "f32[8,4], f32[8]", "--transform", "grad", "--passes",
            "canonicalize,dce", "--print-ir-diff")
    assert r.returncode == 0, r.stderr
    assert "--- IR before grad\n+++ IR after grad\n" in r.stderr
    # canonicalize changes grad's program (each diff line is one the program lost or gained)
    diff = r.stderr.split("+++ IR after canonicalize\n")[1].split("--- IR before")[0]
    assert any(line.startswith("-") for line in diff.splitlines()), r.stderr


@pytest.mark.parametrize("argv, message", [
    (["--print-ir-before", "vmap"], "--print-ir-before vmap: no step of that name runs here"),
    (["--load-pass-plugin", "nowhere.py"], "--load-pass-plugin nowhere.py: no such file"),
    (["--passes", "rewrite:set=unknown_rules"], "no pattern set named 'unknown_rules'"),
])
def test_user_errors(files, argv, message):
    r = cli("opt", str(files / "prog.jaxpr"), "--passes", "dce", *argv)
    assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr
