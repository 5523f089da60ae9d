"""The IR-to-IR passes: registry and pipelines, dce, cse, inline, jvp symbolic zeros, transpose.

Each rewriting pass must preserve results (evaluated before and after) and produce a
program that verifies when the verifier is available."""
import re

import numpy as np
import pytest

import jaxprc as jx
from jaxprc import lax
from jaxprc.ir import ShapedArray, eval_jaxpr, trace_to_jaxpr
from jaxprc.passes.cse import cse
from jaxprc.passes.dce import dce
from jaxprc.passes.inline import inline
from jaxprc.passes.jvp import jvp_jaxpr
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprTypeError, Var
from jaxprc.passes.registry import (PassError, PassVerificationError, PipelineError, parse_pipeline,
                                    register_pass, run_pipeline)
from jaxprc.passes.transpose import transpose_jaxpr

F3 = ShapedArray((3,), np.float32)
X = np.array([0.5, -1.0, 2.0], np.float32)


def verify(cj):
    try:
        from jaxprc.ir.verify import verify as ir_verify
    except ImportError:
        return
    ir_verify(cj)


def run(cj, *args):
    return [np.asarray(o) for o in eval_jaxpr(cj.jaxpr, cj.consts, *args)]


def prims(cj):
    return [e.primitive.name for e in cj.jaxpr.eqns]


def test_pipeline_parsing_and_observer():
    assert parse_pipeline("jvp,dce") == [("jvp", {}), ("dce", {})]
    register_pass("_test_opts", lambda cj, **kw: cj)
    assert parse_pipeline("_test_opts:axis_size=4:in_axes=(0,None),dce") == [
        ("_test_opts", {"axis_size": 4, "in_axes": (0, None)}), ("dce", {})]
    with pytest.raises(KeyError, match="Unknown pass 'nope'"):
        parse_pipeline("dce,nope")
    seen = []
    cj = trace_to_jaxpr(lambda x: [lax.sin(x)], [F3])
    out = run_pipeline(cj, "jvp,dce,cse", observe=lambda name, j: seen.append(name))
    assert seen == ["jvp", "dce", "cse"]
    verify(out)
    primal, tangent = run(out, X, np.ones(3, np.float32))
    np.testing.assert_allclose(tangent, np.cos(X), rtol=1e-6)


def _break_types(cj):
    """A "pass" whose result is ill-typed: the first equation's output is declared i32[4]."""
    j = cj.jaxpr
    eqn = j.eqns[0]
    bad = Var(ShapedArray((4,), np.int32))
    outvars = [bad if v is eqn.outvars[0] else v for v in j.outvars]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, outvars, [eqn.replace(outvars=[bad])] + j.eqns[1:]),
                       cj.consts)


def test_run_pipeline_names_the_pass_that_breaks_typing():
    register_pass("_test_break_types", _break_types)
    cj = trace_to_jaxpr(lambda x: [lax.sin(x)], [F3])
    seen = []
    with pytest.raises(PassVerificationError, match=r"pass '_test_break_types' produced an "
                       r"ill-typed program: .*sin") as info:
        run_pipeline(cj, "dce,_test_break_types,cse", observe=lambda name, j: seen.append(name),
                     verify=True)
    assert info.value.label == "_test_break_types" and seen == ["dce"]
    assert isinstance(info.value, JaxprTypeError)
    # the config flag (on in the test suite) is the default
    with pytest.raises(PassVerificationError, match="_test_break_types"):
        run_pipeline(cj, "_test_break_types")


def test_verification_can_be_switched_off():
    register_pass("_test_break_types", _break_types)
    cj = trace_to_jaxpr(lambda x: [lax.sin(x)], [F3])
    out = run_pipeline(cj, "_test_break_types", verify=False)
    assert out.jaxpr.outvars[0].aval == ShapedArray((4,), np.int32)
    assert jx.config.read("jaxprc_verify_passes") is True
    jx.config.update("jaxprc_verify_passes", False)
    try:
        run_pipeline(cj, "_test_break_types")         # the flag off: no verification
    finally:
        jx.config.update("jaxprc_verify_passes", True)


@pytest.mark.parametrize("spec, message", [
    ("", "empty pipeline"),
    (",,,", "empty pipeline"),
    ("   ", "empty pipeline"),
    ("dce,,cse", "empty step"),
    ("dce,", "empty step"),
    ([], "empty pipeline"),
    ("nope", "Unknown pass 'nope'; registered passes: .*dce"),
    ("dce:foo=1", "pass 'dce' has no option 'foo'.*takes no options"),
    ("vmap:axis_sise=4", "pass 'vmap' has no option 'axis_sise'.*axis_size, in_axes, out_axes"),
    ("vmap:4", "option '4' of pass 'vmap'.*key=value"),
    ("vmap:axis_size=2:axis_size=3", "given twice"),
    (":axis_size=2", "no pass name"),
    ([("vmap", {"bad": 1})], "no option 'bad'"),
    ([42], "not a pass name"),
])
def test_degenerate_pipelines_raise(spec, message):
    cj = trace_to_jaxpr(lambda x: [lax.sin(x)], [F3])
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(spec)
    with pytest.raises(PipelineError, match=message):
        run_pipeline(cj, spec)


@pytest.mark.parametrize("spec, message", [
    ("vmap:axis_size=-1", "axis_size .*must be a non-negative integer, got -1"),
    ("vmap:axis_size=2.5", "must be a non-negative integer, got 2.5"),
    ("vmap", "needs axis_size"),
    ("vmap:axis_size=2:in_axes=5", "in_axes entry 5 is out of range"),
])
def test_a_failing_pass_is_named(spec, message):
    cj = trace_to_jaxpr(lambda x: [lax.sin(x)], [F3])
    with pytest.raises(PassError, match=re.escape(f"pass '{spec}' failed: ValueError: ") + f".*{message}") as info:
        run_pipeline(cj, spec)
    assert isinstance(info.value.__cause__, ValueError)


def test_dce_removes_unused_equations_and_keeps_results():
    def f(x):
        lax.exp(x)                      # dead
        return [lax.sin(x)]
    cj = trace_to_jaxpr(f, [F3])
    out = dce(cj)
    verify(out)
    assert prims(out) == ["sin"]
    np.testing.assert_allclose(run(out, X)[0], run(cj, X)[0])


def test_dce_prunes_scan_carry_and_cond_outputs():
    def f(x):
        def body(c, xi):
            a, b = c
            return (lax.add(a, xi), lax.mul(b, xi)), lax.sin(xi)
        (a, b), ys = lax.scan(body, (np.float32(0), np.float32(1)), x)
        r = lax.cond(lax.gt(a, 0.0), lambda v: (lax.sin(v), lax.cos(v)), lambda v: (v, v), a)
        return [a, r[0]]
    cj = trace_to_jaxpr(f, [F3])
    out = dce(cj)
    verify(out)
    scan_eqn = next(e for e in out.jaxpr.eqns if e.primitive.name == "scan")
    assert len(scan_eqn.outvars) == 1 and scan_eqn.params["num_carry"] == 1
    cond_eqn = next(e for e in out.jaxpr.eqns if e.primitive.name == "cond")
    assert len(cond_eqn.outvars) == 1
    for a, b in zip(run(out, X), run(cj, X)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_cse_merges_equal_equations():
    def f(x):
        return [lax.add(lax.sin(x), lax.sin(x))]
    cj = trace_to_jaxpr(f, [F3])
    out = cse(cj)
    verify(out)
    assert prims(out) == ["sin", "add"]
    np.testing.assert_allclose(run(out, X)[0], 2 * np.sin(X), rtol=1e-6)


def test_inline_flattens_nested_jit_calls():
    inner = jx.jit(lambda y: lax.mul(lax.sin(y), y))
    outer = jx.jit(lambda y: inner(lax.add(y, 1.0)))
    cj = trace_to_jaxpr(lambda x: [outer(x)], [F3])
    assert "jit" in prims(cj)
    out = inline(cj)
    verify(out)
    assert "jit" not in prims(out)
    np.testing.assert_allclose(run(out, X)[0], run(cj, X)[0], rtol=1e-6)


def test_jvp_symbolic_zeros_are_not_materialised():
    def f(x, y):
        return [lax.mul(lax.sin(x), y), lax.exp(y)]
    cj = trace_to_jaxpr(f, [F3, F3])
    out, out_nz = jvp_jaxpr(cj, [True, False], instantiate=False)
    verify(out)
    assert out_nz == [True, False]          # exp(y) has no tangent: y's is zero
    assert len(out.in_avals) == 3 and len(out.out_avals) == 3
    assert "broadcast_in_dim" not in prims(out)


def test_transpose_is_the_adjoint_of_linear_maps():
    rng = np.random.default_rng(1)
    a = ShapedArray((4, 3), np.float32)

    def f(x):
        y = lax.pad(lax.transpose(x, (1, 0)), np.float32(0), [(1, 0, 1), (0, 2, 0)])
        z = lax.concatenate([lax.slice(y, (0, 1), (5, 5), (2, 1)), lax.rev(lax.slice(y, (0, 0), (3, 4)), (0,))], 0)
        return [lax.mul(lax.reduce_sum(z, (1,)), 2.0), lax.cumsum(lax.reshape(x, (12,)), 0)]
    cj = trace_to_jaxpr(f, [a])
    t, _ = transpose_jaxpr(cj, [True])
    verify(t)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    outs = run(cj, x)
    cts = [rng.standard_normal(o.shape).astype(np.float32) for o in outs]
    (ct_x,) = run(t, *cts)
    lhs = sum(float(np.vdot(c, o)) for c, o in zip(cts, outs))
    np.testing.assert_allclose(lhs, float(np.vdot(ct_x, x)), rtol=1e-4)


def test_grad_program_is_small_and_verifies():
    def loss(w, x):
        return lax.reduce_sum(lax.tanh(lax.dot_general(x, w, (((1,), (0,)), ((), ())))), (0, 1))
    cj = jx.make_jaxpr(jx.grad(loss))(np.ones((3, 2), np.float32), np.ones((4, 3), np.float32))
    verify(cj)
    assert len(dce(cse(cj)).jaxpr.eqns) == len(cj.jaxpr.eqns)
