"""``jaxprc demo``: one small model taken from Python to XLA, every step printed.

The model is a one-layer regression whose activation (softplus) carries a
custom derivative rule (when this build has ``custom_jvp``). Its gradient is
built the way reverse mode works, one pass at a time (jvp, dce, partial
evaluation into a primal and a linear program, transpose of the linear one),
then the whole gradient program is cleaned with cse and dce, lowered to
StableHLO, compiled and run, and checked against finite differences.
"""
from __future__ import annotations

import numpy as np

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.passes import jvp_jaxpr, linearize_jaxpr, run_pipeline, transpose_jaxpr, verify_pass_result

SHAPES = {"w": (3, 2), "b": (2,), "x": (4, 3), "y": (4, 2)}


def make_softplus():
    """softplus(x) = log(1 + e^x), with the sigmoid as its derivative rule when custom_jvp exists."""
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    try:
        from jaxprc.transformations.custom_derivatives import custom_jvp
    except ImportError:
        return softplus, "plain softplus (this build has no custom_jvp)"
    softplus = custom_jvp(softplus)

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1 + jnp.exp(-x))     # the sigmoid, without overflow for large x

    return softplus, "softplus with a custom_jvp rule (its derivative: the sigmoid)"


def _section(title: str, body) -> None:
    print(f"== {title} ==\n{body}\n")


def _loss_np(w, b, x, y) -> float:
    pred = np.log1p(np.exp(x @ w + b))
    return float(np.mean((pred - y) ** 2))


def _finite_difference_grad(data, argnum: int, eps: float = 1e-4) -> np.ndarray:
    data = [d.astype(np.float64) for d in data]
    g = np.zeros_like(data[argnum])
    for idx in np.ndindex(g.shape):
        hi, lo = [d.copy() for d in data], [d.copy() for d in data]
        hi[argnum][idx] += eps
        lo[argnum][idx] -= eps
        g[idx] = (_loss_np(*hi) - _loss_np(*lo)) / (2 * eps)
    return g


def run_demo() -> int:
    softplus, how = make_softplus()

    def loss(w, b, x, y):
        pred = softplus(x @ w + b)
        return jnp.mean((pred - y) ** 2)

    specs = [jaxprc.ShapeDtypeStruct(s, np.float32) for s in SHAPES.values()]
    signature = ", ".join(f"{n}: f32{list(s)}" for n, s in SHAPES.items())
    print(f"loss({signature}) = mean((softplus(x @ w + b) - y)**2), using {how}.\n"
          "Its gradient with respect to w and b, built pass by pass:\n")

    program = jaxprc.make_jaxpr(loss)(*specs)
    _section("1. the model, traced to IR", program)

    wrt = [True, True, False, False]
    jvp_program, _ = jvp_jaxpr(program, wrt, instantiate=True)
    verify_pass_result("jvp", jvp_program, verify=True)
    _section("2. after jvp: (w, b, x, y, dw, db) -> (loss, dloss)", jvp_program)
    _section("3. after dce", run_pipeline(jvp_program, "dce", verify=True))

    primal, linear, _, n_res = linearize_jaxpr(program, wrt)
    verify_pass_result("linearize (primal part)", primal, verify=True)
    verify_pass_result("linearize (linear part)", linear, verify=True)
    _section("4. after partial evaluation, the primal part: (w, b, x, y) -> (loss, residuals)", primal)
    _section("5. after partial evaluation, the linear part: (residuals, dw, db) -> dloss", linear)
    backward, _ = transpose_jaxpr(linear, [False] * n_res + [True] * (len(linear.in_avals) - n_res))
    verify_pass_result("transpose", backward, verify=True)
    _section("6. after transpose: (residuals, loss cotangent) -> (w cotangent, b cotangent)", backward)

    grad_program = jaxprc.make_jaxpr(jaxprc.grad(loss, argnums=(0, 1)))(*specs)
    grad_program = run_pipeline(grad_program, "cse,dce", verify=True)
    _section("7. the whole gradient program (grad(loss, argnums=(0, 1))) after cse, dce", grad_program)

    lowered = jaxprc.engine.lowering.lower_jaxpr(grad_program, name="grad_loss",
                                          platform=jaxprc.default_backend())
    _section("8. StableHLO", lowered.as_text())

    rng = np.random.default_rng(0)
    data = [rng.standard_normal(s).astype(np.float32) for s in SHAPES.values()]
    dw, db = (np.asarray(g) for g in jaxprc.jit(jaxprc.jaxpr_as_fun(grad_program))(*data))
    errors = [np.max(np.abs(g - _finite_difference_grad(data, i))) for i, g in enumerate((dw, db))]
    ok = max(errors) < 1e-3
    _section(f"9. run by XLA ({jaxprc.default_backend()}) on random data",
             f"dloss/dw =\n{dw}\ndloss/db = {db}\n"
             f"largest difference from central finite differences: {max(errors):.2e} "
             f"({'ok' if ok else 'MISMATCH'})")
    return 0 if ok else 1
