"""jaxprc.scipy.interpolate, .cluster.vq and .spatial.transform against JAX: values, dtypes, weak
types, gradients and argument errors. Each check runs one jitted function per library."""
import jax
import jax.numpy as jjnp
import jax.scipy.cluster.vq
import jax.scipy.interpolate
import jax.scipy.spatial.transform
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
import jaxprc.scipy.cluster.vq
import jaxprc.scipy.interpolate
import jaxprc.scipy.spatial.transform

# (library, its numpy, its scipy) for the generic check bodies below
JAX = (jax, jjnp, jax.scipy)
OURS = (jaxprc, jnp, jaxprc.scipy)

# Euler sequences: a deterministic sample of the 24 covering symmetric and not, extrinsic and
# intrinsic, both signs of the axis permutation (tests/test_scipy_more.py checks six others;
# JAX's as_euler costs ~0.4 s of compilation per sequence)
SEQS = ["zyx", "XYZ", "ZXY", "xyx", "YZY", "XZX"]
_RNG = np.random.default_rng(11)
QUATS = np.concatenate([
    _RNG.normal(size=(6, 4)),
    [[0, 0, 0, 1], [0, 0, 0, -1], [1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [1e-5, 0, 0, 1],
     [0.5, 0.5, 0.5, 0.5], [0, 0.70710677, 0, 0.70710677], [np.nan, 0, 0, 1], [np.inf, 0, 0, 1]]]).astype(np.float32)
GIMBAL = {s: np.array([[0.3, m, -0.4] for m in ((0., np.pi) if s[0] == s[2] else (np.pi / 2, -np.pi / 2))] +
                      [[0.3, m + 1e-4, 0.2] for m in ((0., np.pi) if s[0] == s[2] else (np.pi / 2, -np.pi / 2))],
                      np.float32) for s in SEQS}


def _close(ours, theirs, what, tol=3e-5):
    ours_l, theirs_l = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(ours_l) == len(theirs_l), what
    for n, (a, b) in enumerate(zip(ours_l, theirs_l)):
        a_np, b_np = np.asarray(a), np.asarray(b)
        assert a_np.dtype == b_np.dtype and a_np.shape == b_np.shape, (what, n, a_np.dtype, b_np.dtype, a_np.shape, b_np.shape)
        np.testing.assert_allclose(a_np, b_np, rtol=tol, atol=tol, err_msg=f"{what} #{n}")


def _both(body, *args, tol=3e-5, what=""):
    _close(jaxprc.jit(lambda *a: body(OURS, *a))(*args), jax.jit(lambda *a: body(JAX, *a))(*args), what, tol)


def _rotation_values(lib, q, v):
    _, np_, sp = lib
    R = sp.spatial.transform.Rotation
    r = R.from_quat(q)
    m = r.as_matrix()
    out = dict(quat=r.quat, matrix=m, rotvec=r.as_rotvec(), degrees=r.as_rotvec(degrees=True), mrp=r.as_mrp(),
               magnitude=r.magnitude(), canonical=r.as_quat(canonical=True, scalar_first=True), inv=r.inv().quat,
               mul=(r * r[::-1]).quat, apply=r.apply(v), apply_inv=r.apply(v, inverse=True),
               apply_one=r[0].apply(v), from_matrix=R.from_matrix(m).quat, from_rotvec=R.from_rotvec(r.as_rotvec()).quat,
               from_mrp=R.from_mrp(r.as_mrp()).quat, raw_rotvec=R(q).as_rotvec(), raw_mrp=R(q).as_mrp(),
               concat=R.concatenate([r, r[:2]]).quat, identity=R.identity().quat,
               mean=np_.abs(r[:8].mean().quat), weighted_mean=np_.abs(r[:8].mean(np_.arange(8.)).quat))
    return out


def test_rotation_values():
    v = _RNG.normal(size=(len(QUATS), 3)).astype(np.float32)
    _both(_rotation_values, QUATS, v, what="rotation", tol=1e-4)


def _euler(lib, q):
    R = lib[2].spatial.transform.Rotation
    r = R.from_quat(q)
    out = {}
    for s in SEQS:
        locked = R.from_euler(s, GIMBAL[s])
        out[s] = (r.as_euler(s), R.from_euler(s, 50 * r.as_euler(s), degrees=True).quat, locked.as_euler(s))
    for s in ("x", "ZX"):
        out[s] = R.from_euler(s, q[:, :len(s)]).quat
    out["degrees"] = r.as_euler("zxz", degrees=True)
    return out


def test_euler_all_sequences_and_gimbal_lock():
    _both(_euler, QUATS[:-2], what="euler", tol=2e-4)      # (NaN/inf rows: arctan2 branch cuts differ in sign)


def _slerp(lib, q, key_times, t):
    tr = lib[2].spatial.transform
    s = tr.Slerp.init(key_times, tr.Rotation.from_quat(q))
    return s(t).quat, s(1.7).quat


def test_slerp():
    _both(_slerp, QUATS[:4], np.array([0., 1., 2.5, 3.], np.float32),
          np.array([-0.5, 0., 0.3, 1., 2., 2.5, 3., 3.5], np.float32), what="slerp", tol=1e-4)


def _rotation_grads(lib, q, v):
    """Per-row gradients (the rows are independent, so the gradient of the sum holds them all)."""
    L, np_, sp = lib
    R = sp.spatial.transform.Rotation
    w = np_.arange(1., 10.).reshape(3, 3)
    return (L.grad(lambda x: (R.from_rotvec(x).as_matrix() * w).sum())(v),
            L.grad(lambda x: (R.from_quat(x).as_euler("zyx") * w[0]).sum())(q),
            L.grad(lambda x: (R.from_quat(x).as_rotvec() * w[2]).sum())(q),
            L.grad(lambda x: (R.from_matrix(R.from_quat(x).as_matrix()).quat * np_.arange(4.)).sum())(q),
            L.grad(lambda x: (R.from_quat(x).apply(w[1]) * w[2] + R.from_quat(x).as_mrp() * w[0]).sum())(q))


def test_rotation_grads():
    v = _RNG.normal(size=(5, 3)).astype(np.float32)
    _both(_rotation_grads, QUATS[:6], v, what="grads", tol=2e-4)


def test_derivatives_at_identity_are_finite_where_jax_gives_nan():
    """A deliberate difference: JAX differentiates both branches of its small-angle ``where``
    (and sqrt at 0), so the exponential and logarithm maps have NaN derivatives at the identity;
    jaxprc's are the true ones (which JAX gives a hair away from the identity)."""
    from_rv = lambda R: lambda x: R.from_rotvec(x).as_matrix().sum() + R.from_rotvec(x).quat[0]  # noqa: E731
    as_rv = lambda R: lambda x: (R(x).as_rotvec() * jjnp.arange(1., 4.)).sum()  # noqa: E731
    jr, ours = jax.scipy.spatial.transform.Rotation, jaxprc.scipy.spatial.transform.Rotation
    assert np.isnan(jax.grad(from_rv(jr))(jjnp.zeros(3))).all()
    np.testing.assert_allclose(jaxprc.grad(from_rv(ours))(jnp.zeros(3)),
                               jax.grad(from_rv(jr))(jjnp.array([1e-3, 0., 0.]) * 1.01), atol=3e-3)
    q = np.array([0., 0., 0., 1.], np.float32)
    assert np.isnan(jax.grad(as_rv(jr))(q)).all()
    np.testing.assert_allclose(jaxprc.grad(lambda x: (ours(x).as_rotvec() * jnp.arange(1., 4.)).sum())(q),
                               [2., 4., 6., 0.], atol=1e-6)


def _kinds(structs):
    return [(s.shape, np.dtype(s.dtype), s.weak_type) for s in structs]


def test_dtypes_and_weak_types():
    def kinds(lib):
        R = lib[2].spatial.transform.Rotation
        outs = [R.from_euler("z", 90., degrees=True).quat, R.from_euler("xy", np.array([90, 30])).quat,
                R.from_quat(np.array([0, 0, 0, 1])).quat, R.from_rotvec(np.array([1, 2, 3])).quat,
                R.identity().magnitude(), R.identity().as_mrp(), R.identity().apply(np.array([1, 2, 3])),
                R.from_quat(np.array([0, 0, 1, -1], np.float16)).as_euler("xyz"),
                R.from_quat(np.array([0, 0, 1, -1], np.float16)).as_rotvec()]
        return outs
    # eval_shape: dtypes and weak types without compiling anything
    assert _kinds(jaxprc.eval_shape(lambda: kinds(OURS))) == _kinds(jax.eval_shape(lambda: kinds(JAX)))


@pytest.mark.x64
def test_x64_dtypes():
    def kinds(lib):
        _, np_, sp = lib
        R, I = sp.spatial.transform.Rotation, sp.interpolate.RegularGridInterpolator
        g = (np.array([0., 1., 3.], np.float32),)
        outs = [R.identity().quat, R.from_euler("z", 1.).quat, R.from_quat(np.ones(4, np.float32)).as_euler("xyz"),
                R.from_quat(np.ones(4, np.float32)).apply(np.ones(3)), I(g, np.ones(3, np.float32))(np.array([0.5])),
                I(g, np.ones(3, np.float32))(np.array([0.5], np.float32)), *sp.cluster.vq.vq(np.ones((2, 2)), np.ones((2, 2)))]
        return outs
    assert _kinds(jaxprc.eval_shape(lambda: kinds(OURS))) == _kinds(jax.eval_shape(lambda: kinds(JAX)))


GRID = (np.array([0., 1., 3.], np.float32), np.array([-1., 0.5], np.float32))
XI = np.array([[0.5, 0.], [0., -1.], [3., 0.5], [1., 0.5], [2., 0.], [-1., 0.], [4., 0.], [np.nan, 0.],
               [0.5, np.inf], [1., -np.inf], [2.2, -0.3]], np.float32)


def _interp(lib, values, xi):
    L, np_, sp = lib
    I = sp.interpolate.RegularGridInterpolator
    out = {}
    for method in ("linear", "nearest"):
        for name, fill in (("nan", np.nan), ("none", None), ("seven", 7.)):
            out[method + name] = I(GRID, values, method=method, fill_value=fill)(xi)
    out["tuple"] = I(GRID, values)((xi[:, 0], xi[:, 1]))
    out["batched"] = I(GRID, values)(xi[:8].reshape(2, 4, 2))
    out["call_method"] = I(GRID, values)(xi, method="nearest")
    finite = xi[:7]
    out["grad_values"] = L.grad(lambda v: I(GRID, v)(finite).sum())(values)
    out["grad_points"] = L.grad(lambda x: I(GRID, values, fill_value=None)(x).sum())(xi[np.array([0, 3, 4, 10])])
    out["vmap"] = L.vmap(lambda v: I(GRID, v)(finite))(np_.stack([values, 2 * values]))
    return out


def test_interpolator():
    values = np.arange(12., dtype=np.float32).reshape(3, 2, 2) ** 1.5
    _both(_interp, values, XI, what="interpolate")
    one_d = lambda lib, v, x: lib[2].interpolate.RegularGridInterpolator((np.arange(3),), v)(x)  # noqa: E731
    _both(one_d, np.array([0, 1, 5]), np.array([0.5, 2.]), what="1-d, integer values")


def _vq(lib, obs, book, obs1, book1):
    vq = lib[2].cluster.vq.vq
    return vq(obs, book), vq(obs1, book1), vq(obs[:0], book), lib[0].grad(lambda o: vq(o, book)[1].sum())(obs)


def test_vq():
    obs = _RNG.normal(size=(6, 3)).astype(np.float32)
    book = _RNG.normal(size=(4, 3)).astype(np.float32)
    obs[0] = book[2] + 0.5
    _both(_vq, obs, book, np.array([1., 5., 2.]), np.array([0., 4., 6.]), what="vq")
    _close(jaxprc.scipy.cluster.vq.vq(np.array([1, 2]), np.array([1, 0])),
           jax.scipy.cluster.vq.vq(np.array([1, 2]), np.array([1, 0])), "vq integers")


BAD_CALLS = [
    lambda sp: sp.spatial.transform.Rotation.from_euler("xxy", np.zeros(3)),
    lambda sp: sp.spatial.transform.Rotation.from_euler("xYz", np.zeros(3)),
    lambda sp: sp.spatial.transform.Rotation.from_euler("xyzx", np.zeros(4)),
    lambda sp: sp.spatial.transform.Rotation.identity().as_euler("xy"),
    lambda sp: sp.spatial.transform.Rotation.identity()[0],
    lambda sp: len(sp.spatial.transform.Rotation.identity()),
    lambda sp: sp.spatial.transform.Rotation.from_quat(np.ones((3, 4))).mean(np.ones(2)),
    lambda sp: sp.spatial.transform.Slerp.init(np.arange(2.), sp.spatial.transform.Rotation.identity()),
    lambda sp: sp.spatial.transform.Slerp.init(np.arange(3.), sp.spatial.transform.Rotation.from_quat(np.ones((2, 4)))),
    lambda sp: sp.interpolate.RegularGridInterpolator(GRID, np.zeros((3, 2)), method="cubic"),
    lambda sp: sp.interpolate.RegularGridInterpolator(GRID, np.zeros((3, 2)), bounds_error=True),
    lambda sp: sp.interpolate.RegularGridInterpolator(GRID * 2, np.zeros((3, 2))),
    lambda sp: sp.interpolate.RegularGridInterpolator(GRID, np.zeros((3, 2)), fill_value=1j),
    lambda sp: sp.interpolate.RegularGridInterpolator(GRID, np.zeros((3, 2)))(np.zeros((1, 3))),
    lambda sp: sp.cluster.vq.vq(np.ones((2, 2)), np.ones(2)),
    lambda sp: sp.cluster.vq.vq(np.ones((2, 2, 2)), np.ones((2, 2, 2))),
    lambda sp: sp.cluster.vq.vq(np.ones((2, 2)), np.ones((0, 2))),
]


@pytest.mark.parametrize("n", range(len(BAD_CALLS)))
def test_same_errors(n):
    errors = []
    for sp in (jaxprc.scipy, jax.scipy):
        with pytest.raises(Exception) as info:
            BAD_CALLS[n](sp)
        errors.append(info.type)
    assert errors[0] is errors[1]


def test_convolution_matrix_batches_over_leading_axes_as_jax():
    import jax.scipy.linalg
    import jaxprc.scipy.linalg
    a = np.arange(1., 9., dtype=np.float32).reshape(2, 1, 4) - 3
    for n, mode in ((1, "full"), (3, "same"), (6, "valid"), (2, "valid")):
        theirs = jax.scipy.linalg.convolution_matrix(a, n, mode)
        ours = jaxprc.scipy.linalg.convolution_matrix(a, n, mode)
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    for lib in (jax.scipy.linalg, jaxprc.scipy.linalg):
        with pytest.raises(ValueError, match="positive integer"):
            lib.convolution_matrix(a, 0)
        with pytest.raises(ValueError, match="scalar"):
            lib.convolution_matrix(np.float32(1), 2)
