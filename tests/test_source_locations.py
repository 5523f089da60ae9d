"""Source locations in the text IR: ``loc("file.py":12:4)`` printed with debug_info (and the
CLI's --debug-info), parsed back, kept by passes, and lowered to StableHLO locations."""
import contextlib
import inspect
import io

import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import parse
from jaxprc.ir.parser import ParseError
from jaxprc.ir.printer import pp_jaxpr
from jaxprc.lowering import lower_jaxpr
from jaxprc.passes import run_pipeline
from jaxprc.tools.cli import main

HERE = __file__


def model(x):
    y = jnp.sin(x)
    return lax.transpose(lax.transpose(y, (1, 2, 0)), (1, 2, 0)) * 2.0


FIRST = inspect.getsourcelines(model)[1]
SIN_LOC = f'loc("{HERE}":{FIRST + 1}:8)'                 # column of "jnp.sin(x)" (0-based)
RETURN_LOC = f'loc("{HERE}":{FIRST + 2}:11)'            # the outer call, its inner at column 25
INNER_LOC = f'loc("{HERE}":{FIRST + 2}:25)'


def test_locations_print_with_debug_info_and_parse_back():
    cj = jaxprc.make_jaxpr(model)(jnp.ones((2, 3, 4)))
    text = pp_jaxpr(cj, debug_info=True)
    assert f"sin a {SIN_LOC}" in text and f"] b {INNER_LOC}" in text and f"] c {RETURN_LOC}" in text
    assert "loc(" not in str(cj)                           # only when asked for
    again = parse(text)
    assert pp_jaxpr(again, debug_info=True) == text and str(again) == str(cj)
    info = again.eqns[0].source_info
    assert (info.file, info.line, info.column) == (HERE, FIRST + 1, 8)


def test_locations_survive_passes_and_rewrites_inherit_them():
    cj = parse(pp_jaxpr(jaxprc.make_jaxpr(model)(jnp.ones((2, 3, 4))), debug_info=True))
    canonical = run_pipeline(cj, "canonicalize", verify=True)
    (transpose,) = [e for e in canonical.eqns if e.primitive.name == "transpose"]     # the two became one
    assert transpose.params["permutation"] == (2, 0, 1)
    assert (transpose.source_info.line, transpose.source_info.column) == (FIRST + 2, 11)     # the outer one's
    out = run_pipeline(canonical, "jvp,dce", verify=True)
    lines = {(e.source_info.line, e.source_info.column) for e in out.eqns}
    assert lines == {(FIRST + 1, 8), (FIRST + 2, 11)} and len(out.eqns) > len(canonical.eqns)
    assert parse(pp_jaxpr(out, debug_info=True)).eqns[-1].source_info.line == FIRST + 2


def test_locations_of_a_parsed_program_become_stablehlo_locations():
    text = '{ lambda ; a:f32[3]. let b:f32[3] = sin a loc("user.py":12:4) c:f32[3] = cos b in (c,) }'
    module = lower_jaxpr(parse(text)).as_text(debug_info=True)
    assert 'loc("user.py":12:4)' in module and 'loc("sin"(' in module


def test_a_malformed_location_is_a_located_parse_error():
    with pytest.raises(ParseError) as info:
        parse('{ lambda ; a:f32[]. let b:f32[] = sin a loc("user.py":x:4) in (b,) }')
    assert info.value.line == 1


def test_cli_debug_info(tmp_path):
    path = tmp_path / "prog.jaxpr"
    path.write_text('{ lambda ; a:f32[3]. let b:f32[3] = sin a loc("user.py":12:4) in (b,) }\n')
    for argv, expected in ((["opt", str(path), "--passes", "jvp", "--debug-info"], 'cos a loc("user.py":12:4)'),
                           (["opt", str(path), "--passes", "jvp"], "cos a\n"),
                           (["lower", str(path), "--debug-info"], 'loc("user.py":12:4)')):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        assert expected in out.getvalue() and ("--debug-info" in argv or "loc(" not in out.getvalue())
    np.testing.assert_allclose(jaxprc.jit(jaxprc.jaxpr_as_fun(parse(path.read_text())))(np.ones(3, np.float32))[0],
                               np.sin(np.ones(3)), rtol=1e-6)
