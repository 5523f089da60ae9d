"""Fuzzing: random well-typed programs and mutated program texts, a new seed every run.

Programs are traced from random choices: elementwise math, comparisons,
conversions, select_n, reductions, broadcasts, transposes and, nested up to
depth 2, cond / while / scan bodies that are random programs themselves.
Each verifies and round-trips through text exactly; op-by-op evaluation equals
one XLA compilation. Mutated texts (numbers, dtypes, shapes, names, params and
characters changed, lines dropped or doubled) either raise a located
ParseError or parse into a program that verifies, round-trips and lowers.

Every run draws its cases from one run seed (printed in the pytest header and
in every failure); ``JAXPRC_FUZZ_SEED=<seed>`` replays a run. A run checks a quarter of the
counts below (new seeds each run, so the cases add up over runs); ``JAXPRC_LONG_TESTS=1`` (the
nightly run) checks them all, more than 10,000 cases.
"""
import os
import random
import re
import secrets

import ml_dtypes
import numpy as np

from jaxprc import lax
from jaxprc.ir import Literal, ShapedArray, trace_to_jaxpr
from jaxprc.lax import control_flow as cf
from jaxprc.ir.parser import ParseError, parse
from jaxprc.ir.verify import verify
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

RUN_SEED = int(os.environ.get("JAXPRC_FUZZ_SEED") or secrets.randbits(32))   # conftest sets it
SHARE = 1 if os.environ.get("JAXPRC_LONG_TESTS") == "1" else 4
N_PROGRAMS, N_MUTANTS, N_RETYPED, N_EXECUTED = 5000 // SHARE, 5000 // SHARE, 300 // SHARE, 60 // SHARE


def for_each_case(n: int, name: str, check):
    """``check(seed)`` for ``n`` seeds drawn from the run seed; a failure names the case."""
    rng = random.Random(f"{RUN_SEED}:{name}")
    for i in range(n):
        seed = rng.getrandbits(32)
        try:
            check(seed)
        except Exception as e:
            raise AssertionError(f"{name} case {i} (seed {seed}) failed: {type(e).__name__}: {e}\n"
                                 f"replay this run with JAXPRC_FUZZ_SEED={RUN_SEED}") from e


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


def test_random_programs_verify_and_round_trip():
    for_each_case(N_PROGRAMS, "round trip", lambda seed: assert_round_trip(RandomProgram(seed).program()))


def test_mutated_output_type_is_a_located_error():
    def check(seed):
        cj = RandomProgram(seed, max_depth=1).program()
        with_outputs = [e for e in cj.eqns if e.outvars]     # (an effect may have none)
        if not with_outputs:
            return
        eqn = with_outputs[-1]
        v = eqn.outvars[0]
        wrong = v.aval = ShapedArray((7, *v.aval.shape), v.aval.dtype)
        try:
            parse(str(cj))
        except ParseError as e:
            line = str(cj).split("\n")[e.line - 1]
            assert line[e.column - 1:].startswith(wrong.str_short() + " "), str(e)
            assert f" = {eqn.primitive.name}" in line, str(e)
            assert f"declared type {wrong.str_short()}" in str(e)
        else:
            raise AssertionError("a wrongly typed binder was accepted")
    for_each_case(N_RETYPED, "retyped output", check)


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


def _divides_by_a_literal_of_subnormal_reciprocal(cj) -> bool:
    """XLA rewrites ``x / c`` for a constant ``c`` as ``x * (1 / c)``, and XLA:CPU flushes a
    subnormal ``1 / c`` to zero: under jit ``x / 3e38`` is 0 (NaN for inf), where the eager op
    (``c`` a runtime operand) divides exactly. JAX's jit gives the same 0 and NaN
    (tests_oracle/test_edges_oracle.py checks that), so such programs are not compared here."""
    divisors = re.findall(r"\bdiv \S+ ([-+0-9.e]+|-?inf|nan):", str(cj))
    return any(2.0 ** 126 < abs(float(d)) < float("inf") for d in divisors)


def test_random_programs_give_the_same_numbers_eagerly_and_under_jit():
    """Op-by-op evaluation (one executable per primitive) equals one XLA compilation of the
    whole program; bfloat16 chains may keep float32 intermediates under jit, hence a tolerance."""
    from jaxprc import jaxpr_as_fun, jit
    from jaxprc.ir import eval_jaxpr

    def check(seed):
        cj = RandomProgram(seed, max_depth=1).program()
        if _divides_by_a_literal_of_subnormal_reciprocal(cj):
            return
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
    for_each_case(N_EXECUTED, "eager vs jit", check)


# ------------------------------------------------------------------ mutated program texts

HOSTILE_NUMBERS = ["0", "-1", "1", "2", "7", "-0.0", "1.5", "2147483648", "-2147483649",
                   "99999999999999999999999", "1e400", "1e39", "nan", "inf", "-inf", "3.0e38"]
DTYPES = ["f32", "i32", "bool", "bf16", "f16", "f64", "i8", "u8", "u32", "i64", "c64", "f8"]
SHAPE_TEXTS = ["[]", "[2]", "[3]", "[2,3]", "[3,2]", "[0]", "[1,2,3]", "[-1]", "[2,]"]
TOKENS = ["(", ")", "{", "}", "[", "]", ",", "=", ":", ";", ".", "let", "in", "lambda", "cond",
          "f32[]", "i32[2]", "_", "x", "a", "0", "1e400", "\\", "\"", "#", "@", "\x00", "é", "\n"]
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:e[+-]?\d+)?")
DTYPE = re.compile(r"\b(?:f32|i32|bool|bf16)(?=\[)")
SHAPE = re.compile(r"(?<=[a-z0-9])\[[0-9,]*\]")
NAME = re.compile(r"\b[a-z]{1,2}\b")
PRIMITIVE = re.compile(r"(?<== )[a-z_]+(?=[\[ ])")


def _replace_one(rng, text, pattern, choices):
    spans = [m.span() for m in pattern.finditer(text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    new = rng.choice(choices) if isinstance(choices, list) else choices(text)
    return text[:a] + new + text[b:]


def mutate(rng: random.Random, text: str) -> str:
    """One to three random edits of a program text, from typos to type and structure changes."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(9)
        if kind == 0:
            text = _replace_one(rng, text, NUMBER, HOSTILE_NUMBERS)
        elif kind == 1:
            text = _replace_one(rng, text, DTYPE, DTYPES)
        elif kind == 2:
            text = _replace_one(rng, text, SHAPE, SHAPE_TEXTS)
        elif kind == 3:
            names = NAME.findall(text) or ["a"]
            text = _replace_one(rng, text, NAME, names)
        elif kind == 4:
            prims = PRIMITIVE.findall(text) or ["sin"]
            text = _replace_one(rng, text, PRIMITIVE, prims + ["add", "cond", "scan", "nope"])
        elif kind == 5:
            a = rng.randrange(len(text) + 1)
            text = text[:a] + text[a + rng.randint(1, 8):]
        elif kind == 6:
            a = rng.randrange(len(text) + 1)
            text = text[:a] + rng.choice(TOKENS) + text[a:]
        else:
            lines = text.split("\n")
            k = rng.randrange(len(lines))
            if kind == 7:
                del lines[k]
            else:
                lines.insert(k, lines[rng.randrange(len(lines))])
            text = "\n".join(lines)
    return text


def test_mutated_texts_parse_to_verified_programs_or_give_located_errors():
    """No mutant crashes, raises a raw error or parses into a program the verifier rejects; the
    ones that parse also print back identically and lower to StableHLO."""
    from jaxprc.engine.lowering import lower_jaxpr

    def check(seed):
        rng = random.Random(seed)
        text = mutate(rng, str(RandomProgram(seed, max_depth=rng.randint(0, 2)).program()))
        try:
            program = parse(text)
        except ParseError as e:
            assert 1 <= e.line <= text.count("\n") + 2 and e.column >= 1, (e.line, e.column)
            assert len(str(e)) < 2000
            return
        verify(program)
        assert str(parse(str(program))) == str(program)
        lower_jaxpr(program, name="mutant", platform="cpu").as_text()
    for_each_case(N_MUTANTS, "mutated text", check)
