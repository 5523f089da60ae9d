"""The `jaxprc` command line, driven as a subprocess (`python -m jaxprc ...`).

Each command costs an interpreter start, so the commands of a test batch run
concurrently (module fixtures) and the tests read their results; commands whose
test is not about the process (its exit code, stdin, argparse's exit) run
in-process through `main(argv)` instead. Pipeline outputs are compared with
the Python API called directly, numbers with numpy.
Error messages are checked in-process through `main(argv)` (same code path,
no start-up cost), plus a few as subprocesses for the exit code and the
absence of a traceback.
"""
import contextlib
import io
import os
import runpy
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import jaxprc
from jaxprc.ir.parser import parse
from jaxprc.ir.verify import verify
from jaxprc.passes import run_pipeline
from jaxprc.tools.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
LOSS_JAXPR = os.path.join(EXAMPLES, "loss.jaxpr")
COND_JAXPR = os.path.join(EXAMPLES, "clipped_norm.jaxpr")
CUSTOM_JAXPR = os.path.join(EXAMPLES, "softplus_loss.jaxpr")
MODEL = os.path.join(EXAMPLES, "model.py")
LOSS_ARGS = "f32[8,4], f32[8]"


def run_concurrently(commands: dict) -> dict:
    """Start every `python -m jaxprc ARGS` at once; {key: CompletedProcess-like (rc, out, err)}."""
    procs = {}
    for key, (argv, stdin) in commands.items():
        procs[key] = subprocess.Popen([sys.executable, "-m", "jaxprc", *argv], cwd=ROOT, text=True,
                                      stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = {}
    for key, p in procs.items():
        out, err = p.communicate(commands[key][1], timeout=120)
        results[key] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return results


def run_in_process(argv) -> subprocess.CompletedProcess:
    """`main(argv)`, the code `python -m jaxprc ARGS` runs, in this process (no interpreter start)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return subprocess.CompletedProcess(argv, rc, out.getvalue(), err.getvalue())


def ok(result):
    assert result.returncode == 0, f"{result.args} failed:\n{result.stderr}"
    return result


def assert_user_error(result, *fragments):
    """Non-zero exit, one paragraph naming the problem, no traceback."""
    assert result.returncode != 0
    err = result.stderr.strip()
    assert "Traceback" not in err, err
    assert err.startswith("jaxprc "), err
    assert "\n\n" not in err, err
    for f in fragments:
        assert f in err, (f, err)


def model():
    return runpy.run_path(MODEL)


def specs(text=LOSS_ARGS):
    from jaxprc.tools.cli import parse_arg_types
    return parse_arg_types(text)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    arrays = {"w": rng.standard_normal((8, 4)), "x": rng.standard_normal(8),
              "dw": rng.standard_normal((8, 4)), "dx": rng.standard_normal(8),
              "bw": rng.standard_normal((3, 8, 4)), "bx": rng.standard_normal((3, 8)),
              "bdw": rng.standard_normal((3, 8, 4)), "bdx": rng.standard_normal((3, 8))}
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    for k, v in arrays.items():
        np.save(d / f"{k}.npy", v)
    return d, arrays


@pytest.fixture(scope="module")
def first(data):
    """Commands that need only the shipped examples: those reading stdin, exiting through argparse
    or failing run as subprocesses started at once (the launcher, the exit code); the rest in this
    process through main."""
    d, _ = data
    loss_text = open(LOSS_JAXPR).read()
    results = run_concurrently({
        "help": (["--help"], None),
        "opt": (["opt", "-", "--passes", "jvp,vmap:axis_size=3,dce", "--print-after", "vmap",
                 "-o", str(d / "opt.jaxpr")], loss_text),
        "bad_file": (["opt", str(d / "missing.jaxpr"), "--passes", "dce"], None),
        "parse_error": (["check", "-"], "{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a a\n  in (b,) }\n"),
        "debug": (["--debug", "trace", f"{MODEL}:loss", "--args", "f32[8,4], f32[7]"], None),
    })
    results.update({k: run_in_process(argv) for k, argv in {
        "trace": ["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--transform", "grad",
                  "--passes", "cse,dce", "--print-after-all", "-o", str(d / "grad.jaxpr")],
        "trace_vmap_hlo": ["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--transform", "grad",
                           "--transform", "vmap:0:axis_size=3", "--emit", "hlo"],
        "lower": ["lower", COND_JAXPR, "--emit", "stablehlo"],
        "graph": ["graph", COND_JAXPR, "-o", str(d / "cond.svg")],
        "demo": ["demo"],
    }.items()})
    return d, results


@pytest.fixture(scope="module")
def second(first, data):
    """Commands reading what the first batch wrote (in this process, through main)."""
    d, _ = data
    opt_out = str(d / "opt.jaxpr")
    return {k: run_in_process(argv) for k, argv in {
        "check": ["check", opt_out],
        "run": ["run", opt_out, "--input", f"a={d / 'bw.npy'}", "--input", f"b={d / 'bx.npy'}",
                "--input", f"c={d / 'bdw.npy'}", "--input", f"d={d / 'bdx.npy'}",
                "--output", str(d / "outs")],
        "run_print": ["run", COND_JAXPR, "--input", "[3.0, 4.0, 0.0, 0.0, 0.0]"],
    }.items()}


# ------------------------------------------------------------------- trace

def test_trace_grad_pipeline_matches_python_api(first):
    d, r = first
    ok(r["trace"])
    loss = model()["loss"]
    expected = [("trace", jaxprc.make_jaxpr(loss)(*specs()))]
    program = jaxprc.make_jaxpr(jaxprc.grad(loss))(*specs())
    expected.append(("grad", program))
    run_pipeline(program, "cse,dce", observe=lambda name, prog: expected.append((name, prog)))
    err = r["trace"].stderr
    positions = []
    for step, prog in expected:     # every step's IR is dumped to stderr, in order
        header = f"// -----// IR after {step} //----- //\n{prog}\n"
        assert header in err, step
        positions.append(err.index(header))
    assert positions == sorted(positions)
    assert open(d / "grad.jaxpr").read() == str(program) + "\n"


def test_trace_transforms_compose_and_emit_hlo(first):
    _, r = first
    out = ok(r["trace_vmap_hlo"]).stdout
    assert out.startswith("HloModule loss")
    # vmap(grad(loss)) at batch 3 maps f32[3,8,4], f32[3,8] to f32[3,8,4]
    assert "(f32[3,8,4]{2,1,0}, f32[3,8]{1,0})->f32[3,8,4]{2,1,0}" in out


@pytest.mark.parametrize("transform, in_types, out_types", [
    ("jvp", ["f32[8,4]", "f32[8]", "f32[8,4]", "f32[8]"], ["f32[]", "f32[]"]),
    ("vjp", ["f32[8,4]", "f32[8]", "f32[]"], ["f32[]", "f32[8,4]", "f32[8]"]),
    ("linearize", ["f32[8,4]", "f32[8]", "f32[8,4]", "f32[8]"], ["f32[]", "f32[]"]),
    ("value_and_grad:(0,1)", ["f32[8,4]", "f32[8]"], ["f32[]", "f32[8,4]", "f32[8]"]),
    ("jacrev:1", ["f32[8,4]", "f32[8]"], ["f32[8]"]),
    ("vmap:(None,0):axis_size=2", ["f32[8,4]", "f32[2,8]"], ["f32[2]"]),
])
def test_trace_transform_signatures(transform, in_types, out_types, capsys):
    """In-process: each transform derives the argument types of the function it builds."""
    assert main(["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--transform", transform]) == 0
    program = parse(capsys.readouterr().out)
    assert [a.str_short() for a in program.in_avals] == in_types
    assert [a.str_short() for a in program.out_avals] == out_types


def test_trace_pytree_args_expr(capsys):
    expr = "({'w': T('f32[4,2]'), 'b': ShapeDtypeStruct((2,), np.float32)}, T('f32[8,4]'))"
    assert main(["trace", f"{MODEL}:predict", "--args-expr", expr]) == 0
    program = parse(capsys.readouterr().out)
    # dict leaves in key order: b, then w
    assert [a.str_short() for a in program.in_avals] == ["f32[2]", "f32[4,2]", "f32[8,4]"]
    assert [a.str_short() for a in program.out_avals] == ["f32[8,2]"]


# --------------------------------------------------------------- opt, check, run

def test_opt_matches_passes_called_directly(first):
    d, r = first
    ok(r["opt"])
    original = parse(open(LOSS_JAXPR).read())
    seen = []
    expected = run_pipeline(original, "jvp,vmap:axis_size=3,dce",
                            observe=lambda name, p: seen.append((name, str(p))))
    assert open(d / "opt.jaxpr").read() == str(expected) + "\n"
    # --print-after vmap dumps only the vmap step
    assert r["opt"].stderr.count("// -----// IR after") == 1
    assert f"// -----// IR after vmap //----- //\n{dict(seen)['vmap']}\n" in r["opt"].stderr


def test_opt_output_round_trips_through_check(second):
    assert "ok (" in ok(second["check"]).stdout
    assert "round-trips" in second["check"].stdout


def test_run_on_opt_output_equals_python_api_on_original_function(second, data):
    """run(opt(loss.jaxpr, jvp,vmap,dce)) == vmap(jvp(loss)) == a numpy loop."""
    d, arrays = data
    ok(second["run"])
    outs = [np.load(d / "outs" / f"out{i}.npy") for i in range(2)]
    loss = model()["loss"]
    batched_jvp = jaxprc.vmap(lambda w, x, dw, dx: jaxprc.jvp(loss, (w, x), (dw, dx)))
    api = batched_jvp(arrays["bw"], arrays["bx"], arrays["bdw"], arrays["bdx"])
    np.testing.assert_allclose(outs[0], np.asarray(api[0]), rtol=1e-6)
    np.testing.assert_allclose(outs[1], np.asarray(api[1]), rtol=1e-5)
    # numpy oracle: sum(tanh(x @ w)^2) and its directional derivative, per example
    for i in range(3):
        w, x = arrays["bw"][i].astype(np.float64), arrays["bx"][i].astype(np.float64)
        dw, dx = arrays["bdw"][i], arrays["bdx"][i]
        h = np.tanh(x @ w)
        np.testing.assert_allclose(outs[0][i], np.sum(h ** 2), rtol=1e-5)
        dh = (1 - h ** 2) * (dx @ w + x @ dw)
        np.testing.assert_allclose(outs[1][i], np.sum(2 * h * dh), rtol=1e-4)


def test_run_prints_outputs_with_positional_input(second):
    out = ok(second["run_print"]).stdout
    # norm 5 > 1: 1 + log(5)
    name, value = out.strip().split(" = ")
    assert name == "out0:f32[]"
    np.testing.assert_allclose(float(value), 1 + np.log(5.0), rtol=1e-6)


def test_custom_rule_example_through_opt_check_run(tmp_path, capsys):
    """softplus_loss.jaxpr holds a custom_jvp rule (the sigmoid); jvp must use it."""
    out = str(tmp_path / "jvp.jaxpr")
    assert main(["opt", CUSTOM_JAXPR, "--passes", "jvp,dce", "-o", out]) == 0
    expected = run_pipeline(parse(open(CUSTOM_JAXPR).read()), "jvp,dce")
    assert open(out).read() == str(expected) + "\n"
    assert " = neg " in str(expected)        # the rule's 1 + exp(-x), not log1p(exp(x))'s derivative
    assert main(["check", out]) == 0
    assert main(["run", out, "-i", "0.5", "-i", "1.0", "-i", "1.0", "-i", "0.0",
                 "--output", str(tmp_path / "outs")]) == 0
    value, tangent = (np.load(tmp_path / "outs" / f"out{i}.npy") for i in range(2))
    # x @ w = 4 in each of 4 columns; d(x @ w) = 8 each; softplus' = sigmoid
    np.testing.assert_allclose(value, 4 * np.log1p(np.exp(4.0)), rtol=1e-6)
    np.testing.assert_allclose(tangent, 4 * 8 / (1 + np.exp(-4.0)), rtol=1e-6)
    capsys.readouterr()


def test_run_named_inputs_and_scalar_fill(tmp_path, capsys):
    assert main(["run", LOSS_JAXPR, "--input", "b=0.5", "--input", "a=1.0"]) == 0
    out = capsys.readouterr().out
    # x @ w = 8 * 0.5 = 4 in each of 4 columns
    np.testing.assert_allclose(float(out.split(" = ")[1]), 4 * np.tanh(4.0) ** 2, rtol=1e-6)


# -------------------------------------------------------------- lower, graph, demo

def test_lower_matches_lowering_api(first):
    from jaxprc.lowering import lower_jaxpr
    _, r = first
    text = ok(r["lower"]).stdout
    expected = lower_jaxpr(parse(open(COND_JAXPR).read()), name="clipped_norm",
                           platform=jaxprc.default_backend()).as_text()
    assert text.rstrip("\n") == expected.rstrip("\n")
    assert "stablehlo.case" in text or "stablehlo.if" in text


def test_graph_svg_draws_every_equation_and_nested_branches(first):
    d, r = first
    ok(r["graph"])
    svg = ET.parse(d / "cond.svg").getroot()        # well-formed XML
    texts = ["".join(t.itertext()) for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    program = parse(open(COND_JAXPR).read())
    for eqn in program.jaxpr.eqns:
        assert any(t.startswith(eqn.primitive.name) for t in texts), eqn.primitive.name
    assert "branches[0]" in texts and "branches[1]" in texts
    assert "log" in "".join(texts)           # an equation inside a branch
    # boxes nest or stay apart: no two overlap partially
    rects = [tuple(float(e.get(k)) for k in ("x", "y", "width", "height"))
             for e in svg.iter("{http://www.w3.org/2000/svg}rect")]
    inside = lambda a, b: (a[0] <= b[0] and a[1] <= b[1] and b[0] + b[2] <= a[0] + a[2]  # noqa: E731
                           and b[1] + b[3] <= a[1] + a[3])
    meet = lambda a, b: (a[0] < b[0] + b[2] and b[0] < a[0] + a[2]  # noqa: E731
                         and a[1] < b[1] + b[3] and b[1] < a[1] + a[3])
    assert len(rects) > len(program.jaxpr.eqns)
    assert not [(a, b) for i, a in enumerate(rects) for b in rects[i + 1:]
                if meet(a, b) and not inside(a, b) and not inside(b, a)]


def test_graph_dot_clusters(capsys):
    from jaxprc.tools.graph import build_graph
    assert main(["graph", COND_JAXPR]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph jaxpr {") and dot.rstrip().endswith("}")
    assert dot.count("subgraph cluster") == 2
    graph = build_graph(parse(open(COND_JAXPR).read()))
    # one edge per operand use plus one per output, in the top-level graph
    n_uses = sum(len(e.invars) for e in parse(open(COND_JAXPR).read()).jaxpr.eqns) + 1
    assert len(graph.edges) == n_uses
    assert dot.count(" -> ") == n_uses + sum(len(g.edges) for n in graph.nodes
                                             for _, g in n.subgraphs) + 2   # + 2 cluster links


def test_demo_runs_end_to_end(first):
    out = ok(first[1]["demo"]).stdout
    for section in ("1. the model", "after jvp", "after dce", "partial evaluation", "after transpose",
                    "after cse, dce", "StableHLO", "run by XLA"):
        assert section in out, section
    assert "func.func public @main" in out
    assert "(ok)" in out
    assert "custom_jvp_call_jaxpr" in out and "@softplus_jvp = {" in out


# ------------------------------------------------------------------ help

def test_help_lists_commands_and_each_has_examples(first, capsys):
    out = ok(first[1]["help"]).stdout
    for cmd in ("trace", "opt", "lower", "run", "check", "graph", "demo"):
        assert cmd in out
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "examples:" in capsys.readouterr().out


# ------------------------------------------------------------------ errors

def test_errors_as_subprocess_have_no_traceback(first):
    _, r = first
    assert_user_error(r["bad_file"], "missing.jaxpr")
    assert_user_error(r["parse_error"], "<stdin>: line 2, column 16", "sin takes 1 operand")
    # --debug shows the traceback instead
    assert r["debug"].returncode != 0 and "Traceback" in r["debug"].stderr


@pytest.mark.parametrize("argv, fragments", [
    (["trace", "nofile.py:f", "--args", "f32[3]"], ["nofile.py", "no such file"]),
    (["trace", f"{MODEL}:nope"], ["defines no 'nope'", "loss"]),
    (["trace", f"{MODEL}:loss", "--args", "f32[8,4], f33[8]"], ["argument 2", "unknown dtype 'f33'"]),
    (["trace", f"{MODEL}:loss", "--args", "f32[8,4"], ["bad type text 'f32[8,4'"]),
    (["trace", f"{MODEL}:loss", "--args", "f32[8,4], f32[7]"], ["tracing loss", "f32[7]", "matmul"]),
    (["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--transform", "spin"], ["unknown transform 'spin'"]),
    (["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--passes", "dce,bogus"], ["Unknown pass 'bogus'"]),
    (["trace", f"{MODEL}:loss", "--args-expr", "(T('f32[3]'), oops)"], ["--args-expr", "NameError"]),
    (["opt", LOSS_JAXPR, "--passes", "vmap"], ["pass 'vmap' failed", "axis_size"]),
    (["opt", LOSS_JAXPR, "--passes", ",,,"], ["--passes ',,,'", "empty pipeline"]),
    (["opt", LOSS_JAXPR, "--passes", ""], ["--passes ''", "empty pipeline"]),
    (["opt", LOSS_JAXPR, "--passes", "jvp,,dce"], ["empty step"]),
    (["opt", LOSS_JAXPR, "--passes", "dce:foo=1"], ["pass 'dce' has no option 'foo'"]),
    (["opt", LOSS_JAXPR, "--passes", "vmap:axis_size=-1"],
     ["pass 'vmap:axis_size=-1' failed on", "non-negative integer, got -1"]),
    (["run", LOSS_JAXPR, "--input", "q=1"], ["no input named 'q'", "a:f32[8,4], b:f32[8]"]),
    (["run", LOSS_JAXPR, "--input", "a=1"], ["missing --input for b:f32[8]"]),
    (["run", LOSS_JAXPR, "-i", "a=[1, 2]", "-i", "b=1"], ["input a", "f32[8,4]", "(2,)"]),
    (["check", os.path.join(ROOT, "tests", "malformed", "duplicate_binder.jaxpr")], ["line "]),
    (["trace", f"{MODEL}:loss", "--args", LOSS_ARGS, "--transform", "grad", "--print-after", "gard"],
     ["--print-after gard", "trace, grad"]),
    (["opt", LOSS_JAXPR, "--passes", "jvp,dce", "--print-after", "cse"], ["--print-after cse", "jvp, dce"]),
    (["graph", LOSS_JAXPR, "-o", "loss.png"], ["cannot write .png", ".svg or .dot"]),
])
def test_user_errors(argv, fragments, capsys):
    assert main(argv) == 1
    captured = capsys.readouterr()
    result = subprocess.CompletedProcess(argv, 1, captured.out, captured.err)
    assert_user_error(result, *fragments)


def test_ill_typed_pass_result_is_named(capsys):
    """The command line verifies after every pass: a pass producing an ill-typed program is named."""
    from jaxprc.ir.core import ClosedJaxpr, Jaxpr, ShapedArray, Var
    from jaxprc.passes import register_pass

    def retype_first_output(cj):
        j = cj.jaxpr
        eqn = j.eqns[0]
        bad = Var(ShapedArray((5,), np.int32))
        eqns = [eqn.replace(outvars=[bad] + eqn.outvars[1:])] + j.eqns[1:]
        sub = lambda v: bad if v is eqn.outvars[0] else v
        eqns = [eqns[0]] + [e.replace(invars=[sub(a) for a in e.invars]) for e in eqns[1:]]
        return ClosedJaxpr(Jaxpr(j.constvars, j.invars, [sub(v) for v in j.outvars], eqns), cj.consts)
    register_pass("_cli_test_retype", retype_first_output)
    assert main(["opt", LOSS_JAXPR, "--passes", "dce,_cli_test_retype"]) == 1
    err = capsys.readouterr().err
    assert "pass '_cli_test_retype' produced an ill-typed program from" in err, err


def test_failing_pass_is_named(tmp_path, capsys):
    """A pass that raises on a program: the message names the pass and the file."""
    program = tmp_path / "int.jaxpr"
    program.write_text("{ lambda ; a:i32[3]. let b:i32[3] = neg a in (b,) }\n")
    verify(parse(program.read_text()))
    assert main(["opt", str(program), "--passes", "vmap:axis_size=2:in_axes=7"]) == 1
    err = capsys.readouterr().err
    assert "pass 'vmap:axis_size=2:in_axes=7' failed on" in err and "int.jaxpr" in err


# ----------------------------------------------- hostile input (subprocess)

HUGE = "9" * 5000          # beyond Python's own int-from-text limit (4300 digits)
BIG = "9" * 30             # beyond int64, within Python's


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """User code calling sys.exit, huge integers, binary files. The sys.exit cases and binary stdin
    run as subprocesses (the exit code, the process's own stdin), started at once; the rest in
    this process through main."""
    d = tmp_path_factory.mktemp("hostile")
    (d / "exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    (d / "exits_in_function.py").write_text("import sys\n\ndef f(x):\n    sys.exit(3)\n")
    (d / "sin.py").write_text("import jaxprc.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x)\n")
    (d / "int.jaxpr").write_text("{ lambda ; a:i32[]. let b:i32[] = mul a a in (b,) }\n")
    (d / "random.bin").write_bytes(bytes(np.random.default_rng(0).integers(128, 256, 300, np.uint8)))
    (d / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    np.save(d / "array.npy", np.ones(3, np.float32))
    sin = f"{d / 'sin.py'}:f"
    exits = {
        "exit_import": ["trace", f"{d / 'exits_at_import.py'}:f", "--args", "f32[3]"],
        "exit_trace": ["trace", f"{d / 'exits_in_function.py'}:f", "--args", "f32[3]"],
        "exit_vjp": ["trace", f"{d / 'exits_in_function.py'}:f", "--args", "f32[3]", "--transform", "vjp"],
    }
    commands = {
        "huge_shape": ["trace", sin, "--args", f"f32[{HUGE}]"],
        "big_shape": ["trace", sin, "--args", f"f32[{BIG}]", "--emit", "stablehlo"],
        "big_shape_expr": ["trace", sin, "--args-expr", f"T('f32[{BIG}]')"],
        "huge_axis_size": ["trace", sin, "--args", "f32[3]", "--transform", f"vmap:axis_size={HUGE}"],
        "big_axis_size": ["trace", sin, "--args", "f32[3]", "--transform", f"vmap:axis_size={BIG}"],
        "huge_argnums": ["trace", sin, "--args", "f32[]", "--transform", f"grad:{HUGE}"],
        "deep_in_axes": ["trace", sin, "--args", "f32[3]", "--transform", "vmap:" + "(" * 3000],
        "huge_input": ["run", str(d / "int.jaxpr"), "--input", f"a={HUGE}"],
        "big_input": ["run", str(d / "int.jaxpr"), "--input", f"a={BIG}"],
    }
    for command in ("check", "graph", "lower", "run", "opt"):
        for name in ("random.bin", "image.png", "array.npy"):
            commands[f"{command}:{name}"] = [command, str(d / name)]
    results = run_concurrently({k: (argv, None) for k, argv in exits.items()})
    results.update({k: run_in_process(argv) for k, argv in commands.items()})
    results["stdin_npy"] = subprocess.run([sys.executable, "-m", "jaxprc", "check", "-"], cwd=ROOT,
                                          input=(d / "array.npy").read_bytes(), capture_output=True)
    results["stdin_npy"].stderr = results["stdin_npy"].stderr.decode()
    return results


def test_user_code_calling_sys_exit_is_reported_not_obeyed(hostile):
    for key, where in [("exit_import", "exits_at_import.py"), ("exit_trace", "tracing f"),
                       ("exit_vjp", "--transform vjp")]:
        assert hostile[key].returncode not in (0, 3)
        assert_user_error(hostile[key], where, "called sys.exit(3)", "SystemExit")


@pytest.mark.parametrize("key, fragments", [
    ("huge_shape", ["argument 1", "is too large", "2**63-1", "(5000 characters)"]),
    ("big_shape", ["argument 1", "is too large", "2**63-1", BIG]),
    ("big_shape_expr", ["is too large", "2**63-1"]),
    ("huge_axis_size", ["vmap:axis_size", "5000 digits"]),
    ("big_axis_size", ["vmap axis_size=" + BIG, "is not a valid axis size"]),
    ("huge_argnums", ["grad:argnums", "5000 digits"]),
    ("deep_in_axes", ["vmap:in_axes", "not a Python literal"]),
    ("huge_input", ["input a", "5000 digits"]),
    ("big_input", ["input a", "does not fit", "i32[]"]),
])
def test_huge_integers_on_the_command_line_are_clear_errors(hostile, key, fragments):
    assert_user_error(hostile[key], *fragments)
    assert "C long" not in hostile[key].stderr and len(hostile[key].stderr) < 600


@pytest.mark.parametrize("command", ["check", "graph", "lower", "run", "opt"])
@pytest.mark.parametrize("name", ["random.bin", "image.png", "array.npy"])
def test_binary_file_is_not_a_text_ir_file(hostile, command, name):
    assert_user_error(hostile[f"{command}:{name}"], name, "not a text IR file")
    assert "UnicodeDecodeError" not in hostile[f"{command}:{name}"].stderr


def test_binary_stdin_is_not_a_text_ir_file(hostile):
    assert_user_error(hostile["stdin_npy"], "<stdin>", "not a text IR file")
