"""Random well-typed differentiable programs, shared by the random-pass tests.

``SmoothProgram(seed).program()`` traces a program whose inputs and outputs
are floating point and whose operations are smooth almost everywhere (so
finite differences are a valid oracle): elementwise math, broadcasting,
reductions, dot_general, structural ops (transpose, reshape, slice, pad,
concatenate, rev, dynamic_slice, select_n), nested ``jit`` calls, and cond /
scan / fori_loop / while_loop bodies that are random programs themselves.
Values stay bounded: unbounded functions are applied to bounded arguments
(``exp(tanh x)``, ``log1p(x^2)``, ``x / (1 + y^2)``).

Like tests/test_random_programs.py, hypothesis draws one seed and the choices
come from a seeded ``random.Random``: drawing each choice through hypothesis
costs more than the checks themselves.
"""
from __future__ import annotations

import random

import numpy as np

import jaxprc as jx
from jaxprc import lax
from jaxprc.ir import ShapedArray, trace_to_jaxpr

SHAPES = [(), (3,), (2, 3)]


def _smooth_unary(rng, x):
    fns = [lax.sin, lax.cos, lax.tanh, lax.logistic, lax.neg,
           lambda v: lax.exp(lax.tanh(v)),
           lambda v: lax.log1p(lax.square(v)),
           lambda v: lax.sqrt(lax.add(lax.square(v), 1.0)),
           lambda v: lax.mul(lax.integer_pow(lax.tanh(v), 3), 2.0),
           lambda v: lax.atan(v),
           lambda v: lax.mul(lax.erf(v), 0.5)]
    return rng.choice(fns)(x)


def _smooth_binary(rng, x, y):
    fns = [lax.add, lax.sub, lax.mul,
           lambda a, b: lax.div(a, lax.add(lax.square(b), 1.0)),
           lambda a, b: lax.mul(lax.sin(a), lax.cos(b)),
           lambda a, b: lax.atan2(a, lax.add(lax.square(b), 0.5)),
           lax.max, lax.min]
    return rng.choice(fns)(x, y)


class SmoothProgram:
    """Draws one program's operations while it is being traced.

    ``allow_while``: whether real while loops (not reverse-differentiable, as in JAX)
    may appear; fori_loop with constant bounds (a scan) always may.
    """

    def __init__(self, seed: int, dtype=np.float32, max_depth: int = 1, allow_while: bool = True,
                 max_steps: int = 5):
        self.rng = random.Random(seed)
        self.dtype, self.max_depth, self.allow_while = np.dtype(dtype), max_depth, allow_while
        self.max_steps = max_steps

    # ------------------------------------------------------------ helpers
    def pick(self, xs):
        return self.rng.choice(xs)

    def coin(self, p: float = 0.5) -> bool:
        return self.rng.random() < p

    def to_shape(self, y, shape):
        """``y`` broadcast or reduced to ``shape`` (None when that is not a simple step)."""
        if y.shape == tuple(shape):
            return y
        if y.ndim == 0:
            return lax.broadcast_in_dim(y, shape, ())
        if len(shape) == 2 and y.shape == shape[1:]:
            return lax.broadcast_in_dim(y, shape, (1,))
        if len(shape) == 0:
            return lax.reduce_sum(y, tuple(range(y.ndim)))
        return None

    def partner(self, pool, x):
        candidates = [y for y in (self.to_shape(v, x.shape) for v in pool if v.ndim <= x.ndim
                                  or x.ndim == 0) if y is not None]
        return self.pick(candidates) if candidates and self.coin(0.8) else self.rng.uniform(-1.5, 1.5)

    def like(self, pool, aval):
        """A value of ``aval``'s shape from the pool (sub-programs must return one), into which
        some other pool values are folded, so that most of the work stays live."""
        out = self.pick([v for v in pool if v.shape == aval.shape])
        rest = [v for v in pool if v is not out and self.coin(0.85)]
        if not rest:
            return out
        total = rest[0] if rest[0].ndim == 0 else lax.reduce_sum(rest[0], tuple(range(rest[0].ndim)))
        for v in rest[1:]:
            total = lax.add(total, lax.reduce_sum(v, tuple(range(v.ndim))))
        return lax.add(out, lax.broadcast_in_dim(lax.sin(total), aval.shape, ()))

    def body(self, args, depth: int):
        pool = list(args)
        for _ in range(self.rng.randint(1, self.max_steps)):
            pool.append(self.step(pool, depth))
        return pool

    # ------------------------------------------------------------ one step
    def step(self, pool, depth: int):
        x = self.pick(pool)
        kinds = ["unary"] * 3 + ["binary"] * 3 + ["reduce", "broadcast", "dot", "select", "call",
                                                   "repeat"]
        if x.ndim >= 1:
            kinds += ["slice", "pad", "concat_rev", "dynamic_slice", "cumsum"]
        if x.ndim == 2:
            kinds += ["transpose", "reshape"]
        if depth < self.max_depth:
            kinds += ["cond", "scan", "fori"] + (["while"] if self.allow_while else [])
        return getattr(self, "op_" + self.pick(kinds))(pool, x, depth)

    def op_unary(self, pool, x, depth):
        return _smooth_unary(self.rng, x)

    def op_binary(self, pool, x, depth):
        y = self.partner(pool, x)
        a, b = (x, y) if isinstance(y, float) or self.coin() else (y, x)
        return _smooth_binary(self.rng, a, b)

    def op_repeat(self, pool, x, depth):
        """The same unary op twice on one input: work for cse."""
        fn = self.pick([lax.sin, lax.tanh, lax.cos])
        return lax.add(fn(x), fn(x))

    def op_reduce(self, pool, x, depth):
        if x.ndim == 0:
            return lax.mul(x, x)
        axes = tuple(a for a in range(x.ndim) if self.coin()) or (x.ndim - 1,)
        return self.pick([lax.reduce_sum, lax.reduce_max, lax.reduce_min])(x, axes)

    def op_broadcast(self, pool, x, depth):
        if x.ndim == 0:
            return lax.broadcast_in_dim(x, self.pick([(3,), (2, 3)]), ())
        if x.ndim == 1:
            return lax.broadcast_in_dim(x, (2, *x.shape), (1,))
        return lax.broadcast_in_dim(lax.reduce_sum(x, (1,)), (x.shape[0], 2), (0,))

    def op_dot(self, pool, x, depth):
        """Contract one axis of ``x`` with an equal-sized axis of another value (or batch
        matrices of one shape)."""
        if x.ndim == 2 and self.coin(0.3):
            y = self.pick([v for v in pool if v.shape == x.shape])
            return lax.dot_general(x, y, (((1,), (1,)), ((0,), (0,))))
        pairs = [(y, i, j) for y in pool for i in range(x.ndim) for j in range(y.ndim)
                 if x.shape[i] == y.shape[j]]
        if not pairs:
            return lax.mul(x, 0.5)
        y, i, j = self.pick(pairs)
        return lax.dot_general(x, y, (((i,), (j,)), ((), ())))

    def op_select(self, pool, x, depth):
        y = self.partner(pool, x)
        y = y if not isinstance(y, float) else lax.full_like(x, y)
        z = self.to_shape(self.pick(pool), x.shape)
        pred = lax.gt(z if z is not None else x, 0.1)
        return lax.select(pred, x, y)

    def op_call(self, pool, x, depth):
        """A nested ``jit`` call (work for inline) of a random body."""
        sub = SmoothProgram(self.rng.randrange(2**31), self.dtype, 0, max_steps=2)
        return jx.jit(lambda v: sub.like(sub.body([v], 1), v.aval))(x)

    def op_slice(self, pool, x, depth):
        if x.shape[-1] < 2:
            return lax.neg(x)
        start = [0] * (x.ndim - 1) + [1]
        return lax.slice(x, start, x.shape)

    def op_pad(self, pool, x, depth):
        config = [(0, 0, 0)] * (x.ndim - 1) + [(self.rng.randint(-1, 1), 1, self.rng.randint(0, 1))]
        return lax.pad(x, lax.full((), 0.5, x.dtype), config)

    def op_concat_rev(self, pool, x, depth):
        y = self.pick([v for v in pool if v.shape == x.shape])
        return lax.concatenate([x, lax.rev(y, (x.ndim - 1,))], x.ndim - 1)

    def op_dynamic_slice(self, pool, x, depth):
        size = [*x.shape[:-1], max(1, x.shape[-1] - 1)]
        idx = [np.int32(0)] * (x.ndim - 1) + [np.int32(self.rng.randint(0, 2))]
        return lax.dynamic_slice(x, idx, size)

    def op_cumsum(self, pool, x, depth):
        return lax.cumsum(x, x.ndim - 1, reverse=self.coin())

    def op_transpose(self, pool, x, depth):
        return lax.transpose(x, (1, 0))

    def op_reshape(self, pool, x, depth):
        return lax.reshape(x, (x.size,))

    def op_cond(self, pool, x, depth):
        z = self.pick(pool)
        pred = lax.gt(lax.reduce_sum(z, tuple(range(z.ndim))), 0.0)
        branch = lambda v: self.like(self.body([v], depth + 1), x.aval)
        return lax.cond(pred, branch, branch, x)

    def op_scan(self, pool, x, depth):
        xs = self.pick([v for v in pool if v.ndim >= 1] or [lax.broadcast_in_dim(x, (2, *x.shape),
                                                                                 tuple(range(1, x.ndim + 1)))])
        elem = ShapedArray(xs.shape[1:], xs.dtype)

        def body(c, a):
            inner = self.body([c, a], depth + 1)
            return self.like(inner, x.aval), self.like(inner, elem)
        carry, ys = lax.scan(body, x, xs, reverse=self.coin())
        return self.pick([carry, ys])

    def op_fori(self, pool, x, depth):
        return lax.fori_loop(0, 2, lambda i, v: self.like(self.body([v], depth + 1), x.aval), x)

    def op_while(self, pool, x, depth):
        """Two or three iterations, depending on the data (a batched predicate under vmap)."""
        def cond(c):
            i, v = c
            extra = lax.convert_element_type(lax.gt(lax.reduce_sum(v, tuple(range(v.ndim))), 0.0),
                                             np.int32)
            return lax.lt(i, lax.add(extra, np.int32(2)))

        def body(c):
            i, v = c
            return lax.add(i, np.int32(1)), self.like(self.body([v], depth + 1), x.aval)
        return lax.while_loop(cond, body, (np.int32(0), x))[1]

    # ------------------------------------------------------------ programs
    def program(self):
        avals = [ShapedArray(self.pick(SHAPES), self.dtype) for _ in range(self.rng.randint(1, 3))]

        def fun(*args):
            pool = self.body(args, 0)
            last = pool[-1]
            return [self.like(pool, last.aval)] + [self.pick(pool) for _ in range(self.rng.randint(0, 1))]
        return trace_to_jaxpr(fun, avals)

    def inputs(self, cj):
        """Deterministic example inputs for ``cj`` in [-1.5, 1.5]."""
        r = np.random.default_rng(self.rng.randrange(2**31))
        return [r.uniform(-1.5, 1.5, a.shape).astype(a.dtype) for a in cj.in_avals]
