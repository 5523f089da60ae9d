"""Shared sub-jaxprs in the text form: a jaxpr param object met at two or more places prints once,
as an ``@name = jaxpr { ... }`` definition, and parses back as one object."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.ir import ClosedJaxpr, ShapedArray, Thunk, trace_to_jaxpr
from jaxprc.lax import control_flow as cf
from jaxprc.ir.parser import ParseError, parse
from roundtrip import assert_round_trip

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
X3 = ShapedArray((3,), np.dtype("float32"))


def g(x):
    return jnp.sin(x) * 2


jit_g = jx.jit(g)


def twice(x):
    return jit_g(jit_g(x))


def test_nested_jit_called_twice_prints_its_body_once():
    cj = jx.make_jaxpr(twice)(1.0)
    text = str(cj)
    assert text == (
        "{ lambda ; a:~f32[]. let\n"
        '    b:~f32[] = jit[jaxpr=@g name="g"] a\n'
        '    c:~f32[] = jit[jaxpr=@g name="g"] b\n'
        "  in (c,) }\n\n"
        "@g = jaxpr { lambda ; a:~f32[]. let\n"
        "    b:~f32[] = sin a\n"
        "    c:~f32[] = mul b 2.0:~f32[]\n"
        "  in (c,) }")
    assert str(cj) == text                      # deterministic


def test_nested_jit_called_twice_round_trips_shared_and_computes_the_same():
    cj = jx.make_jaxpr(twice)(1.0)
    back = assert_round_trip(cj)                # text-exact, alpha-equivalent, both verify
    first, second = (e.params["jaxpr"] for e in back.eqns)
    assert isinstance(first, ClosedJaxpr) and first is second
    fun = jx.jaxpr_as_fun(back)
    x = np.float32(0.7)
    np.testing.assert_allclose(np.asarray(fun(x)[0]), np.asarray(twice(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jx.grad(lambda x: fun(x)[0])(x)),
                               np.asarray(jx.grad(twice)(x)), rtol=1e-6)


def test_a_single_occurrence_stays_inline():
    text = str(jx.make_jaxpr(lambda x: jit_g(x) + 1.0)(1.0))
    assert "jaxpr={ lambda" in text and "@" not in text


def _cond_with_one_branch_twice() -> ClosedJaxpr:
    """A cond whose ``branches`` tuple holds the same jaxpr object twice (built by hand)."""
    cj = trace_to_jaxpr(lambda p, x: [cf.cond(p, lambda a: jx.lax.sin_p.bind(a), lambda a: a, x)],
                        [ShapedArray((), np.dtype("bool")), X3])
    (eqn,) = [e for e in cj.eqns if "branches" in e.params]
    branch = eqn.params["branches"][0]
    shared = eqn.replace(params={**eqn.params, "branches": (branch, branch)})
    cj.jaxpr.eqns[cj.jaxpr.eqns.index(eqn)] = shared
    return cj


def test_cond_with_the_same_branch_twice():
    cj = _cond_with_one_branch_twice()
    text = str(cj)
    assert "branches=(@jaxpr, @jaxpr)" in text and text.count("@jaxpr = jaxpr {") == 1
    back = assert_round_trip(cj)
    (eqn,) = [e for e in back.eqns if "branches" in e.params]
    assert eqn.params["branches"][0] is eqn.params["branches"][1]


def test_shared_jaxpr_inside_a_custom_jvp_rule():
    @jx.custom_jvp
    def f(x):
        return jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jit_g(jit_g(x)) * t

    def h(x):                       # a rule's program references @g; @h references the rule
        return f(x) * 3.0
    jit_h = jx.jit(h)
    cj = jx.make_jaxpr(lambda x: jit_h(jit_h(x)))(1.0)
    text = str(cj)
    assert text.count("jaxpr=@h") == 2 and text.count("jaxpr=@g") == 2
    assert text.count("@h = jaxpr {") == 1 and text.count("@g = jaxpr {") == 1
    assert text.count("@f_jvp = {") == 1
    back = assert_round_trip(cj)
    h_jaxpr = back.eqns[0].params["jaxpr"]
    assert h_jaxpr is back.eqns[1].params["jaxpr"]
    rule = h_jaxpr.eqns[0].params["jvp_jaxpr_thunk"]
    assert isinstance(rule, Thunk)
    uses = [e.params["jaxpr"] for e in rule().eqns if e.primitive.name == "jit"]
    assert len(uses) == 2 and uses[0] is uses[1]
    fun = jx.jaxpr_as_fun(back)
    x = np.float32(0.3)
    want = jx.grad(lambda x: jit_h(jit_h(x)))(x)
    np.testing.assert_allclose(np.asarray(jx.grad(lambda x: fun(x)[0])(x)), np.asarray(want),
                               rtol=1e-6)


CYCLE = """{ lambda ; a:f32[]. let b:f32[] = jit[jaxpr=@f name="f"] a in (b,) }

@f = jaxpr { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=@g name="g"] a in (b,) }

@g = jaxpr { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=@f name="f"] a in (b,) }
"""


def test_shared_jaxpr_containing_itself_is_a_located_error():
    with pytest.raises(ParseError) as info:
        parse(CYCLE)
    e = info.value
    assert (e.line, e.column) == (5, 56)
    assert "the shared jaxpr @f contains itself (@f -> @g -> @f)" in str(e) and "expected" in str(e)
    assert str(e).endswith("\n" + " " * 55 + "^")


def test_unknown_reference_is_a_located_error():
    text = CYCLE.split("\n\n@g")[0].replace("@g", "@nowhere")
    with pytest.raises(ParseError, match="line 3, column 56: undefined reference @nowhere"):
        parse(text)


def test_cli_check_accepts_a_shared_definition(tmp_path):
    path = tmp_path / "shared.jaxpr"
    path.write_text(str(jx.make_jaxpr(twice)(1.0)) + "\n")
    run = subprocess.run([sys.executable, "-m", "jaxprc", "check", str(path)], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "ok (2 equations, verified, round-trips)" in run.stdout
