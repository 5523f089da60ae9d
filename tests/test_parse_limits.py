"""Hostile program text gives a located ParseError with a bounded message, never a raw
ValueError/JSONDecodeError, and never silently changes a value."""
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.ir import ParseError, parse

BASE = str(jx.make_jaxpr(lambda x: jnp.sum(x * 2.0))(jnp.ones(3)))


def _parse_error(text) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text)
    return info.value


def test_integer_with_thousands_of_digits():
    e = _parse_error(BASE.replace("axes=(0,)", "axes=(" + "9" * 5000 + ",)"))
    assert "digits" in str(e) and e.line == 4
    e = _parse_error(BASE.replace("f32[3]", "f32[" + "9" * 5000 + "]", 1))
    assert "digits" in str(e) and e.line == 1


def test_float_literal_beyond_the_dtype_is_an_error_not_inf():
    for text in ("1e400", "1e39", "-1e39"):
        e = _parse_error(BASE.replace("2.0:f32[]", f"{text}:f32[]"))
        assert "overflows f32" in str(e)
    assert "inf:f32[]" in str(parse(BASE.replace("2.0:f32[]", "inf:f32[]")))


def test_string_params():
    # raw control characters inside a string are read as they are; bad escapes are located errors
    bad = BASE.replace("axes=(0,)", 'axes=(0,) note="a\\qb"')
    e = _parse_error(bad)
    assert "malformed string" in str(e) and e.line == 4


def test_messages_quote_a_bounded_excerpt_of_a_huge_line():
    e = _parse_error(BASE.replace("in (", "in (" + "x" * 1_000_000 + " "))
    assert len(str(e)) < 600
    lines = str(e).splitlines()
    src, caret = lines[1], lines[2]
    assert src.startswith("...") and caret.endswith("^")
    assert src[len(caret) - 1] == "d"       # the caret still points at the offending token


def _nested_cond_text(depth):
    """`depth` conds, each one's second branch holding the next (built without recursion)."""
    inner = "{ lambda ; x%d:f32[]. let  in (x%d,) }" % (depth, depth)
    for k in reversed(range(depth)):
        inner = ("{ lambda ; x%d:f32[]. let y%d:f32[] = cond[branches=("
                 "{ lambda ; z%d:f32[]. let  in (z%d,) }, %s)] 1:i32[] x%d in (y%d,) }"
                 % (k, k, k, k, inner, k, k))
    return inner


def test_1000_nested_conds_parse_print_verify_and_round_trip():
    from jaxprc.ir.equality import alpha_equivalent
    from jaxprc.ir.verify import verify
    program = parse(_nested_cond_text(1000))
    verify(program)
    text = str(program)
    again = parse(text)
    assert str(again) == text and alpha_equivalent(program, again)


def test_param_tuples_nested_deeper_than_the_limit_are_a_located_error():
    from jaxprc.ir.parser import MAX_PARAM_NESTING
    for depth in (MAX_PARAM_NESTING + 1, 1000, 100_000):
        e = _parse_error(BASE.replace("axes=(0,)", "axes=" + "(" * depth + "0" + ",)" * depth))
        assert f"nests tuples {depth} deep" in str(e) and f"at most {MAX_PARAM_NESTING}" in str(e)
        assert (e.line, e.column) == (4, BASE.splitlines()[3].index("axes") + 1)
    # at the limit the nesting is read (and then rejected by the primitive's typing rule)
    e = _parse_error(BASE.replace("axes=(0,)", "axes=" + "(" * 64 + "0" + ",)" * 64))
    assert "nests" not in str(e)


def test_eager_grad_of_a_function_nesting_conds_beyond_the_recursion_limit():
    """Eager transformations are retried whole on a large stack when they run out of frames;
    here the limit is lowered (in a fresh process) so that 60 nested conds exceed it."""
    import subprocess
    import sys
    code = """
import sys
import jaxprc as jx, jaxprc.numpy as jnp
from jaxprc import lax
def nest(k):
    if k == 0:
        return jnp.sin
    inner = nest(k - 1)
    return lambda y: lax.cond(y > -100.0, inner, lambda z: z * 2.0, y)
sys.setrecursionlimit(250)
print(float(jx.grad(nest(60))(0.5)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert abs(float(out.stdout.split()[-1]) - 0.8775825618903728) < 1e-6
