"""scipy.optimize.minimize's experimental L-BFGS and sparse.linalg solvers on operator objects,
against JAX (and against the known minimum / the dense solve)."""
import jax
import jax.numpy as jnp
import jax.scipy.optimize
import jax.scipy.sparse.linalg
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp
import jaxprc.scipy.optimize
import jaxprc.scipy.sparse.linalg

LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def _rosen(np_):
    return lambda x: np_.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def _quadratic(np_):
    return lambda x: np_.sum((x - np_.arange(3.0)) ** 2)


@pytest.mark.parametrize("problem, x0, options", [
    (_rosen, [-1.2, 1.0], {"maxcor": 3, "gtol": 1e-3}),
    (_rosen, [0.0, 0.0, 0.0, 0.0], {}),          # stops on a failed line search (status 5) in both
], ids=["rosenbrock", "rosenbrock_line_search_fails"])
def test_lbfgs_matches_jax(problem, x0, options):
    theirs = jax.scipy.optimize.minimize(problem(jnp), jnp.array(x0), method=LBFGS, options=options)
    ours = jaxprc.scipy.optimize.minimize(problem(xnp), xnp.array(x0), method=LBFGS, options=options)
    assert ours.hess_inv is None and theirs.hess_inv is None
    assert (bool(ours.success), int(ours.status)) == (bool(theirs.success), int(theirs.status))
    np.testing.assert_allclose(ours.x, theirs.x, atol=1e-3)
    np.testing.assert_allclose(ours.fun, theirs.fun, rtol=1e-3, atol=1e-8)
    assert abs(int(ours.nit) - int(theirs.nit)) <= 1


def test_lbfgs_finds_the_minimum_under_jit():
    x = jaxprc.jit(lambda x0: jaxprc.scipy.optimize.minimize(_quadratic(xnp), x0, method=LBFGS).x)(xnp.zeros(3))
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0], atol=1e-5)


class Operator:
    """A linear operator object: only ``@`` and a shape, as scipy's LinearOperator users write."""
    def __init__(self, a):
        self.a = a
        self.shape = a.shape

    def __matmul__(self, v):
        return self.a @ v


@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab"])
def test_sparse_solvers_take_operator_objects(solver):
    a = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)
    theirs = getattr(jax.scipy.sparse.linalg, solver)(Operator(jnp.asarray(a)), jnp.asarray(b))[0]
    ours = getattr(jaxprc.scipy.sparse.linalg, solver)(Operator(xnp.asarray(a)), xnp.asarray(b))[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(ours, np.linalg.solve(a, b), rtol=1e-4)


def test_sparse_solver_operator_errors_as_jax():
    for lib, np_ in ((jax, jnp), (jaxprc, xnp)):
        with pytest.raises(ValueError, match="square"):
            lib.scipy.sparse.linalg.cg(Operator(np_.ones((2, 3))), np_.ones(2))
        with pytest.raises(TypeError, match="function or ndarray"):
            lib.scipy.sparse.linalg.cg(object(), np_.ones(2))
