"""The passes on random programs (hypothesis), against mathematical oracles.

Programs come from tests/programs.py: smooth float programs over elementwise
math, broadcasting, reductions, dot_general, structural ops, nested jit calls
and cond / scan / fori_loop / while_loop. Properties:

- jvp equals central finite differences (float64);
- ⟨vjp(ct), t⟩ = ⟨ct, jvp(t)⟩ for linearize + transpose (float64);
- vmap equals stacking per-example results, for random in_axes/out_axes;
- dce, cse and inline preserve results;
- every pass output verifies and survives the text round trip (alpha-equivalent).

Compiling dominates the cost, so each example evaluates everything it compares
in one compiled program (``run_together``).
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import jaxprc as jx
from jaxprc.ir import eval_jaxpr, trace_to_jaxpr
from jaxprc.ir.equality import alpha_equivalent
from jaxprc.ir.parser import parse
from jaxprc.ir.tracing import get_aval
from jaxprc.ir.verify import verify
from jaxprc.passes.cse import cse
from jaxprc.passes.dce import dce
from jaxprc.passes.inline import inline
from jaxprc.passes.jvp import jvp_jaxpr
from jaxprc.passes.partial_eval import linearize_jaxpr
from jaxprc.passes.registry import run_pipeline
from jaxprc.passes.transpose import transpose_jaxpr
from jaxprc.passes.vmap import vmap_jaxpr

from programs import SmoothProgram

# 25 programs a test under JAXPRC_LONG_TESTS=1 (nightly), 10 otherwise
SETTINGS = settings(max_examples=25 if os.environ.get("JAXPRC_LONG_TESTS") == "1" else 10, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
SEEDS = st.integers(0, 2**31 - 1)


@pytest.fixture
def x64():
    old = jx.config.jax_enable_x64
    jx.config.update("jax_enable_x64", True)
    yield
    jx.config.update("jax_enable_x64", old)


def checked(cj):
    """``cj`` after checking that it verifies and that its text parses back to an equal program."""
    verify(cj)
    back = parse(str(cj))
    assert alpha_equivalent(back, cj), f"text round trip changed the program:\n{cj}\n{back}"
    return cj


def run_together(fun, args):
    """``fun`` (flat arrays -> flat arrays, built from eval_jaxpr calls) traced and compiled once."""
    cj = trace_to_jaxpr(lambda *a: list(fun(*a)), [get_aval(a) for a in args])
    return [np.asarray(o) for o in jx.jit(jx.jaxpr_as_fun(cj))(*args)]


def call(cj, *args):
    return eval_jaxpr(cj.jaxpr, cj.consts, *args)


def random_like(rng, avals):
    return [rng.standard_normal(a.shape).astype(a.dtype) for a in avals]


# ---------------------------------------------------------------- jvp

@SETTINGS
@given(SEEDS)
def test_jvp_matches_central_differences(x64, seed):
    gen = SmoothProgram(seed, np.float64)
    cj = checked(gen.program())
    xs = gen.inputs(cj)
    ts = random_like(np.random.default_rng(seed), cj.in_avals)
    jvp_cj, out_nz = jvp_jaxpr(cj, [True] * len(xs), instantiate=True)
    checked(jvp_cj)
    eps = 1e-6
    plus = [x + eps * t for x, t in zip(xs, ts)]
    minus = [x - eps * t for x, t in zip(xs, ts)]
    n, k = len(xs), len(cj.out_avals)

    def fun(*a):
        return call(cj, *a[:n]) + call(cj, *a[n:2 * n]) + call(jvp_cj, *a[2 * n:])
    outs = run_together(fun, plus + minus + xs + ts)
    f_plus, f_minus, primals, tangents = outs[:k], outs[k:2 * k], outs[2 * k:3 * k], outs[3 * k:]
    assert all(out_nz)
    for p, m, t in zip(f_plus, f_minus, tangents):
        fd = (p - m) / (2 * eps)
        np.testing.assert_allclose(t, fd, rtol=1e-5, atol=1e-6 * (1 + np.abs(fd).max(initial=0)),
                                   err_msg=str(cj))


# ---------------------------------------------------------------- vjp

@SETTINGS
@given(SEEDS)
def test_vjp_is_the_transpose_of_jvp(x64, seed):
    gen = SmoothProgram(seed, np.float64, allow_while=False)
    cj = checked(gen.program())
    n = len(cj.in_avals)
    known, lin, out_nz, n_res = linearize_jaxpr(cj, [True] * n)
    checked(known), checked(lin)
    transposed, ct_nz = transpose_jaxpr(lin, [False] * n_res + [True] * n)
    checked(transposed)
    assert all(ct_nz)
    rng = np.random.default_rng(seed)
    xs, ts = gen.inputs(cj), random_like(rng, cj.in_avals)
    out_avals = [a for a, nz in zip(cj.out_avals, out_nz) if nz]
    cts = random_like(rng, out_avals)

    def fun(*a):
        outs = call(known, *a[:n])
        res = outs[len(cj.out_avals):]
        jvp_out = call(lin, *res, *a[n:2 * n])
        vjp_out = call(transposed, *res, *a[2 * n:])
        return list(jvp_out) + list(vjp_out)
    outs = run_together(fun, xs + ts + cts)
    jvp_out, vjp_out = outs[:len(cts)], outs[len(cts):]
    lhs = sum(np.vdot(c, t) for c, t in zip(vjp_out, ts))
    rhs = sum(np.vdot(c, t) for c, t in zip(cts, jvp_out))
    assert np.isclose(lhs, rhs, rtol=1e-9, atol=1e-9), (lhs, rhs, str(cj))


# ---------------------------------------------------------------- vmap

@SETTINGS
@given(SEEDS)
def test_vmap_matches_stacked_examples(seed):
    gen = SmoothProgram(seed, np.float32)
    cj = checked(gen.program())
    rng = np.random.default_rng(seed)
    size = 2
    in_axes = [rng.choice([0, None, -1]) if a.ndim else rng.choice([0, None]) for a in cj.in_avals]
    if all(a is None for a in in_axes):
        in_axes[0] = 0
    in_axes = [None if a is None else int(a) for a in in_axes]
    out_axes = [int(rng.choice([0, -1])) for _ in cj.out_avals]
    batched = checked(vmap_jaxpr(cj, tuple(in_axes), size, tuple(out_axes)))
    examples = [gen.inputs(cj) for _ in range(size)]
    args = [x if d is None else np.stack([ex[i] for ex in examples], d)
            for i, (x, d) in enumerate(zip(examples[0], in_axes))]
    per_example = [[x if d is None else ex[i] for i, (x, d) in enumerate(zip(examples[0], in_axes))]
                   for ex in examples]
    n, k = len(args), len(cj.out_avals)

    def fun(*a):
        outs = list(call(batched, *a[:n]))
        for b in range(size):
            outs += call(cj, *a[n * (b + 1):n * (b + 2)])
        return outs
    outs = run_together(fun, args + [x for ex in per_example for x in ex])
    for i, d in enumerate(out_axes):
        expected = np.stack([outs[k * (b + 1) + i] for b in range(size)], d)
        np.testing.assert_allclose(outs[i], expected, rtol=2e-5, atol=2e-5, err_msg=str(batched))


# ---------------------------------------------------------- dce, cse, inline

@SETTINGS
@given(SEEDS)
def test_dce_cse_inline_preserve_results(seed):
    gen = SmoothProgram(seed, np.float32)
    cj = checked(gen.program())
    variants = [checked(dce(cj)), checked(cse(cj)), checked(inline(cj)),
                checked(run_pipeline(cj, "inline,cse,dce"))]
    assert len(variants[0].jaxpr.eqns) <= len(cj.jaxpr.eqns)
    assert not any(e.primitive.name == "jit" for e in variants[2].jaxpr.eqns)
    xs = gen.inputs(cj)
    k = len(cj.out_avals)
    outs = run_together(lambda *a: [o for v in [cj, *variants] for o in call(v, *a)], xs)
    for i in range(k, len(outs)):
        np.testing.assert_allclose(outs[i], outs[i % k], rtol=1e-6, atol=1e-6, err_msg=str(cj))


def test_cse_merges_repeated_work_and_dce_drops_it():
    """The generator's programs give the passes work: some shrink under cse and dce."""
    shrunk_cse = shrunk_dce = 0
    for seed in range(40):
        cj = SmoothProgram(seed).program()
        shrunk_cse += len(cse(cj).jaxpr.eqns) < len(cj.jaxpr.eqns)
        shrunk_dce += len(dce(cj).jaxpr.eqns) < len(cj.jaxpr.eqns)
    assert shrunk_cse >= 5 and shrunk_dce >= 5, (shrunk_cse, shrunk_dce)
