"""Values and derivatives of jaxprc against JAX on a corpus of programs.

Each program is written once against a ``lib`` parameter (the ``jax`` or the
``jaxprc`` module: ``lib.numpy``, ``lib.lax``, ``lib.jit``, ...). Together they
use every primitive (see ``test_corpus_covers_every_primitive``) and cond,
switch, scan, fori_loop, while_loop and nested jit. For each program: values,
jvp, grad, vjp, vmap, jacfwd, jacrev, and for some hessian and grad-of-grad
equal JAX's. Programs with a real while loop are checked in forward mode only
(reverse mode of while_loop is an error in JAX too).

Every program is compared in values under jit, jvp, vjp and vmap on each run; the checks that
compose those (eager values, grad, jacfwd, jacrev, second derivatives) run on a fixed third of the
programs, all of them under JAXPRC_LONG_TESTS=1 (see the ``sample`` marker in the root conftest.py).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax.ad_checkpoint  # noqa: F401  (lib.ad_checkpoint)
import jaxprc
import jaxprc.ad_checkpoint  # noqa: F401
import jaxprc.nn  # noqa: F401  (lib.nn)
import jaxprc.numpy  # noqa: F401  (lib.numpy)

RNG = np.random.default_rng(0)


def normal(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def uniform(lo, hi, *shape):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


X = normal(3, 4)
Y = normal(3, 4)
V = normal(4)
W = normal(4, 5, scale=0.5)
U = uniform(-0.8, 0.8, 3, 4)          # inside (-1, 1)
P = uniform(0.5, 2.0, 3, 4)           # positive
S = np.float32(0.7)
IDX = np.array([2, 0, 1, 2], np.int32)


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable                      # fn(lib, *args)
    args: tuple
    diff: tuple | None = None         # argnums differentiated; default: the float arguments
    reverse: bool = True              # reverse mode defined (False for while loops, as in JAX)
    forward: bool = True              # forward mode defined (False for custom_vjp, as in JAX)
    second: bool = False              # also hessian and grad-of-grad
    xfail: str | None = None          # a known missing rule: these derivative checks must fail
    xfail_modes: tuple = ("forward", "reverse")
    rtol: float = 2e-5

    def argnums(self):
        if self.diff is not None:
            return self.diff
        return tuple(i for i, a in enumerate(self.args) if np.issubdtype(np.asarray(a).dtype, np.floating))


def case(name, *args, **kw):
    def register(fn):
        CASES.append(Case(name, fn, args, **kw))
        return fn
    return register


CASES: list[Case] = []


# ------------------------------------------------------------ elementwise math

@case("trig", X, second=True)
def _(lib, x):
    L = lib.lax
    return L.sin(x) * L.cos(x) + L.tan(x * 0.3)


@case("inverse_trig", U, second=True)
def _(lib, u):
    L = lib.lax
    return L.asin(u) + L.acos(u) * L.atan(u)


@case("hyperbolic", X, second=True)
def _(lib, x):
    L = lib.lax
    return L.sinh(x) + L.cosh(x) * L.tanh(x)


@case("inverse_hyperbolic", X)
def _(lib, x):
    L = lib.lax
    return L.asinh(x) + L.acosh(1.5 + x * x) + L.atanh(0.5 * L.tanh(x))


@case("exp_log", X, second=True)
def _(lib, x):
    L = lib.lax
    return L.exp(x * 0.5) * L.log(2.0 + x * x) + L.exp2(x) - L.expm1(x) + L.log1p(x * x)


@case("logistic_erf", X)
def _(lib, x):
    L = lib.lax
    return L.logistic(x) * L.erf(x) + L.erfc(x) + L.erf_inv(0.5 * L.tanh(x))


@case("roots", P, second=True)
def _(lib, p):
    L = lib.lax
    return L.sqrt(p) + L.rsqrt(p) * L.cbrt(p)


@case("lgamma", P)
def _(lib, p):
    return lib.lax.lgamma(p + 0.5) * p


@case("digamma", P)
def _(lib, p):
    return lib.lax.digamma(p + 1.0)


@case("piecewise_constant", X * 3)
def _(lib, x):
    L = lib.lax
    return L.abs(x) * L.sign(x) + L.floor(x) * x + L.ceil(x) + L.round(x) * x


@case("powers", P, X, second=True)
def _(lib, p, x):
    L = lib.lax
    return L.square(x) + L.integer_pow(x, 3) + L.pow(p, x * 0.5) + L.integer_pow(p, -2)


@case("arithmetic", X, Y, second=True)
def _(lib, x, y):
    return (x + y) * (x - y) / (1.0 + y * y) - (-x)


@case("max_min_clamp", X, Y)
def _(lib, x, y):
    L = lib.lax
    return L.max(x, y) + L.min(x, 0.5) * L.clamp(-0.5, y, 0.8)


@case("atan2_rem", X, P)
def _(lib, x, p):
    L = lib.lax
    return L.atan2(x, p) + L.rem(x * 3.0, p)


@case("nextafter_is_finite", X)
def _(lib, x):
    L = lib.lax
    c = L.stop_gradient(x)                              # nextafter has no derivative
    step = L.nextafter(c, c + 1.0) - c
    return x * L.stop_gradient(step) * 1e6 + L.convert_element_type(L.is_finite(x / x), np.float32)


@case("select_where", X, Y)
def _(lib, x, y):
    n = lib.numpy
    return n.where(x > 0, x * y, n.sin(y))


@case("select_n_three_way", X, Y, IDX)
def _(lib, x, y, i):
    L = lib.lax
    which = lib.numpy.broadcast_to(i % 3, x.shape)
    return L.select_n(which, x, y, x * y)


@case("comparisons_and_logic", X, Y)
def _(lib, x, y):
    n = lib.numpy
    mask = ((x > 0) & (y <= 0.5)) | ~(x == y) ^ (x != 0.3)
    mask2 = (x < y) | (x >= 1.0)
    return n.where(mask & mask2, x, y * 2.0)


@case("convert_element_type", X)
def _(lib, x):
    n = lib.numpy
    return x.astype(n.int32).astype(n.float32) + (x * 3).astype(n.float16).astype(n.float32) * x


@case("integer_bits", X)
def _(lib, x):
    L, n = lib.lax, lib.numpy
    bits = L.bitcast_convert_type(x, n.int32)
    mix = (L.population_count(bits) + L.clz(bits) + L.shift_left(bits, 1) % 7
           + L.shift_right_arithmetic(bits, 3) % 5 + L.shift_right_logical(bits, 29))
    return x * (mix % 4).astype(n.float32)


@case("complex", X, Y)
def _(lib, x, y):
    n, L = lib.numpy, lib.lax
    z = x.astype(n.complex64) + 1j * y.astype(n.complex64)
    w = z * L.conj(z) + z * z
    return L.real(w) + L.imag(w)


@case("complex_from_parts", X, Y, second=True)
def _(lib, x, y):
    n, L = lib.numpy, lib.lax
    z = L.complex(x, 2 * x) * L.complex(L.sin(y), y)
    return n.abs(L.complex(x, 2 * x)) ** 2 + n.abs(z) + L.imag(z * z)


# ---------------------------------------------------------------- reductions

@case("reductions", X)
def _(lib, x):
    L = lib.lax
    return (L.reduce_sum(x, (0,)) * L.reduce_max(x, (0,)) + L.reduce_min(x, (0,))
            + L.reduce_prod(x, (0,)))


@case("argmax_gather", X)
def _(lib, x):
    n = lib.numpy
    return x[n.arange(3), n.argmax(x, 1)] + x[n.arange(3), n.argmin(x, axis=1)]


@case("boolean_reductions", X)
def _(lib, x):
    L, n = lib.lax, lib.numpy
    a, o = L.reduce_and(x > -1.0, (1,)), L.reduce_or(x > 1.0, (1,))
    xo = L.reduce_xor(x > 0.0, (1,))
    return n.sum(x, 1) * (a.astype(n.float32) + 2 * o.astype(n.float32) + 4 * xo.astype(n.float32))


@case("cumsum_cumprod", X)
def _(lib, x):
    L = lib.lax
    return L.cumsum(x, 1) + L.cumprod(x, 0, reverse=True)


@case("cummax_cummin", X)
def _(lib, x):
    L = lib.lax
    return L.cummax(x, 1) * L.cummin(x, 0)


@case("cumlogsumexp", X)
def _(lib, x):
    return lib.lax.cumlogsumexp(x, 1)


@case("mean_var_std", X)
def _(lib, x):
    n = lib.numpy
    return n.mean(x, 0) + n.var(x, 1).sum() + n.std(x)


# ---------------------------------------------------------------- contractions

@case("matmul", X, W)
def _(lib, x, w):
    return lib.numpy.tanh(x @ w)


@case("batched_dot_general", X, Y)
def _(lib, x, y):
    a, b = x.reshape(3, 2, 2), y.reshape(3, 2, 2)
    return lib.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))


@case("einsum_outer_vector", X, V)
def _(lib, x, v):
    n = lib.numpy
    return n.einsum("ij,j->i", x, v) + n.outer(v, v).sum() + n.dot(v, v)


# ---------------------------------------------------------------- structural ops

@case("broadcast_reshape_transpose", X, V)
def _(lib, x, v):
    L = lib.lax
    b = L.broadcast_in_dim(v, (3, 4), (1,))
    r = L.reshape(x * b, (4, 3))
    return L.transpose(r, (1, 0)) + L.squeeze(L.expand_dims(x, (0,)), (0,))


@case("concatenate_pad_rev_slice", X, Y)
def _(lib, x, y):
    L = lib.lax
    c = L.concatenate([x, L.rev(y, (1,))], 0)
    p = L.pad(c, 0.5, [(1, -1, 1), (0, 2, 0)])
    return L.slice(p, (1, 0), (9, 6), (2, 1))


@case("dynamic_slices", X, Y, np.int32(1))
def _(lib, x, y, i):
    L = lib.lax
    s = L.dynamic_slice(x, (i, i + 1), (2, 2))
    return L.dynamic_update_slice(y, s * s, (i - 1, i))


@case("gather_indexing", X, IDX)
def _(lib, x, idx):
    return x[idx] * x[:, 1:3].sum() + x[1, idx[:3]].sum() + x[::-1, ::2].sum()


@case("scatter_add", X, Y, IDX)
def _(lib, x, y, idx):
    return lib.numpy.asarray(x).at[idx[:2]].add(y[:2])


@case("scatter_set", X, Y)
def _(lib, x, y):
    return lib.numpy.asarray(x).at[1].set(y[2] * 2.0)


@case("scatter_mul", X, Y, diff=(0,))     # JAX: no derivative for the updates
def _(lib, x, y):
    return lib.numpy.asarray(x).at[lib.numpy.array([2, 0], np.int32)].mul(y[:2])


@case("scatter_min_max", X, Y)
def _(lib, x, y):
    return lib.numpy.asarray(x).at[0].min(y[1]).at[1].max(y[0])


@case("sort", X, Y)
def _(lib, x, y):
    n, L = lib.numpy, lib.lax
    k, v = L.sort((x[0], y[0]), num_keys=1)
    return n.sort(x, axis=1) + n.sort(y, axis=0) + (k * v).sum()


@case("iota", X)
def _(lib, x):
    L, n = lib.lax, lib.numpy
    return x * L.iota(n.float32, 4) + L.broadcasted_iota(n.int32, (3, 4), 0).astype(n.float32) * x


@case("stop_gradient", X)
def _(lib, x):
    return lib.numpy.sin(x) * lib.lax.stop_gradient(x) + x


# ---------------------------------------------------------------- control flow

@case("cond", X, second=True)
def _(lib, x):
    L = lib.lax
    return L.cond(x.sum() > 0, lambda v: L.sin(v) * v, lambda v: L.cos(v) + v, x)


@case("cond_false_branch", X, S)
def _(lib, x, s):
    L = lib.lax
    return L.cond(s < 0, lambda a, b: a * b, lambda a, b: a / (1.0 + b * b), x, s)


@case("switch", X, np.int32(2))
def _(lib, x, i):
    L = lib.lax
    return L.switch(i, [lambda v: v * 2.0, lambda v: L.sin(v), lambda v: v * v * 0.5], x)


@case("scan_rnn", normal(5, 4), normal(4, 4, scale=0.4), V, second=True)
def _(lib, xs, w, h0):
    n = lib.numpy

    def step(h, x):
        h = n.tanh(h @ w + x)
        return h, h.sum()
    h, ys = lib.lax.scan(step, h0, xs)
    return h * 2.0 + ys.sum()


@case("scan_reverse_two_carries", normal(4, 3), S)
def _(lib, xs, s):
    def step(c, x):
        a, b = c
        return (a * s + x, b + a * x), a - x
    (a, b), ys = lib.lax.scan(step, (xs[0], xs[1]), xs, reverse=True)
    return a + b + ys.sum(0)


@case("scan_with_cond_inside", normal(4, 3))
def _(lib, xs):
    L = lib.lax

    def step(c, x):
        c = L.cond(x.sum() > 0, lambda a: a * 0.5 + x, lambda a: L.sin(a) - x, c)
        return c, c * c
    c, ys = L.scan(step, xs[0], xs)
    return c + ys.sum(0)


@case("fori_loop", V, second=True)
def _(lib, v):
    return lib.lax.fori_loop(0, 3, lambda i, c: lib.numpy.sin(c) * c + i, v)


@case("while_fixed_trips", V, reverse=False)
def _(lib, v):
    L = lib.lax

    def body(c):
        i, x = c
        return i + 1, x - 0.3 * L.sin(x)
    return L.while_loop(lambda c: c[0] < 3, body, (0, v))[1]


@case("while_data_dependent", P, reverse=False)
def _(lib, p):
    L = lib.lax

    def body(c):
        x, t = c
        return x * 0.5 + 0.25 * L.cos(x), t + 1.0
    x, t = L.while_loop(lambda c: c[1] < 2.0 + (c[0].sum() > 5.0), body, (p, 0.0))
    return x * t


@case("fori_loop_dynamic_bound", V, np.int32(3), reverse=False)
def _(lib, v, n):
    return lib.lax.fori_loop(0, n, lambda i, c: c * 0.9 + lib.numpy.tanh(c), v)


@case("nested_jit", X)
def _(lib, x):
    inner = lib.jit(lambda a: lib.numpy.sin(a) * a)
    return inner(inner(x) + 1.0)


# ---------------------------------------------------------------- custom rules

@case("custom_jvp", X, second=True)
def _(lib, x):
    @lib.custom_jvp
    def f(a):
        return lib.numpy.sin(a) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (a,), (t,) = primals, tangents
        return f(a), 2.0 * lib.numpy.cos(a) * t
    return f(x) * x


@case("custom_vjp_clip_gradient", X, forward=False)
def _(lib, x):
    @lib.custom_vjp
    def clip_grad(a):
        return a

    def fwd(a):
        return a, None

    def bwd(_, g):
        return (lib.numpy.clip(g, -0.1, 0.1),)
    clip_grad.defvjp(fwd, bwd)
    return lib.numpy.sin(clip_grad(x * 3.0))


@case("array_copy", X, second=True)
def _(lib, x):
    return lib.numpy.array(x * x, copy=True) * x


@case("remat_named", X, second=True)
def _(lib, x):
    name = lib.ad_checkpoint.checkpoint_name

    @lib.checkpoint
    def f(y):
        return lib.numpy.sin(name(y * y, "sq")) * y
    return f(x) + x


# ---------------------------------------------------------------- models

@case("mlp_loss", normal(4, 8, scale=0.5), normal(8), normal(8, 3, scale=0.5), normal(5, 4))
def _(lib, w1, b1, w2, x):
    n = lib.numpy
    h = n.tanh(x @ w1 + b1)
    logits = h @ w2
    return -n.mean(logits - lib.nn.logsumexp(logits, axis=1, keepdims=True))


@case("softmax_cross_entropy", X, np.array([0, 3, 1], np.int32))
def _(lib, x, labels):
    n = lib.numpy
    logp = lib.nn.log_softmax(x, axis=-1)
    return -n.take_along_axis(logp, labels[:, None], axis=1).mean()


@case("layer_norm", X, V)
def _(lib, x, g):
    n = lib.numpy
    mu = n.mean(x, -1, keepdims=True)
    var = n.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) * lib.lax.rsqrt(var + 1e-5) * g


@case("activations", X)
def _(lib, x):
    nn = lib.nn
    return nn.relu(x) + nn.softplus(x) + nn.gelu(x, approximate=True) + nn.sigmoid(x) * nn.silu(x)


@case("norm_and_logaddexp", X, Y)
def _(lib, x, y):
    n = lib.numpy
    return n.linalg.norm(x, axis=1) + n.logaddexp(x, y).sum(1)


@case("matrix_helpers", normal(4, 4), V)
def _(lib, a, v):
    n = lib.numpy
    return n.trace(a @ a) + n.diag(a) * v + n.triu(a).sum() + n.kron(v[:2], v[2:]).sum()


@case("fft", X)
def _(lib, x):
    f, n = lib.numpy.fft, lib.numpy
    return (f.irfft(f.rfft(x) * (1.0 + 0.5j), n=4), n.real(f.fft2(x, norm="ortho")),
            n.imag(f.ifftn(x * x, s=(2, 5))))


def _richardson(lib):
    """A fixed-count linear solver for the well-conditioned systems here (never differentiated)."""
    return lambda matvec, b: lib.lax.fori_loop(0, 40, lambda i, x: x + 0.4 * (b - matvec(x)), b * 0.0)


@case("custom_linear_solve", np.eye(4, dtype=np.float32) * 2 + normal(4, 4, scale=0.1), V)
def _(lib, a, v):
    solve = _richardson(lib)
    return lib.lax.custom_linear_solve(lambda x: a @ x, v, solve, solve) * v


@case("custom_root", P)
def _(lib, p):
    def solve(f, x0):
        return lib.lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)
    # f is elementwise: its linearization is a diagonal, read off by applying it to ones
    return lib.lax.custom_root(lambda x: x * x - p, p * 0 + 1, solve, lambda g, y: y / g(lib.numpy.ones_like(y)))


@case("polynomial_horner", V, second=True)
def _(lib, v):
    acc = v * 0.0 + 1.0
    for c in (0.5, -1.0, 2.0, 0.25):
        acc = acc * v + c
    return acc


@case("scalar_sin_chain", S, second=True)
def _(lib, s):
    return lib.numpy.sin(lib.numpy.cos(s) * s)


# ------------------------------------------------------------ the checks

LIBS = {"jax": jax, "jaxprc": jaxprc}


def dtype_of(x):
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def float_leaves(tree, lib):
    return [l for l in lib.tree_util.tree_leaves(tree) if np.issubdtype(dtype_of(l), np.inexact)]


def program(c: Case, lib):
    """``c`` as a function of its differentiated arguments only, returning its float outputs."""
    nums = c.argnums()

    def f(*wrt):
        args = list(c.args)
        for i, a in zip(nums, wrt):
            args[i] = a
        return float_leaves(c.fn(lib, *args), lib)
    return f, [c.args[i] for i in nums]


def loss(c: Case, lib):
    """A scalar of all float outputs (sin makes second derivatives of linear programs nonzero)."""
    f, _ = program(c, lib)

    def scalar(*wrt):
        return sum(lib.numpy.sum(lib.numpy.sin(o.real if o.dtype.kind == "c" else o)) for o in f(*wrt))
    return scalar


def close(ours, theirs, c: Case, rtol=None):
    rtol = rtol or c.rtol
    a_leaves, a_tree = jax.tree_util.tree_flatten(ours, is_leaf=lambda x: x is None)
    b_leaves, b_tree = jax.tree_util.tree_flatten(theirs, is_leaf=lambda x: x is None)
    assert len(a_leaves) == len(b_leaves), (a_tree, b_tree)
    for a, b in zip(a_leaves, b_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        if b.dtype == jax.dtypes.float0:
            continue
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        scale = max(1.0, float(np.max(np.abs(b), initial=0)))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=c.name)


def params(cases, mode=None):
    """Cases as pytest params; a known missing rule of ``mode`` is an expected failure (strict:
    when the rule lands, the marker must go)."""
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)]
                         if c.xfail and mode in c.xfail_modes else []) for c in cases]


def both(check=None, *, mode=None):
    """Run ``check(c, lib)`` for both libraries and compare; ``mode`` is "forward" or "reverse"
    for derivative checks (cases where JAX defines no such derivative are skipped)."""
    if check is None:
        return functools.partial(both, mode=mode)

    def test(c):
        if mode and not getattr(c, mode):
            pytest.skip(f"{mode}-mode differentiation is undefined here, as in JAX")
        close(check(c, jaxprc), check(c, jax), c)
    test.__name__, test.__doc__ = check.__name__, check.__doc__
    return pytest.mark.parametrize("c", params(CASES, mode))(test)


def tangents(c: Case):
    r = np.random.default_rng(1)
    return [r.standard_normal(np.shape(a)).astype(np.asarray(a).dtype) for a in program(c, jax)[1]]


@pytest.mark.sample(3)   # see the module docstring
@both
def test_values(c, lib):
    return c.fn(lib, *c.args)


@both
def test_values_under_jit(c, lib):
    """The MLP loss, the scan RNN, the while loops and the rest, compiled whole by XLA."""
    return lib.jit(functools.partial(c.fn, lib))(*c.args)


@pytest.mark.sample(3)   # see the module docstring
@both(mode="reverse")
def test_grad_under_jit(c, lib):
    return lib.jit(lib.value_and_grad(loss(c, lib), argnums=tuple(range(len(c.argnums())))))(
        *program(c, lib)[1])


@both(mode="forward")
def test_jvp(c, lib):
    f, primals = program(c, lib)
    return lib.jvp(f, tuple(primals), tuple(tangents(c)))


@pytest.mark.sample(3)   # see the module docstring
@both(mode="reverse")
def test_grad(c, lib):
    return lib.value_and_grad(loss(c, lib), argnums=tuple(range(len(c.argnums()))))(*program(c, lib)[1])


@both(mode="reverse")
def test_vjp(c, lib):
    f, primals = program(c, lib)
    out, vjp_fun = lib.vjp(f, *primals)
    r = np.random.default_rng(2)
    cts = [r.standard_normal(np.shape(o)).astype(np.asarray(o).dtype) for o in out]
    return out, vjp_fun(cts), vjp_fun([2 * ct for ct in cts])     # vjp_fun runs twice


@both
def test_vmap(c, lib):
    batch = [np.stack([a, a * 0.5 + 0.1]).astype(np.asarray(a).dtype)
             if np.asarray(a).dtype.kind == "f" else a for a in c.args]
    in_axes = tuple(0 if np.asarray(a).dtype.kind == "f" else None for a in c.args)
    return lib.vmap(lambda *a: c.fn(lib, *a), in_axes)(*batch)


@pytest.mark.sample(3)   # see the module docstring
@both(mode="forward")
def test_jacfwd(c, lib):
    f, primals = program(c, lib)
    return lib.jacfwd(f, argnums=tuple(range(len(primals))))(*primals)


@pytest.mark.sample(3)   # see the module docstring
@both(mode="reverse")
def test_jacrev(c, lib):
    f, primals = program(c, lib)
    return lib.jacrev(f, argnums=tuple(range(len(primals))))(*primals)


SECOND = [c for c in CASES if c.second]


@pytest.mark.sample(3)
@pytest.mark.parametrize("c", params(SECOND, "reverse"))
def test_hessian_and_grad_of_grad(c):
    def run(lib):
        scalar = loss(c, lib)
        primals = program(c, lib)[1]
        nums = tuple(range(len(primals)))
        g = lib.grad(scalar, argnums=nums)
        gg = lib.grad(lambda *a: sum(lib.numpy.sum(lib.numpy.cos(x)) for x in g(*a)), argnums=nums)
        return lib.hessian(scalar, argnums=nums)(*primals), gg(*primals)
    close(run(jaxprc), run(jax), c, rtol=1e-4)


def test_hessian_of_scalar_function_of_vector():
    def f(lib, v):
        n = lib.numpy
        return n.sum(n.sin(v) * v[::-1]) + n.prod(v) + n.dot(v, v) ** 2
    v = normal(5)
    ours, theirs = jaxprc.hessian(functools.partial(f, jaxprc))(v), jax.hessian(functools.partial(f, jax))(v)
    assert np.shape(ours) == (5, 5)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_third_derivative_of_sin():
    for x in (0.0, 0.5, -2.0, 3.0):
        ours = jaxprc.grad(jaxprc.grad(jaxprc.grad(jaxprc.numpy.sin)))(np.float32(x))
        np.testing.assert_allclose(ours, -np.cos(np.float32(x)), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(ours, jax.grad(jax.grad(jax.grad(jnp.sin)))(np.float32(x)), rtol=1e-6)


def test_corpus_covers_every_primitive():
    """Every primitive of the registry appears in some traced program (or is listed here)."""
    not_user_level = {"custom_lin"}                # only made by linearizing a custom_vjp
    not_user_level.add("dim_as_value")             # no operands: a dimension's value has no derivative
    # families whose derivatives are compared with JAX's (through their public functions) in
    # their own oracle files
    own_oracle = {
        "test_linalg_oracle.py": "cholesky eig eigh geqrf hessenberg householder_product lu "
                                 "lu_pivots_to_permutation qr schur svd triangular_solve tridiagonal_solve",
        "test_conv_oracle.py": "conv_general_dilated reduce_window reduce_window_max reduce_window_min "
                               "reduce_window_sum select_and_gather_add select_and_scatter_add",
        "test_sharding_oracle.py": "all_gather all_to_all axis_index pmax pmin ppermute psum psum_scatter "
                                   "shard_map sharding_constraint",
        "test_callbacks_oracle.py": "debug_callback io_callback pure_callback",
        "test_random_distributions_oracle.py": "random_gamma random_gamma_grad",
        "test_special_oracle.py": "bessel_i0e bessel_i1e igamma igamma_grad_a igammac polygamma "
                                  "regularized_incomplete_beta zeta",
        "test_lax_nn_oracle.py": "composite mulhi optimization_barrier reduce reduce_precision "
                                 "rng_bit_generator rng_uniform top_k",
        "test_pmap_oracle.py": "pvary",
        "test_collectives2_oracle.py": "ragged_all_to_all",
        "test_narrow_dtypes_oracle.py": "after_all create_token",
        "test_distributed_oracle.py": "global_array_to_host_local_array host_local_array_to_global_array",
        "test_custom_batching_oracle.py": "custom_vmap_call linear_call",
        "test_checkify_oracle.py": "check",
        "test_export_interchange.py": "call_exported",     # grads through serialized vjps, both ways
    }
    # JAX lowers pbroadcast on GPU only; its transpose identity is checked in tests/pmap_checks.py
    not_user_level.add("pbroadcast")
    # a foreign call has no derivative, as in JAX (its error in JAX's words: tests/test_ffi.py)
    not_user_level.add("ffi_call")
    here = os.path.dirname(os.path.abspath(__file__))
    for file, names in own_oracle.items():
        assert os.path.exists(os.path.join(here, file)), file
        not_user_level |= set(names.split())
    seen = set()

    def walk(jaxpr):
        for e in jaxpr.eqns:
            seen.add(e.primitive.name)
            for v in e.params.values():
                for p in (v if isinstance(v, tuple) else (v,)):
                    inner = getattr(p, "jaxpr", p)
                    if hasattr(inner, "eqns"):
                        walk(inner)
    for c in CASES:
        walk(jaxprc.make_jaxpr(lambda *a: c.fn(jaxprc, *a))(*c.args).jaxpr)
    assert len(CASES) >= 50
    # the primitives a fresh import registers (other files in this process register their own)
    builtin = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, jaxprc; print(json.dumps(sorted(jaxprc.ir.PRIMITIVES)))"],
        check=True, capture_output=True, text=True).stdout)
    missing = set(builtin) - seen - not_user_level
    assert not missing, sorted(missing)
