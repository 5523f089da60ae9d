"""jaxprc.scipy.interpolate, .cluster.vq and .spatial.transform: identities, finite differences,
jit/vmap agreement and the text round trip (no JAX import; JAX comparisons live in
tests_oracle/test_scipy_more_oracle.py)."""
import itertools

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc.scipy.cluster.vq import vq
from jaxprc.scipy.interpolate import RegularGridInterpolator
from jaxprc.scipy.spatial.transform import Rotation, Slerp
from roundtrip import assert_round_trip

RNG = np.random.default_rng(7)
QUATS = np.concatenate([RNG.normal(size=(5, 4)),
                        [[0, 0, 0, 1], [0, 0, 0, -1], [1, 0, 0, 0], [0, 0, 1, 0], [1e-5, 0, 0, 1]]]).astype(np.float32)
SEQS = ["".join(p) for p in itertools.product("xyz", repeat=3) if p[0] != p[1] and p[1] != p[2]]
# a deterministic sample (symmetric and not, extrinsic and intrinsic); the oracle test sweeps all 24
EULER_SAMPLE = ["xyz", "ZYX", "zxz", "YXY", "xzy", "ZXZ"]


def _same_rotation(a, b, atol=2e-5):
    """Quaternions equal up to their sign."""
    a, b = np.asarray(a), np.asarray(b)
    assert np.minimum(np.abs(a - b).max(-1), np.abs(a + b).max(-1)).max() <= atol


# ------------------------------------------------------------------------------ Rotation
@jx.jit
def _conversions(q):
    r = Rotation.from_quat(q)
    return dict(quat=r.quat, matrix=r.as_matrix(), rotvec=r.as_rotvec(), mrp=r.as_mrp(), magnitude=r.magnitude(),
                from_matrix=Rotation.from_matrix(r.as_matrix()).quat,
                from_rotvec=Rotation.from_rotvec(r.as_rotvec()).quat,
                from_degrees=Rotation.from_rotvec(r.as_rotvec(degrees=True), degrees=True).quat,
                from_mrp=Rotation.from_mrp(r.as_mrp()).quat)


def test_conversions_round_trip():
    c = _conversions(QUATS)
    np.testing.assert_allclose(np.linalg.norm(c["quat"], axis=-1), 1, atol=1e-6)
    for name in ("from_matrix", "from_rotvec", "from_mrp"):
        _same_rotation(c[name], c["quat"])
    _same_rotation(c["from_degrees"], c["quat"], 1e-4)
    m = np.asarray(c["matrix"])
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(3), m.shape), atol=1e-5)
    np.testing.assert_allclose(np.linalg.det(m), 1, atol=1e-5)
    np.testing.assert_allclose(c["magnitude"], np.linalg.norm(c["rotvec"], axis=-1), atol=1e-5)
    assert np.all(np.asarray(c["magnitude"]) <= np.pi + 1e-6)
    assert np.all(np.linalg.norm(c["mrp"], axis=-1) <= 1 + 1e-6)


def _lock_angles(seq):
    """Euler angles with the middle one at its gimbal-lock limits."""
    symmetric = seq[0].lower() == seq[2].lower()
    return np.array([[0.3, 0. if symmetric else np.pi / 2, -0.4],
                     [0.3, np.pi if symmetric else -np.pi / 2, 0.2]], np.float32)


@jx.jit
def _euler_round_trips(q):
    r = Rotation.from_quat(q)
    out = {}
    for seq in EULER_SAMPLE:
        locked = Rotation.from_euler(seq, _lock_angles(seq))
        out[seq] = (r.as_euler(seq), Rotation.from_euler(seq, r.as_euler(seq)).quat,
                    Rotation.from_euler(seq, r.as_euler(seq, degrees=True), degrees=True).quat,
                    locked.quat, Rotation.from_euler(seq, locked.as_euler(seq)).quat)
    return out


def test_euler_round_trip_all_sequences():
    out = _euler_round_trips(QUATS)
    for seq, (angles, back, back_degrees, locked, locked_back) in out.items():
        _same_rotation(back, QUATS / np.linalg.norm(QUATS, axis=-1, keepdims=True), 1e-4)
        _same_rotation(back_degrees, back, 1e-4)
        _same_rotation(locked_back, locked, 1e-4)      # gimbal lock still reproduces the rotation
        middle = np.asarray(angles)[:, 1]
        # all angles are wrapped to [-pi, pi) (as JAX): a middle angle of pi reads -pi
        assert np.all((middle >= -1e-6) | (middle <= -np.pi + 1e-6)) if seq[0].lower() == seq[2].lower() else \
            np.all(np.abs(middle) <= np.pi / 2 + 1e-6)


def test_euler_matches_elementary_composition():
    a = np.array([0.3, -1.2, 2.0], np.float32)
    rx, ry, rz = (Rotation.from_euler(c, a[i]) for i, c in enumerate("xyz"))
    _same_rotation(Rotation.from_euler("xyz", a).quat, (rz * ry * rx).quat)      # extrinsic
    _same_rotation(Rotation.from_euler("XYZ", a).quat, (rx * ry * rz).quat)      # intrinsic
    c, s = np.cos(0.3), np.sin(0.3)
    np.testing.assert_allclose(Rotation.from_euler("z", 0.3).as_matrix(), [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-6)
    np.testing.assert_allclose(Rotation.from_euler("z", 90., degrees=True).apply(np.array([1., 0, 0], np.float32)),
                               [0, 1, 0], atol=1e-6)


def test_composition_inverse_apply():
    r = Rotation.from_quat(QUATS)
    p = Rotation.from_quat(QUATS[::-1])
    _same_rotation((r * r.inv()).quat, np.broadcast_to([0, 0, 0, 1.], QUATS.shape))
    v = RNG.normal(size=(len(QUATS), 3)).astype(np.float32)
    np.testing.assert_allclose((r * p).apply(v), r.apply(p.apply(v)), atol=1e-5)
    np.testing.assert_allclose(r.apply(r.apply(v), inverse=True), v, atol=1e-5)
    np.testing.assert_allclose(r.inv().apply(v), r.apply(v, inverse=True), atol=1e-5)
    np.testing.assert_allclose(r.apply(v), np.einsum("nij,nj->ni", r.as_matrix(), v), atol=1e-5)
    np.testing.assert_allclose(r[0].apply(v), v @ np.asarray(r[0].as_matrix()).T, atol=1e-5)
    np.testing.assert_allclose(r.apply([1, 2, 3]), np.asarray(r.as_matrix()) @ [1, 2, 3], atol=1e-5)


def test_canonical_and_scalar_first():
    q = np.array([[0, 0, 0, -1], [0, -1, 0, 0], [0, 0, -1, 0], [-0.5, 0.5, 0.5, 0.5], [1, 0, 0, 0]], np.float32)
    c = np.asarray(Rotation(jnp.asarray(q)).as_quat(canonical=True))
    first = [row[[3, 0, 1, 2]][np.nonzero(row[[3, 0, 1, 2]])[0][0]] for row in c]
    assert np.all(np.array(first) > 0)
    _same_rotation(c, q)
    np.testing.assert_array_equal(Rotation(jnp.asarray(q)).as_quat(scalar_first=True), np.roll(q, 1, axis=-1))


def test_containers_and_constructors():
    r = Rotation.from_quat(QUATS)
    assert len(r) == len(QUATS) and not r.single and r[0].single
    assert len(r[1:3]) == 2
    with pytest.raises(TypeError, match="not subscriptable"):
        r[0][0]
    with pytest.raises(TypeError, match="no len"):
        len(r[0])
    both = Rotation.concatenate([r, r[0], r[2:4]])
    np.testing.assert_array_equal(both.quat, np.concatenate([r.quat, r.quat[:1], r.quat[2:4]]))
    np.testing.assert_array_equal(Rotation.identity().quat, [0, 0, 0, 1])
    assert Rotation.identity(3).quat.shape == (3, 4)
    rand = Rotation.random(jx.random.key(0), 1000)
    np.testing.assert_allclose(np.linalg.norm(rand.quat, axis=-1), 1, atol=1e-5)
    assert abs(float(np.mean(np.asarray(rand.as_matrix())[:, 0, 0]))) < 0.1     # uniform: E[R] = 0
    np.testing.assert_array_equal(Rotation.random(jx.random.key(0)).quat, Rotation.random(jx.random.key(0)).quat)
    m = Rotation.from_quat(np.broadcast_to(QUATS[0], (3, 4))).mean()
    _same_rotation(m.quat, r[0].quat)
    _same_rotation(Rotation.from_quat(QUATS[:2]).mean(np.array([1., 0.])).quat, r[0].quat)
    small = Rotation.from_rotvec(np.array([[0, 0, 0.1], [0, 0, -0.1]], np.float32))
    _same_rotation(small.mean().quat, [0, 0, 0, 1])


def test_argument_errors():
    with pytest.raises(ValueError, match="consecutive"):
        Rotation.from_euler("xxy", np.zeros(3))
    with pytest.raises(ValueError, match="Expected axes"):
        Rotation.from_euler("xYz", np.zeros(3))
    with pytest.raises(ValueError, match="upto 3"):
        Rotation.from_euler("xyzx", np.zeros(4))
    with pytest.raises(ValueError, match="from_euler.*length 3"):
        Rotation.from_euler("xyz", np.zeros(2))
    with pytest.raises(ValueError, match="3 axes"):
        Rotation.identity().as_euler("xy")
    with pytest.raises(ValueError, match="from_quat.*length 4"):
        Rotation.from_quat(np.zeros(3))
    with pytest.raises(ValueError, match="from_matrix"):
        Rotation.from_matrix(np.eye(4))
    with pytest.raises(ValueError, match="apply"):
        Rotation.identity().apply(np.ones(4))
    with pytest.raises(ValueError, match="weights"):
        Rotation.from_quat(QUATS).mean(np.ones(2))
    with pytest.raises(ValueError, match="at least 2"):
        Slerp.init(np.zeros(1), Rotation.from_quat(QUATS[:1]))
    with pytest.raises(ValueError, match="timestamps"):
        Slerp.init(np.arange(3.), Rotation.from_quat(QUATS[:2]))


@jx.jit
def _nan_and_empty(q, e, v):
    r, re = Rotation.from_quat(q), Rotation.from_quat(e)
    return r.as_matrix(), (re.as_matrix(), re.as_euler("zyz"), re.as_rotvec(), re.magnitude(), re.apply(v))


def test_nan_and_empty():
    m, empties = _nan_and_empty(np.array([[np.nan, 0, 0, 1], [0, 0, 0, 1]], np.float32),
                                np.zeros((0, 4), np.float32), np.zeros((0, 3), np.float32))
    assert np.isnan(m[0]).all() and not np.isnan(m[1]).any()
    assert [x.shape for x in empties] == [(0, 3, 3), (0, 3), (0, 3), (0,), (0, 3)]


def _fd_jacobian(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    cols = [(np.asarray(f(x + eps * d)) - np.asarray(f(x - eps * d))) / (2 * eps) for d in np.eye(x.size)]
    return np.stack(cols, axis=-1)


def test_derivatives_at_zero_rotation_vector():
    """The exponential and logarithm maps are smooth at the identity: exact derivatives there."""
    jac = jx.jacfwd(lambda v: Rotation.from_rotvec(v).quat)(jnp.zeros(3))
    np.testing.assert_allclose(jac, np.vstack([0.5 * np.eye(3), np.zeros(3)]), atol=1e-7)
    np.testing.assert_allclose(jx.jacrev(lambda v: Rotation.from_rotvec(v).as_rotvec())(jnp.zeros(3)),
                               np.eye(3), atol=1e-7)
    np.testing.assert_allclose(jx.jacrev(lambda q: Rotation(q).as_rotvec())(jnp.array([0., 0, 0, 1])),
                               np.hstack([2 * np.eye(3), np.zeros((3, 1))]), atol=1e-7)
    # d/dv (R(v) x) at v = 0 is -[x]_x
    x = np.array([1., 2., 3.], np.float32)
    skew = np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])
    np.testing.assert_allclose(jx.jacfwd(lambda v: Rotation.from_rotvec(v).apply(x))(jnp.zeros(3)), -skew, atol=1e-6)


def _chain(v):
    return jnp.concatenate([Rotation.from_rotvec(v).as_matrix().reshape(-1),
                            Rotation.from_rotvec(v * 1e-4).as_rotvec(),      # the small-angle series
                            Rotation.from_mrp(v).as_quat(),
                            Rotation.from_matrix(Rotation.from_mrp(v).as_matrix()).as_quat()])


def test_derivatives_match_finite_differences():
    """Forward mode along one tangent and reverse mode for one cotangent, against central
    differences of the whole chain."""
    with jx.enable_x64(True):
        v0, t = np.array([0.3, -0.2, 0.5]), np.array([0.7, 0.1, -0.4])
        fd = _fd_jacobian(jx.jit(_chain), v0)
        ct = np.random.default_rng(3).normal(size=fd.shape[0])
        np.testing.assert_allclose(jx.jit(lambda v, t: jx.jvp(_chain, (v,), (t,))[1])(v0, t), fd @ t, atol=1e-6)
        np.testing.assert_allclose(jx.jit(jx.grad(lambda v: jnp.dot(_chain(v), ct)))(v0), ct @ fd, atol=1e-6)


def test_slerp():
    keys = Rotation.from_quat(QUATS[:4])
    times = np.array([0., 1., 2.5, 3.], np.float32)

    @jx.jit
    def run(times, keys):
        s = Slerp.init(times, keys)
        half = s(0.5)
        assert half.single
        return s(times).quat, (keys[0].inv() * half).quat, Rotation.from_rotvec((keys[0].inv() * keys[1]).as_rotvec() / 2).quat

    at_keys, half, expected = run(times, keys)
    _same_rotation(at_keys, keys.quat, 1e-5)
    _same_rotation(half, expected, 1e-5)
    s = Slerp.init(times, keys)
    with pytest.raises(ValueError, match="at most 1-dimensional"):
        s(np.zeros((2, 2)))


def test_pytrees_jit_vmap_and_text():
    r = Rotation.from_quat(QUATS)
    v = RNG.normal(size=(len(QUATS), 3)).astype(np.float32)
    f = jx.jit(lambda r, v: (r * r.inv(), r.apply(v), r.as_euler("ZYX")))
    out = f(r, v)
    assert isinstance(out[0], Rotation)
    np.testing.assert_allclose(out[1], r.apply(v), atol=1e-6)
    np.testing.assert_allclose(jx.vmap(lambda r, v: r.apply(v))(r, v), r.apply(v), atol=1e-6)
    s = Slerp.init(np.arange(4.), Rotation.from_quat(QUATS[:4]))
    t = np.array([0.2, 1.7], np.float32)
    np.testing.assert_allclose(jx.jit(lambda s, t: s(t).quat)(s, t), s(t).quat, atol=1e-6)
    assert_round_trip(jx.make_jaxpr(lambda q, v: Rotation.from_quat(q).apply(v) + Rotation.from_quat(q).as_rotvec())(QUATS, v))


# ------------------------------------------------------------------------------ interpolate
GRID = (np.array([0., 1., 3.], np.float32), np.array([-1., 0.5], np.float32))


def _affine(x, y):
    return 2 * x - 3 * y + 0.5 * x * y + 1     # bilinear: reproduced exactly by linear interpolation


@jx.jit
def _interpolations(values, xi, outside, xs, ys):
    it = RegularGridInterpolator(GRID, values)
    return (it(xi), it(outside), RegularGridInterpolator(GRID, values, fill_value=7.)(outside),
            RegularGridInterpolator(GRID, values, fill_value=None)(outside),
            it((xs, ys)), it(xi.reshape(5, 1, 2)), it(xi[:0]))


def test_linear_reproduces_bilinear_function_and_fill():
    values = _affine(*np.meshgrid(*GRID, indexing="ij"))
    xi = np.array([[0.5, 0.], [0., -1.], [3., 0.5], [1., 0.5], [2.2, -0.3]], np.float32)
    outside = np.array([[-1., 0.], [4., 0.], [1., 0.6], [np.nan, 0.]], np.float32)
    xs, ys = np.array([0.5, 2.2], np.float32), np.array([0., -0.3], np.float32)
    inside, nan_filled, filled, extrapolated, tup, batched, empty = _interpolations(values, xi, outside, xs, ys)
    np.testing.assert_allclose(inside, _affine(xi[:, 0], xi[:, 1]), rtol=1e-5)
    np.testing.assert_array_equal(np.isnan(nan_filled), True)
    np.testing.assert_allclose(filled[:3], 7.)
    assert np.isnan(filled[3])                 # NaN coordinates are not "outside": they give NaN
    # fill_value=None extrapolates the edge cell's bilinear function
    np.testing.assert_allclose(extrapolated[:3], _affine(outside[:3, 0], outside[:3, 1]), rtol=1e-5)
    np.testing.assert_allclose(tup, _affine(xs, ys), rtol=1e-5)
    assert batched.shape == (5, 1) and empty.shape == (0,)


def test_nearest_and_trailing_dims():
    values = np.arange(12., dtype=np.float32).reshape(3, 2, 2)
    it = RegularGridInterpolator(GRID, values, method="nearest")
    xi = np.array([[0.5, -1.], [0.6, 0.5], [2.9, -0.5], [2., -0.25]], np.float32)
    # ties (0.5 between 0 and 1, -0.25 between -1 and 0.5) go to the lower node
    np.testing.assert_array_equal(it(xi), values[[0, 1, 2, 1], [0, 1, 0, 0]])
    lin = RegularGridInterpolator(GRID, values)(xi, method="linear")
    assert lin.shape == (4, 2)
    np.testing.assert_allclose(lin[:, 1] - lin[:, 0], 1, rtol=1e-6)


def test_interpolator_errors():
    values = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match="not defined"):
        RegularGridInterpolator(GRID, values, method="cubic")
    with pytest.raises(NotImplementedError, match="bounds_error"):
        RegularGridInterpolator(GRID, values, bounds_error=True)
    with pytest.raises(ValueError, match="point arrays"):
        RegularGridInterpolator(GRID * 2, values)
    with pytest.raises(ValueError, match="fill_value"):
        RegularGridInterpolator(GRID, values, fill_value=1j)
    with pytest.raises(ValueError, match="dimension 3"):
        RegularGridInterpolator(GRID, values)(np.zeros((1, 3), np.float32))


def test_interpolator_derivatives_jit_vmap():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 2)).astype(np.float32)
    xi = np.array([[0.5, 0.], [2.2, -0.3], [1.3, 0.1]], np.float32)
    f = lambda vals, x: RegularGridInterpolator(GRID, vals)(x).sum()  # noqa: E731
    # linear in the values: the gradient is the sum of the interpolation weights
    gv = jx.grad(f)(values, xi)
    np.testing.assert_allclose(gv.sum(), len(xi), rtol=1e-6)
    with jx.enable_x64(True):
        x64, v64 = xi.astype(np.float64), values.astype(np.float64)
        f64 = jx.jit(f)
        fd = _fd_jacobian(lambda x: f64(v64, x.reshape(3, 2)), x64.reshape(-1))
        np.testing.assert_allclose(jx.grad(f, 1)(v64, x64).reshape(-1), fd, atol=1e-6)
    it = RegularGridInterpolator(GRID, values)
    expected = it(xi)

    @jx.jit
    def transformed(it, xi):        # the interpolator as a pytree argument; vmap over points and values
        return it(xi), jx.vmap(lambda x: it(x[None])[0])(xi), \
            jx.vmap(lambda v: RegularGridInterpolator(GRID, v)(xi))(jnp.stack([it.values, 2 * it.values]))

    jitted, over_points, over_values = transformed(it, xi)
    np.testing.assert_allclose(jitted, expected, atol=1e-6)
    np.testing.assert_allclose(over_points, expected, atol=1e-6)
    np.testing.assert_allclose(over_values, np.stack([expected, 2 * expected]), rtol=1e-5)


# ------------------------------------------------------------------------------ vq
def test_vq_against_brute_force():
    rng = np.random.default_rng(2)
    obs, book = rng.normal(size=(7, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    d = np.linalg.norm(obs[:, None] - book[None], axis=-1)
    code, dist = vq(obs, book)
    np.testing.assert_array_equal(code, d.argmin(-1))
    np.testing.assert_allclose(dist, d.min(-1), rtol=1e-5)
    code, dist = vq(np.array([1., 5.]), np.array([0., 4., 6.]))       # 1-D: scalar observations
    np.testing.assert_array_equal(code, [0, 1])                       # 5 is tied: the first code
    np.testing.assert_allclose(dist, [1., 1.])
    assert vq(np.zeros((0, 3), np.float32), book)[0].shape == (0,)
    np.testing.assert_array_equal(jx.jit(vq)(obs, book)[0], d.argmin(-1))
    with pytest.raises(ValueError, match="same rank"):
        vq(obs, book[0])
    with pytest.raises(ValueError, match="ndim"):
        vq(obs[None], book[None])
