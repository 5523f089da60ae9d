"""Random well-typed programs (hypothesis): they verify, and the text round trip is exact.

Programs are traced from random choices: elementwise math, comparisons,
conversions, select_n, reductions, broadcasts, transposes and, nested up to
depth 2, cond / while / scan bodies that are random programs themselves.
For each: verify(), ``print(parse(print(j))) == print(j)``, alpha-equivalence
and equal structural hashes; a mutated type in the text is a located error.

Hypothesis draws one seed per program and the choices come from a seeded
``random.Random``: drawing each choice through hypothesis costs more than the
checks themselves, and thousands of programs must run in seconds.
"""
import random

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from jaxprc import lax
from jaxprc.ir import Literal, ShapedArray, trace_to_jaxpr
from jaxprc.lax import control_flow as cf
from jaxprc.ir.parser import ParseError, parse
from jaxprc.lax import reductions
from roundtrip import assert_round_trip

F32, I32, BOOL, BF16 = (np.dtype(d) for d in ("float32", "int32", "bool", ml_dtypes.bfloat16))
SHAPES = [(), (2,), (2, 3)]
FLOAT_UNARY = [lax.sin_p, lax.cos_p, lax.exp_p, lax.log_p, lax.tanh_p, lax.neg_p,
               lax.sqrt_p, lax.abs_p, lax.floor_p, lax.logistic_p, lax.square_p]
INT_UNARY = [lax.neg_p, lax.abs_p, lax.not_p, lax.sign_p, lax.population_count_p]
ARITH = [lax.add_p, lax.sub_p, lax.mul_p, lax.div_p, lax.max_p, lax.min_p]
COMPARE = [lax.lt_p, lax.le_p, lax.eq_p, lax.ne_p, lax.gt_p, lax.ge_p]
SPECIAL_FLOATS = [0.0, -0.0, 1.5, -2.0, float("inf"), float("-inf"), float("nan"), 1e-30, 3.0e38]

SETTINGS = settings(max_examples=2500, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


class RandomProgram:
    """Draws one program's operations while it is being traced."""

    def __init__(self, seed: int, max_depth: int = 2):
        self.rng, self.max_depth = random.Random(seed), max_depth

    def pick(self, xs):
        return self.rng.choice(xs)

    def coin(self) -> bool:
        return self.rng.random() < 0.5

    def literal(self, dtype, weak: bool):
        if dtype == BOOL:
            value = self.coin()
        elif dtype == I32:
            value = self.rng.randint(-2**31, 2**31 - 1)
        else:
            value = self.pick(SPECIAL_FLOATS)
        return Literal(value, ShapedArray((), dtype, weak))

    def body(self, args, depth: int, n_steps: int | None = None):
        pool = list(args)
        for _ in range(n_steps if n_steps is not None else self.rng.randint(1, 5)):
            pool.append(self.step(pool, depth))
        return pool

    def like(self, pool, aval):
        """A value of ``aval``'s shape and dtype from the pool (sub-jaxprs return one)."""
        return self.pick([v for v in pool if (v.shape, v.dtype) == (aval.shape, aval.dtype)])

    def step(self, pool, depth: int):
        x = self.pick(pool)
        kinds = ["unary", "binary", "binary", "compare", "convert", "select", "reduce", "broadcast"]
        if x.ndim == 2:
            kinds.append("transpose")
        if depth < self.max_depth:
            kinds += ["cond", "while", "scan"]
        kind = self.pick(kinds)
        same = [v for v in pool if v.aval.shape == x.shape and v.dtype == x.dtype]
        if kind == "unary":
            ops = FLOAT_UNARY if x.dtype in (F32, BF16) else INT_UNARY if x.dtype == I32 else [lax.not_p]
            return self.pick(ops).bind(x)
        if kind in ("binary", "compare"):
            y = self.pick(same)
            if x.shape == () and self.coin():
                y = self.literal(x.dtype, self.coin())
            if kind == "compare":
                return self.pick(COMPARE).bind(x, y)
            ops = ARITH if x.dtype != BOOL else [lax.and_p, lax.or_p, lax.xor_p]
            return self.pick(ops).bind(x, y)
        if kind == "convert":
            new = self.pick([F32, I32, BOOL, BF16])
            return lax.convert_element_type_p.bind(x, new_dtype=new, weak_type=self.coin())
        if kind == "select":
            preds = [v for v in pool if v.dtype == BOOL and v.shape in ((), x.shape)]
            pred = self.pick(preds) if preds else lax.eq_p.bind(x, x)
            return lax.select_n_p.bind(pred, x, self.pick(same))
        if kind == "reduce":
            if x.dtype == BOOL or x.ndim == 0:
                return lax.neg_p.bind(x) if x.dtype != BOOL else lax.not_p.bind(x)
            axes = tuple(a for a in range(x.ndim) if self.coin())
            return reductions.reduce_sum_p.bind(x, axes=axes)
        if kind == "broadcast":
            if x.ndim >= 2:
                return lax.reshape(x, (x.size,))
            return lax.broadcast_in_dim_p.bind(x, shape=(2, *x.shape),
                                               broadcast_dimensions=tuple(range(1, x.ndim + 1)))
        if kind == "transpose":
            return lax.transpose_p.bind(x, permutation=(1, 0))
        if kind == "cond":
            pred = lax.lt_p.bind(x, x) if x.dtype != BOOL else lax.not_p.bind(x)
            pred = pred if pred.shape == () else reductions.reduce_or_p.bind(pred, axes=tuple(range(x.ndim)))
            branch = lambda v: self.like(self.body([v], depth + 1), x.aval)
            return cf.cond(pred, branch, branch, x)
        if kind == "while":
            def body_fun(c):
                i, v = c
                return lax.add_p.bind(i, np.int32(1)), self.like(self.body([v], depth + 1), x.aval)
            return cf.while_loop(lambda c: lax.lt_p.bind(c[0], np.int32(3)), body_fun,
                                 (np.int32(0), x))[1]
        # scan over a stack of two copies of x, carrying a scalar-or-x value
        xs = lax.broadcast_in_dim_p.bind(x, shape=(2, *x.shape),
                                         broadcast_dimensions=tuple(range(1, x.ndim + 1)))

        def scan_body(c, a):
            pool = self.body([c, a], depth + 1)
            return self.like(pool, x.aval), self.pick(pool)
        return cf.scan(scan_body, x, xs)[self.rng.randint(0, 1)]

    def program(self):
        n_in = self.rng.randint(1, 3)
        avals = [ShapedArray(self.pick(SHAPES), self.pick([F32, F32, I32, BOOL, BF16]),
                             self.coin()) for _ in range(n_in)]

        def fun(*args):
            pool = self.body(args, 0)
            outs = [self.pick(pool) for _ in range(self.rng.randint(1, 3))]
            if self.rng.randint(0, 9) == 0:
                outs.append(self.literal(F32, True))
            return outs
        return trace_to_jaxpr(fun, avals)


@SETTINGS
@given(st.integers(0, 2**32))
def test_random_programs_verify_and_round_trip(seed):
    assert_round_trip(RandomProgram(seed).program())


@settings(SETTINGS, max_examples=300)
@given(st.integers(0, 2**32))
def test_mutated_output_type_is_a_located_error(seed):
    cj = RandomProgram(seed, max_depth=1).program()
    if not cj.eqns:
        return
    v = cj.eqns[-1].outvars[0]
    wrong = v.aval = ShapedArray((7, *v.aval.shape), v.aval.dtype)
    try:
        parse(str(cj))
    except ParseError as e:
        line = str(cj).split("\n")[e.line - 1]
        assert line[e.column - 1:].startswith(wrong.str_short() + " "), str(e)
        assert f" = {cj.eqns[-1].primitive.name}" in line, str(e)
        assert f"declared type {wrong.str_short()}" in str(e)
    else:
        raise AssertionError("a wrongly typed binder was accepted")


def _random_inputs(rng: random.Random, avals):
    def value(aval):
        if aval.dtype == BOOL:
            return np.array([rng.random() < 0.5 for _ in range(int(np.prod(aval.shape)))]).reshape(aval.shape)
        if aval.dtype == I32:
            return np.array([rng.randint(-100, 100) for _ in range(int(np.prod(aval.shape)))],
                            np.int32).reshape(aval.shape)
        pool = SPECIAL_FLOATS + [rng.uniform(-3, 3) for _ in range(4)]
        return np.array([rng.choice(pool) for _ in range(int(np.prod(aval.shape)))],
                        aval.dtype).reshape(aval.shape)
    return [value(a) for a in avals]


@settings(SETTINGS, max_examples=60)
@given(st.integers(0, 2**32))
def test_random_programs_give_the_same_numbers_eagerly_and_under_jit(seed):
    """Op-by-op evaluation (one executable per primitive) equals one XLA compilation of the
    whole program; bfloat16 chains may keep float32 intermediates under jit, hence a tolerance."""
    from jaxprc import jaxpr_as_fun, jit
    from jaxprc.ir import eval_jaxpr
    cj = RandomProgram(seed, max_depth=1).program()
    args = _random_inputs(random.Random(seed), cj.in_avals)
    eager = eval_jaxpr(cj.jaxpr, cj.consts, *args)
    compiled = jit(jaxpr_as_fun(cj))(*args)
    for e, c, aval in zip(eager, compiled, cj.out_avals):
        e, c = np.asarray(e), np.asarray(c)
        assert e.dtype == c.dtype == aval.dtype and e.shape == c.shape == aval.shape
        if aval.dtype in (F32, BF16):
            tol = 2e-2 if BF16 in [a.dtype for a in cj.in_avals] or aval.dtype == BF16 else 1e-5
            np.testing.assert_allclose(c.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(c, e)
