"""The canonicalize pass: exact identities, folding, control flow with known predicates,
hoisted loop carries; and a randomized differential test: random programs evaluated op by op
before and after give the same bits (NaN payloads aside, -0.0 told from 0.0).

One allowance: XLA:CPU flushes subnormal results of arithmetic to zero (of the same sign)
unless its own simplifier removed the operation first, so one program gives a subnormal or a
zero depending on how it was compiled (``x * 1.0`` op by op flushes, under jit it does not). The
comparison flushes subnormals on both sides; every other bit must agree."""
import os
import random

import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import Literal, ShapedArray, eval_jaxpr, parse
from jaxprc.lax import control_flow as cf
from jaxprc.passes import canonicalize, count_equations, run_pipeline

from test_random_programs import BF16, BOOL, F32, I32, RandomProgram, _random_inputs, for_each_case


def names(cj):
    return [e.primitive.name for e in cj.jaxpr.eqns]


def _flushed(a):
    """NaNs as one NaN, subnormals as zeros of their sign."""
    wide = a.astype(np.float64)
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    wide = np.where(np.isnan(wide), np.nan, np.where(np.abs(wide) < tiny, np.copysign(0.0, wide), wide))
    return wide.astype(a.dtype)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or a.dtype == BF16:
        a, b = _flushed(a), _flushed(b)
    return a.tobytes() == b.tobytes()


def assert_same_results(before, after, args):
    for x, y in zip(eval_jaxpr(before.jaxpr, before.consts, *args), eval_jaxpr(after.jaxpr, after.consts, *args)):
        assert same_bits(x, y), (x, y)


def test_the_issue_example_becomes_no_equation():
    cj = jaxprc.make_jaxpr(lambda x: (x * 1.0).T.T.reshape(-1).reshape(2, 3))(jnp.ones((2, 3)))
    assert len(cj.eqns) == 6
    out = run_pipeline(cj, "canonicalize", verify=True)
    assert count_equations(out) <= 1 and out.jaxpr.outvars[0] is out.jaxpr.invars[0]


@pytest.mark.parametrize("f", [lambda x: x + 0.0, lambda x: 0.0 + x, lambda x: x * 0.0, lambda x: x - (-0.0),
                               lambda x: x / 1.0 + 0.0])
def test_inexact_identities_are_left_alone(f):
    cj = jaxprc.make_jaxpr(f)(jnp.ones(3))
    out = canonicalize(cj)
    assert any(n in names(out) for n in ("add", "sub", "mul")), out
    x = np.array([-0.0, np.nan, np.inf], np.float32)
    assert_same_results(cj, out, [x])


def test_exact_identities_go():
    f = lambda x, i: (x + -0.0, x - 0.0, 1.0 * x, -(-x), x / 1.0, lax.convert_element_type(x, np.float32),
                      i * 1, i + 0, jnp.where(True, x, 2 * x), jnp.broadcast_to(jnp.broadcast_to(x, (2, 3)), (4, 2, 3)))
    cj = jaxprc.make_jaxpr(f)(jnp.ones(3), np.ones(3, np.int32))
    out = canonicalize(cj)
    assert names(out) == ["broadcast_in_dim"], out
    assert out.jaxpr.eqns[0].params["broadcast_dimensions"] == (2,)
    assert_same_results(cj, out, [np.array([-0.0, np.nan, 1e-45], np.float32), np.array([0, -5, 2**31 - 1], np.int32)])


def test_folding_makes_literals_and_small_constants_only():
    c = np.arange(4.0, dtype=np.float32)
    big = np.arange(1000.0, dtype=np.float32)
    f = lambda x: (x * jnp.sin(2.0), x[:4] + jnp.cos(c), x + jnp.cos(big), jnp.zeros(1000) + x[0])
    cj = jaxprc.make_jaxpr(f)(jnp.ones(1000))
    out = canonicalize(cj, fold_limit=64)
    assert "sin" not in names(out) and names(out).count("cos") == 1            # the big one stays
    assert sorted(np.shape(c) for c in out.consts) == [(4,), (1000,)]
    x = np.linspace(-3, 3, 1000).astype(np.float32)
    assert_same_results(cj, out, [x])
    assert "sin" in names(canonicalize(cj, fold_limit=0))


def test_control_flow_with_known_predicates_is_inlined():
    def f(x):
        a = lax.cond(True, lambda v: v + 1, lambda v: v - 1, x)
        b = lax.switch(7, [jnp.sin, jnp.cos, jnp.tan], x)            # clamped: the last branch
        c = lax.while_loop(lambda v: False, lambda v: v * 2, x)
        return a, b, c
    cj = jaxprc.make_jaxpr(f)(1.0)
    out = canonicalize(cj)
    assert sorted(names(out)) == ["add", "tan"], out
    assert_same_results(cj, out, [np.float32(0.5)])


def test_loop_invariant_carries_are_hoisted():
    def f(x):
        w = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1], c[2] * c[1]), (0, x, x))
        s = lax.scan(lambda c, a: ((c[0], c[1] + a * c[0]), c[0]), (x[0], x[0]), x)
        return w, s
    cj = jaxprc.make_jaxpr(f)(jnp.arange(3.0))
    out = canonicalize(cj)
    loop, scan = [e for e in out.jaxpr.eqns if e.primitive.name in ("while", "scan")]
    assert len(loop.params["body_jaxpr"].jaxpr.outvars) == 2 and scan.params["num_carry"] == 1
    assert_same_results(cj, out, [np.array([1.5, -0.0, np.nan], np.float32)])


def test_effects_are_never_folded_or_dropped():
    cj = parse("{ lambda ; a:f32[]. let b:f32[] = sin 1.0:f32[] in (b,) }")
    assert names(canonicalize(cj)) == []
    printed = []
    cj = jaxprc.make_jaxpr(lambda x: (jaxprc.debug.callback(lambda v: printed.append(v), 1.0), x)[1])(1.0)
    assert "debug_callback" in names(canonicalize(cj))


def test_canonicalize_before_lowering_in_jit_is_a_config_flag():
    from jaxprc.ir.dtypes import config
    f = lambda x: ((x * 1.0).T.T + -0.0, lax.cond(False, jnp.sin, jnp.cos, x))
    x = np.array([[1.5, -0.0], [np.nan, 2.0]], np.float32)
    text_off = jaxprc.jit(f).lower(x).as_text()
    expected = jaxprc.jit(f)(x)
    assert config.jaxprc_canonicalize is False
    jaxprc.config.update("jaxprc_canonicalize", True)
    try:
        text_on = jaxprc.jit(f).lower(x).as_text()
        got = jaxprc.jit(f)(x)
    finally:
        jaxprc.config.update("jaxprc_canonicalize", False)
    assert "stablehlo.transpose" in text_off and "stablehlo.transpose" not in text_on
    assert "stablehlo.case" in text_off and "stablehlo.case" not in text_on
    for a, b in zip(expected, got):
        assert same_bits(a, b)


# ---------------------------------------------------------------- differential

SPLATS = [1, 0.0, -0.0, 1.0, 2.0]


class CanonicalizableProgram(RandomProgram):
    """Random programs with the shapes canonicalize rewrites mixed in: identities with splat
    operands of every sign, double transposes/reshapes/broadcasts, conversions to the same and
    other types, selects, conds and whiles on literals, loops with invariant carries, and
    operations on literals only (folding)."""

    def step(self, pool, depth):
        if self.rng.random() < 0.5:
            return super().step(pool, depth)
        x = self.pick(pool)
        kind = self.pick(["identity", "identity", "twice", "convert", "select", "cond", "while", "fold", "scan"])
        if kind == "identity" and x.dtype != BOOL:
            c = np.asarray(self.pick(SPLATS)).astype(x.dtype)
            lit = Literal(c, ShapedArray((), x.dtype, self.coin()))
            y = lax.broadcast_in_dim_p.bind(lit, shape=x.shape, broadcast_dimensions=()) if x.shape and self.coin() else lit
            if x.shape and type(y) is Literal:
                y = lax.broadcast_in_dim_p.bind(y, shape=x.shape, broadcast_dimensions=())
            op = self.pick([lax.add_p, lax.sub_p, lax.mul_p, lax.div_p, lax.neg_p])
            if op is lax.neg_p:
                return op.bind(op.bind(x))
            return op.bind(*((y, x) if self.coin() and op in (lax.add_p, lax.mul_p) else (x, y)))
        if kind == "twice" and x.ndim == 2:
            return self.pick([lambda: lax.transpose(lax.transpose(x, (1, 0)), (1, 0)),
                              lambda: lax.reshape(lax.reshape(x, (x.size,)), x.shape[::-1]),
                              lambda: lax.broadcast_in_dim(lax.broadcast_in_dim(x, (1, *x.shape), (1, 2)),
                                                           (2, 1, *x.shape), (1, 2, 3))])()
        if kind == "convert":
            return lax.convert_element_type_p.bind(x, new_dtype=self.pick([x.dtype, F32, I32]), weak_type=self.coin())
        if kind == "select":
            pred = Literal(self.coin(), ShapedArray((), BOOL))
            if x.shape:
                pred = lax.broadcast_in_dim_p.bind(pred, shape=x.shape, broadcast_dimensions=())
            return lax.select_n_p.bind(pred, x, self.pick([v for v in pool if v.aval == x.aval]))
        if kind == "cond" and depth < self.max_depth:
            branch = lambda v: self.like(self.body([v], depth + 1), x.aval)
            return cf.switch(self.rng.randint(-1, 2), [branch, branch], x)
        if kind == "while" and depth < self.max_depth:
            return cf.while_loop(lambda c: self.coin() and c[0] < 2,
                                 lambda c: (c[0] + 1, c[1], self.like(self.body([c[1], c[2]], depth + 1), x.aval)),
                                 (np.int32(0), x, x))[self.rng.randint(1, 2)]
        if kind == "scan" and depth < self.max_depth and x.shape:
            def body(c, a):
                return (c[0], self.like(self.body([c[1], a], depth + 1), c[1].aval)), c[0]
            return cf.scan(body, (x[0], x[0]), x)[0][self.rng.randint(0, 1)]
        if kind == "fold":
            lit = self.literal(self.pick([F32, I32]), self.coin())
            return self.pick([lax.sin_p, lax.neg_p, lax.abs_p, lax.exp_p]).bind(lit) if lit.aval.dtype == F32 \
                else lax.mul_p.bind(lit, lit)
        return super().step(pool, depth)


N_DIFFERENTIAL = 40 if os.environ.get("JAXPRC_LONG_TESTS") == "1" else 15     # new seeds each run


def test_random_programs_keep_every_bit_through_canonicalize():
    def check(seed):
        cj = CanonicalizableProgram(seed, max_depth=1).program()
        out = run_pipeline(cj, "canonicalize", verify=True)
        assert count_equations(out) <= count_equations(cj)
        assert_same_results(cj, out, _random_inputs(random.Random(seed), cj.in_avals))
    for_each_case(N_DIFFERENTIAL, "canonicalize differential", check)
