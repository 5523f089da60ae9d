"""The gradient of an MLP loss: a clean jaxpr, and StableHLO no larger than JAX's.

- ``make_jaxpr(grad(loss))`` has no dead equations (dce removes nothing) and
  no materialised zero tangents (no broadcast of a literal 0 feeding an add,
  mul or dot, and no equation whose inputs are all literal zeros).
- The op count of ``jit(grad(loss)).lower(...).as_text()`` is no larger than
  JAX's for the same function. Both counts, and the ops of each kind, are
  printed (``pytest -s``).
- The same holds for every StableHLO-size program of the benchmark
  (``benchmarks/bench.py``: vmap(chain), grad(scan RNN), grad(odeint), ...).
"""
import collections
import pathlib
import re
import sys

import jax
import numpy as np
import pytest

import jaxprc
import jaxprc.nn  # noqa: F401
import jaxprc.numpy  # noqa: F401
from jaxprc.passes.dce import dce

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))   # not installed
import bench  # noqa: E402

RNG = np.random.default_rng(0)
PARAMS = [RNG.standard_normal(s).astype(np.float32) * 0.3 for s in [(4, 8), (8,), (8, 3), (3,)]]
X = RNG.standard_normal((5, 4)).astype(np.float32)
LABELS = np.array([0, 2, 1, 1, 0], np.int32)


def mlp_loss(lib):
    n = lib.numpy

    def loss(params, x, labels):
        w1, b1, w2, b2 = params
        h = n.tanh(x @ w1 + b1)
        logits = h @ w2 + b2
        logp = logits - lib.nn.logsumexp(logits, axis=1, keepdims=True)
        return -n.mean(n.take_along_axis(logp, labels[:, None], axis=1))
    return loss


def stablehlo_ops(text: str) -> collections.Counter:
    """Ops of the module (``stablehlo.add``, ``func.return``, ...), one per line that has one."""
    ops = collections.Counter()
    for line in text.splitlines():
        m = re.search(r'(?:=\s*|^\s*)"?([a-z_]+\.[a-z_0-9.]+)"?', line)
        if m and not m.group(1).startswith(("func.func", "module")):
            ops[m.group(1)] += 1
    return ops


@pytest.fixture(scope="module")
def grad_jaxpr():
    return jaxprc.make_jaxpr(jaxprc.grad(mlp_loss(jaxprc)))(PARAMS, X, LABELS)


def test_grad_jaxpr_has_no_dead_equations(grad_jaxpr):
    after = dce(grad_jaxpr)
    assert len(after.jaxpr.eqns) == len(grad_jaxpr.jaxpr.eqns), (
        f"dce removed equations from make_jaxpr(grad(loss)):\n{grad_jaxpr}\n--- after dce ---\n{after}")


def _is_zero_literal(a):
    return hasattr(a, "val") and np.all(np.asarray(a.val) == 0)


def test_grad_jaxpr_has_no_materialised_zeros(grad_jaxpr):
    zeros = set()
    offenders = []
    for eqn in grad_jaxpr.jaxpr.eqns:
        name = eqn.primitive.name
        if name == "broadcast_in_dim" and _is_zero_literal(eqn.invars[0]):
            zeros.update(eqn.outvars)
        elif name in ("add", "sub", "mul", "dot_general", "concatenate") and \
                any(v in zeros or _is_zero_literal(v) for v in eqn.invars):
            offenders.append(eqn)
    assert not offenders, "zero tangents were materialised:\n" + "\n".join(map(str, offenders))


def test_stablehlo_op_count_no_larger_than_jax():
    ours_text = jaxprc.jit(jaxprc.grad(mlp_loss(jaxprc))).lower(PARAMS, X, LABELS).as_text()
    jax_text = jax.jit(jax.grad(mlp_loss(jax))).lower(PARAMS, X, LABELS).as_text()
    ours, theirs = stablehlo_ops(ours_text), stablehlo_ops(jax_text)
    n_ours, n_theirs = sum(ours.values()), sum(theirs.values())
    kinds = sorted(set(ours) | set(theirs))
    table = "\n".join(f"  {k:40s} jaxprc {ours[k]:3d}   jax {theirs[k]:3d}" for k in kinds if ours[k] != theirs[k])
    report = (f"grad(MLP loss) StableHLO ops: jaxprc {n_ours}, jax {n_theirs}\n"
              f"ops whose counts differ:\n{table}\n")
    print("\n" + report)
    ours_grad = jaxprc.jit(jaxprc.grad(mlp_loss(jaxprc)))(PARAMS, X, LABELS)
    jax_grad = jax.jit(jax.grad(mlp_loss(jax)))(PARAMS, X, LABELS)
    for a, b in zip(ours_grad, jax_grad):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert n_ours <= n_theirs, report


SIZE_BENCHES = [b for b in bench.BENCHES if b.size is not None]


@pytest.mark.parametrize("b", SIZE_BENCHES, ids=[b.name for b in SIZE_BENCHES])
def test_benchmark_programs_have_no_more_ops_than_jax(b):
    ours_lib, jax_lib = bench.load_lib("jaxprc"), bench.load_lib("jax")
    if b.requires and getattr(ours_lib, b.requires) is None:
        pytest.skip(f"jaxprc lacks {b.requires}")
    ours, theirs = bench.count_ops(b.size(ours_lib)), bench.count_ops(b.size(jax_lib))
    n_ours, n_theirs = sum(ours.values()), sum(theirs.values())
    table = "\n".join(f"  {k:40s} jaxprc {ours.get(k, 0):4d}   jax {theirs.get(k, 0):4d}"
                      for k in sorted(set(ours) | set(theirs)) if ours.get(k, 0) != theirs.get(k, 0))
    report = f"{b.name}: jaxprc {n_ours} ops, jax {n_theirs}\n{table}"
    print("\n" + report)
    assert n_ours <= n_theirs, report
