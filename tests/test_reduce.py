"""`jaxprc reduce`: delta debugging of IR programs against --until-error, --until-differs and
--test CMD (in process; the --test command is a small Python script)."""
import os
import sys
import time

import numpy as np
import pytest

from jaxprc.ir import parse
from jaxprc.ir.verify import verify
from jaxprc.ir.core import Literal, ShapedArray
from jaxprc.passes import count_equations
from jaxprc.tools.cli import command_test, error_test, load_pass_plugins
from jaxprc.tools.isolated_test import IsolatedTest
from jaxprc.tools.reduce import Reducer
from in_process import cli

# The test primitives (test_reduce_unlowerable, _miscompiled, _dies), here and in the workers.
HOOKS = os.path.join(os.path.dirname(__file__), "reduce_hooks.py")
load_pass_plugins([HOOKS])


def chain(n: int, culprit_at: int, culprit: str) -> str:
    """``n`` equations in one chain (differences carry through to the output unshrunk), the
    one at ``culprit_at`` applying ``culprit``."""
    ops = ["add {x} b", "neg {x}", "sub {x} a", "sin {x}"]
    lines, prev = ["{ lambda ; a:f32[4] b:f32[4]. let"], "a"
    for i in range(n):
        op = culprit + " {x}" if i == culprit_at else ops[i % len(ops)]
        lines.append(f"    v{i}:f32[4] = " + op.format(x=prev))
        prev = f"v{i}"
    return "\n".join(lines + [f"  in ({prev}, b) }}"]) + "\n"



def reduced(r):
    assert r.returncode == 0, r.stderr
    program = parse(r.stdout)
    verify(program)
    return program


def test_until_error_shrinks_2000_equations_to_the_failing_one(tmp_path):
    path = tmp_path / "big.jaxpr"
    path.write_text(chain(2000, 1234, "test_reduce_unlowerable"))
    r = cli("reduce", str(path), "--until-error", "lowering rule for primitive 'test_reduce_unlowerable'",
            "--load-pass-plugin", HOOKS)
    small = reduced(r)
    assert count_equations(small) <= 5
    assert [e.primitive.name for e in small.eqns] == ["test_reduce_unlowerable"]
    assert "reduce: 2000 -> 1 equation" in r.stderr and "after cut" in r.stderr     # progress lines


def test_until_differs_corners_the_miscompiled_primitive(tmp_path):
    path = tmp_path / "prog.jaxpr"
    path.write_text(chain(200, 130, "test_reduce_miscompiled"))
    small = reduced(cli("reduce", str(path), "--until-differs", "--quiet", "--load-pass-plugin", HOOKS))
    assert [e.primitive.name for e in small.eqns] == ["test_reduce_miscompiled"]
    assert small.jaxpr.outvars == small.eqns[0].outvars       # its result is what is compared


def test_until_error_after_a_pipeline_and_inlining_of_branches(tmp_path):
    text = """{ lambda ; a:f32[] b:i32[]. let
        c:f32[] = sin a
        d:f32[] = cond[
          branches=(
            { lambda ; e:f32[]. let f:f32[] = cos e in (f,) },
            { lambda ; g:f32[]. let h:f32[] = exp g; i:f32[] = test_reduce_unlowerable h in (i,) }
          )
        ] b c
        j:f32[] = mul d a
      in (j,) }"""
    path = tmp_path / "prog.jaxpr"
    path.write_text(text)
    small = reduced(cli("reduce", str(path), "--passes", "jvp", "--until-error", "Differentiation rule for "
                        "'test_reduce_unlowerable'", "--quiet",
                        "--load-pass-plugin", HOOKS))
    assert [e.primitive.name for e in small.eqns] == ["test_reduce_unlowerable"]


def test_a_user_command_decides_and_a_reproducer_header_is_kept(tmp_path):
    script = tmp_path / "has_tanh.py"
    script.write_text("import sys\ntext = open(sys.argv[1]).read()\n"
                      "sys.exit(0 if text.startswith('# keep me') and ' tanh ' in text else 1)\n")
    path = tmp_path / "prog.jaxpr"
    path.write_text("# keep me\n" + chain(40, 25, "tanh"))
    out = tmp_path / "small.jaxpr"
    r = cli("reduce", str(path), "--test", f"{sys.executable} {script}", "-o", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("# keep me\n")
    assert [e.primitive.name for e in parse(text).eqns] == ["tanh"]


def test_an_operand_becomes_a_constant_where_an_input_is_not_interesting():
    # Interesting while tanh's operand is computed in the program (a failure that needs a
    # constant operand, XLA's constant folding say): cutting its producer (which makes the
    # operand an input) is not, a broadcast zero is; the broadcast's shape then shrinks to a
    # scalar's, and the broadcast is bypassed.
    def interesting(program):
        tanh = [e for e in program.eqns if e.primitive.name == "tanh"]
        return bool(tanh) and tanh[0].invars[0] not in program.jaxpr.invars
    small = Reducer(interesting).reduce(parse(chain(40, 25, "tanh")))
    verify(small)
    assert [e.primitive.name for e in small.eqns] == ["tanh"]
    assert small.eqns[0].invars == [Literal(0.0, ShapedArray((), np.float32))]
    assert small.jaxpr.invars == []


def test_scalar_inputs_become_literals(tmp_path):
    path = tmp_path / "prog.jaxpr"
    path.write_text("""{ lambda ; a:f32[] b:f32[]. let
        c:f32[] = sin a
        d:f32[] = mul c b
        e:f32[] = test_reduce_unlowerable d
        f:f32[] = add e a
      in (f,) }""")
    small = reduced(cli("reduce", str(path), "--until-error", "test_reduce_unlowerable", "--quiet",
                        "--load-pass-plugin", HOOKS))
    assert [e.primitive.name for e in small.eqns] == ["test_reduce_unlowerable"]
    assert small.jaxpr.invars == [] and type(small.eqns[0].invars[0]) is Literal


def scan_program(n: int, culprit_at: int) -> str:
    """A scan whose body is a chain of ``n`` equations, the one at ``culprit_at`` unlowerable."""
    ops = ["mul {x} c", "sin {x}", "add {x} x", "neg {x}"]
    body, prev = [], "x"
    for i in range(n):
        op = "test_reduce_unlowerable {x}" if i == culprit_at else ops[i % len(ops)]
        body.append(f"v{i}:f32[3] = " + op.format(x=prev))
        prev = f"v{i}"
    return ("{ lambda ; a:f32[3] b:f32[5,3]. let\n"
            "  s:f32[3] t:f32[5,3] = scan[\n"
            "    jaxpr={ lambda ; c:f32[3] x:f32[3]. let\n      " + "\n      ".join(body) + "\n"
            f"      w:f32[3] = add c {prev}\n"
            f"    in (w, {prev}) }}\n"
            "    length=5 linear=(False, False) num_carry=1 num_consts=0 reverse=False unroll=1\n"
            "  ] a b\n"
            "  u:f32[3] = sin s\n"
            "in (u, t) }\n")


def test_a_failure_inside_a_scan_body_is_extracted_to_that_equation(tmp_path):
    path = tmp_path / "scan.jaxpr"
    path.write_text(scan_program(24, 17))
    small = reduced(cli("reduce", str(path), "--until-error", "test_reduce_unlowerable", "--quiet",
                        "--load-pass-plugin", HOOKS))
    assert [e.primitive.name for e in small.eqns] == ["test_reduce_unlowerable"]


def test_a_scan_body_shrinks_in_place_to_the_failing_equation():
    # Interesting only while the failing equation is inside a scan: the body is reduced where
    # it is, its signature kept.
    fails = error_test("test_reduce_unlowerable", None)
    in_scan = lambda p: any(e.primitive.name == "scan" for e in p.eqns) and fails(p)
    small = Reducer(in_scan).reduce(parse(scan_program(24, 17)))
    verify(small)
    assert [e.primitive.name for e in small.eqns] == ["scan"]
    body = small.eqns[0].params["jaxpr"]
    assert [e.primitive.name for e in body.eqns] == ["test_reduce_unlowerable"]
    assert count_equations(small) == 2


def test_cond_branches_shrink_in_place():
    program = parse("""{ lambda ; a:f32[2] b:i32[]. let
        d:f32[2] = cond[
          branches=(
            { lambda ; e:f32[2]. let f:f32[2] = cos e; g:f32[2] = exp f in (g,) },
            { lambda ; x0:f32[2]. let
                x1:f32[2] = sin x0
                x2:f32[2] = test_reduce_unlowerable x1
                x3:f32[2] = neg x2
                x4:f32[2] = mul x3 x0
              in (x4,) }
          )
        ] b a
      in (d,) }""")
    fails = error_test("test_reduce_unlowerable", None)
    in_cond = lambda p: any(e.primitive.name == "cond" for e in p.eqns) and fails(p)
    small = Reducer(in_cond).reduce(program)
    verify(small)
    assert [e.primitive.name for e in small.eqns] == ["cond"]
    first, second = small.eqns[0].params["branches"]
    assert first.eqns == [] and first.jaxpr.outvars == first.jaxpr.invars       # bypassed
    assert [e.primitive.name for e in second.eqns] == ["test_reduce_unlowerable"]


def test_a_while_body_shrinks_but_what_its_predicate_reads_stays():
    # The predicate reads i; i's update reads the step s, whose update stays too (changing
    # either could make the loop endless). The chain on x shrinks to the failing equation.
    chain_on_x = "\n".join(f"x{k + 1}:f32[3] = {'test_reduce_unlowerable' if k == 6 else 'sin'} x{k}"
                           for k in range(10))
    program = parse(f"""{{ lambda ; a:f32[3]. let
        b:i32[] c:i32[] d:f32[3] = while[
          body_jaxpr={{ lambda ; i:i32[] s:i32[] x0:f32[3]. let
              j:i32[] = add i s
              t:i32[] = abs s
              {chain_on_x}
            in (j, t, x10) }}
          body_nconsts=0
          cond_jaxpr={{ lambda ; i:i32[] s:i32[] x:f32[3]. let p:bool[] = lt i 5:i32[] in (p,) }}
          cond_nconsts=0
        ] 0:i32[] 1:i32[] a
      in (d,) }}""")
    fails = error_test("test_reduce_unlowerable", None)
    in_while = lambda p: any(e.primitive.name == "while" for e in p.eqns) and fails(p)
    small = Reducer(in_while).reduce(program)
    verify(small)
    assert [e.primitive.name for e in small.eqns] == ["while"]
    body, cond = small.eqns[0].params["body_jaxpr"], small.eqns[0].params["cond_jaxpr"]
    assert [e.primitive.name for e in body.eqns] == ["add", "abs", "test_reduce_unlowerable"]
    assert [e.primitive.name for e in cond.eqns] == ["lt"]


def test_input_dimensions_halve_while_the_program_types():
    # The reshape's sizes fix b's shape (halving it does not type); a's halves to [1,1].
    program = parse("""{ lambda ; a:f32[8,6] b:f32[4,6]. let
        c:f32[8,6] = sin a
        d:f32[8,6] = tanh c
        e:f32[24] = reshape[dimensions=None new_sizes=(24,)] b
        f:f32[24] = tanh e
      in (d, f) }""")
    names = lambda p: [e.primitive.name for e in p.eqns]
    small = Reducer(lambda p: "reshape" in names(p) and names(p).count("tanh") == 2).reduce(program)
    verify(small)
    assert sorted(v.aval.str_short() for v in small.jaxpr.invars) == ["f32[1,1]", "f32[4,6]"]
    assert [e.primitive.name for e in small.eqns] == ["tanh", "reshape", "tanh"]


@pytest.mark.parametrize("argv, message", [
    ([], "give exactly one interestingness test"),
    (["--until-differs", "--test", "true"], "give exactly one interestingness test"),
    (["--until-differs", "--passes", "dce"], "--passes goes with --until-error"),
    (["--until-error", "("], "is not a regular expression"),
    (["--until-error", "nothing like this"], "the input program is not interesting"),
])
def test_user_errors(tmp_path, argv, message):
    path = tmp_path / "prog.jaxpr"
    path.write_text(chain(3, 1, "cos"))
    r = cli("reduce", str(path), *argv)
    assert r.returncode == 1 and message in r.stderr, r.stderr


PARAMS_PROGRAM = """{ lambda ; a:f32[8,8,3] b:f32[16]. let
    c:f32[8,8,3] = sin a
    d:f32[3] = reduce_sum[axes=(0, 1)] c
    e:f32[4] = slice[limit_indices=(10,) start_indices=(2,) strides=(2,)] b
    f:f32[4] = tanh e
    g:i32[] h:f32[4] = scan[
      jaxpr={ lambda ; i:i32[] j:f32[4]. let
          k:i32[] = add i 1:i32[]
          n:f32[4] = cos j
        in (k, n) }
      length=12 linear=(False, False) num_carry=2 num_consts=0 reverse=False unroll=1
    ] 0:i32[] f
    p:i32[] q:f32[4] = while[
      body_jaxpr={ lambda ; r:i32[] s:f32[4]. let t:i32[] = add r 1:i32[]; v:f32[4] = exp s in (t, v) }
      body_nconsts=0
      cond_jaxpr={ lambda ; w:i32[] x:f32[4]. let y:bool[] = lt w 9:i32[] in (y,) }
      cond_nconsts=0
    ] 0:i32[] h
    z:f32[5,5,3] = reduce_window_max[
      base_dilation=(1, 1, 1) padding=((0, 0), (0, 0), (0, 0)) window_dilation=(1, 1, 1)
      window_dimensions=(4, 4, 1) window_strides=(1, 1, 1)
    ] a
  in (d, q, z) }"""


def test_params_shrink_while_the_test_holds():
    # Interesting while each equation is there with a param at least some size: each param
    # shrinks to that size (reduction axes, a slice's bounds, a scan's length, a while loop's
    # bound, a window), and no further.
    def eqn(program, name):
        found = [e for e in program.eqns if e.primitive.name == name]
        return found[0] if found else None

    def bound(loop):
        return int(loop.params["cond_jaxpr"].eqns[0].invars[1].val)

    def interesting(p):
        r, s, sc, w, rw = (eqn(p, n) for n in ("reduce_sum", "slice", "scan", "while", "reduce_window_max"))
        return (None not in (r, s, sc, w, rw) and len(r.params["axes"]) >= 1 and s.outvars[0].aval.shape[0] >= 1
                and sc.params["length"] >= 3 and bound(w) >= 2 and rw.params["window_dimensions"][0] >= 2)
    small = Reducer(interesting).reduce(parse(PARAMS_PROGRAM))
    verify(small)
    get = lambda name: eqn(small, name)
    assert len(get("reduce_sum").params["axes"]) == 1
    assert get("scan").params["length"] == 3
    assert bound(get("while")) == 2
    assert get("reduce_window_max").params["window_dimensions"] == (2, 1, 1)
    s = get("slice").params
    assert s["strides"] == (1,) and s["limit_indices"][0] - s["start_indices"][0] == 1


def test_a_scans_length_shrinks_with_its_scanned_input():
    def interesting(p):
        scans = [e for e in p.eqns if e.primitive.name == "scan"]
        return bool(scans) and "sin" in [e.primitive.name for e in scans[0].params["jaxpr"].eqns] \
            and scans[0].invars[-1] in p.jaxpr.invars
    small = Reducer(interesting).reduce(parse(scan_program(4, 99)))
    verify(small)
    scan = small.eqns[0]
    assert scan.params["length"] == 1 and scan.invars[-1].aval.shape == (1, 3)     # was [5,3]


def test_a_candidate_that_hangs_is_not_interesting():
    # The loop's step is an input: the reducer's move that makes it a zero gives an endless loop,
    # which runs past the timeout (not interesting: the worker is killed, a new one starts);
    # a one is kept. The test wants the loop kept (else cutting it would end the reduction).
    program = parse("""{ lambda ; s:i32[] a:f32[4]. let
        i:i32[] x:f32[4] = while[
          body_jaxpr={ lambda ; k:i32[] t:i32[] y:f32[4]. let
              j:i32[] = add t k
              z:f32[4] = sin y
            in (j, z) }
          body_nconsts=1
          cond_jaxpr={ lambda ; t:i32[] y:f32[4]. let p:bool[] = lt t 9:i32[] in (p,) }
          cond_nconsts=0
        ] s 0:i32[] a
        w:f32[4] = test_reduce_miscompiled x
      in (w,) }""")
    differs = IsolatedTest({"test": "differs"}, [HOOKS], timeout=2.0)
    has_loop = lambda p: any(e.primitive.name == "while" for e in p.eqns)
    try:
        small = Reducer(lambda p: has_loop(p) and differs(p)).reduce(program)
    finally:
        differs.close()
    verify(small)
    assert differs.timeouts >= 1
    loop, culprit = small.eqns
    assert culprit.primitive.name == "test_reduce_miscompiled"
    assert loop.invars[0] == Literal(1, ShapedArray((), np.int32))      # the step: one, not zero


def test_until_error_matches_a_process_that_dies():
    # test_reduce_dies's lowering writes a fatal message and ends the process (as an XLA abort
    # would): the worker dies, its last words are matched, a new worker takes the next candidate.
    dies = parse("{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = test_reduce_dies b in (c,) }")
    lives = parse("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")
    matching = IsolatedTest({"test": "error", "pattern": "fatal: test_reduce_dies", "pipeline": None},
                            [HOOKS], timeout=60.0)
    other = IsolatedTest({"test": "error", "pattern": "lowering rule", "pipeline": None}, [HOOKS], timeout=60.0)
    try:
        assert [matching(dies), matching(lives), other(dies)] == [True, False, False]
    finally:
        matching.close()
        other.close()
    assert (matching.deaths, other.deaths) == (1, 1)


def test_a_test_command_that_hangs_is_killed_at_the_timeout(tmp_path):
    # A shell whose child would write a file after 2.5 s, then sleep: at the 1 s timeout the
    # candidate is not interesting, and the whole process group is killed (no file appears).
    program = parse(chain(3, 1, "cos"))
    marker = tmp_path / "still-running"
    child = f"import time; time.sleep(2.5); open({str(marker)!r}, 'w'); time.sleep(60)"
    script = tmp_path / "hang.sh"
    script.write_text(f"#!/bin/sh\n{sys.executable} -c \"{child}\"\n")
    start = time.perf_counter()
    assert command_test(f"sh {script}", "", timeout=1.0)(program) is False
    assert time.perf_counter() - start < 30
    time.sleep(3)
    assert not marker.exists()
    assert command_test(f"{sys.executable} -c pass", "", timeout=30.0)(program) is True
