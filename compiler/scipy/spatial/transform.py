"""jax.scipy.spatial.transform: 3-D rotations stored as unit quaternions (x, y, z, w), and
spherical linear interpolation between them.

``Rotation`` and ``Slerp`` are named tuples, hence pytrees, so they pass through jit, vmap and
grad. Every conversion works on the last axis of its operand, so stacks of rotations of any
leading shape are handled by the same array code (no per-rotation vectorization).

Rotation vectors near zero use Taylor series *and* keep the exact branch away from zero (the
``where`` trick): the exponential and logarithm maps then have their true derivatives at the
identity, where JAX's gradients are NaN.
"""
from __future__ import annotations

import re
import typing

import numpy as np

from jaxprc import numpy as jnp
from jaxprc import random as _random
from jaxprc.ir import dtypes as dt

from ...numpy._util import aval_of, located

__all__ = ["Rotation", "Slerp"]

_SMALL_ANGLE = 1e-3        # below it, the rotation-vector maps use their Taylor series (as JAX)
_GIMBAL_EPS = 1e-7         # a middle Euler angle this close to 0 or pi is a gimbal lock (as JAX)


def _inexact(x, fn: str, last: int | None = None):
    """``x`` as a strongly typed inexact array (integers become the default float), checking
    that its last axis has length ``last``."""
    if not isinstance(x, (list, tuple)):
        aval_of(x, fn)
    x = jnp.asarray(x)
    dtype = x.dtype if dt.is_inexact(x.dtype) else dt.default_float_dtype()
    x = jnp.asarray(x, dtype=dtype)
    if last is not None and (x.ndim == 0 or x.shape[-1] != last):
        raise ValueError(f"{located(fn)}: expected an array whose last axis has length {last}, "
                         f"got shape {x.shape}")
    return x


def _parts(x):
    return [x[..., i] for i in range(x.shape[-1])]


def _sum_squares(v):
    return jnp.sum(v * v, axis=-1)


def _norm(v):
    return jnp.sqrt(_sum_squares(v))


def _normalize(quat):
    return quat / _norm(quat)[..., None]


def _compose(p, q):
    """The quaternion product p * q (apply q, then p)."""
    c = jnp.cross(p[..., :3], q[..., :3])
    px, py, pz, pw = _parts(p)
    qx, qy, qz, qw = _parts(q)
    return jnp.stack([pw * qx + qw * px + c[..., 0], pw * qy + qw * py + c[..., 1],
                      pw * qz + qw * pz + c[..., 2], pw * qw - px * qx - py * qy - pz * qz], axis=-1)


def _as_matrix(quat):
    x, y, z, w = _parts(quat)
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
            [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
            [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _from_matrix(m):
    """Shepperd's method: the quaternion is built from the largest of the diagonal entries and the
    trace, whichever keeps the division well conditioned."""
    e = lambda r, c: m[..., r, c]  # noqa: E731
    trace = e(0, 0) + e(1, 1) + e(2, 2)
    choice = jnp.argmax(jnp.stack([e(0, 0), e(1, 1), e(2, 2), trace], axis=-1), axis=-1)
    quat = jnp.stack([e(2, 1) - e(1, 2), e(0, 2) - e(2, 0), e(1, 0) - e(0, 1), 1 + trace], axis=-1)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        comp = [None] * 4
        comp[i] = 1 - trace + 2 * e(i, i)
        comp[j] = e(j, i) + e(i, j)
        comp[k] = e(k, i) + e(i, k)
        comp[3] = e(k, j) - e(j, k)
        quat = jnp.where((choice == i)[..., None], jnp.stack(comp, axis=-1), quat)
    return _normalize(quat)


def _from_rotvec(rotvec):
    angle2 = _sum_squares(rotvec)
    small = jnp.sqrt(angle2) <= _SMALL_ANGLE
    angle = jnp.sqrt(jnp.where(small, 1, angle2))       # the exact branch never sees angle 0
    scale = jnp.where(small, 0.5 - angle2 / 48 + angle2 * angle2 / 3840, jnp.sin(angle / 2) / angle)
    w = jnp.where(small, 1 - angle2 / 8 + angle2 * angle2 / 384, jnp.cos(angle / 2))
    return jnp.concatenate([scale[..., None] * rotvec, w[..., None]], axis=-1)


def _as_rotvec(quat):
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)    # w >= 0, so that 0 <= angle <= pi
    v, w = quat[..., :3], quat[..., 3]
    n2 = _sum_squares(v)
    small = 2 * jnp.arctan2(jnp.sqrt(n2), w) <= _SMALL_ANGLE
    # Small angles: angle**2 from t = tan(angle/2)**2 = n2/w**2, a smooth function of the
    # quaternion (angle**2 = 4t - 8t**2/3 + O(t**3)).
    t = n2 / jnp.square(jnp.where(small & (w != 0), w, 1))
    a2 = 4 * t - 8 * t * t / 3
    small_scale = 2 + a2 / 12 + 7 * a2 * a2 / 2880
    angle = 2 * jnp.arctan2(jnp.sqrt(jnp.where(small, 1, n2)), w)
    scale = jnp.where(small, small_scale, angle / jnp.sin(angle / 2))
    return scale[..., None] * v


def _as_mrp(quat):
    sign = jnp.where(quat[..., 3] < 0, -1., 1.)
    return sign[..., None] * quat[..., :3] / (1. + sign * quat[..., 3])[..., None]


def _from_mrp(mrp):
    s = _sum_squares(mrp) + 1
    return jnp.concatenate([2 * mrp, (2 - s)[..., None]], axis=-1) / s[..., None]


def _make_canonical(quat):
    """The sign of ``quat`` whose first nonzero component, in the order w, x, y, z, is positive."""
    x, y, z, w = _parts(quat)
    flip = (w < 0) | ((w == 0) & ((x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))))))
    return jnp.where(flip[..., None], -quat, quat)


def _parse_seq(seq: str, fn: str, exactly_three: bool):
    """Axis indices of an Euler sequence and whether it is intrinsic (upper case)."""
    if exactly_three and len(seq) != 3:
        raise ValueError(f"Expected 3 axes, got {seq}.")
    if not 1 <= len(seq) <= 3:
        raise ValueError(f"Expected axis specification to be a non-empty string of upto 3 characters, got {seq}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    if not (intrinsic or re.match(r"^[xyz]{1,3}$", seq)):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return ["xyz".index(c) for c in seq.lower()], intrinsic


def _elementary(axis: int, angle):
    zero = jnp.zeros_like(angle)
    comp = [zero, zero, zero, jnp.cos(angle / 2)]
    comp[axis] = jnp.sin(angle / 2)
    return jnp.stack(comp, axis=-1)


def _as_euler(quat, axes, extrinsic: bool):
    """The quaternion method of Bernardes & Viollet (2022), as scipy and JAX use it; in a gimbal
    lock the third (extrinsic) or first (intrinsic) angle is set to zero."""
    first, third = (0, 2) if extrinsic else (2, 0)
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    q = _parts(quat)
    if symmetric:
        a, b, c, d = q[3], q[i], q[j], q[k] * sign
    else:
        a, b, c, d = q[3] - q[j], q[i] + q[k] * sign, q[j] + q[3], q[k] * sign - q[i]
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    at_zero = jnp.abs(middle) <= _GIMBAL_EPS
    regular = ~at_zero & ~(jnp.abs(middle - np.pi) <= _GIMBAL_EPS)
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    locked = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    angles = [None, middle, None]
    angles[first] = jnp.where(regular, half_sum - half_diff, locked if first == 0 else 0)
    angles[third] = jnp.where(regular, half_sum + half_diff, locked if third == 0 else 0)
    if not symmetric:
        angles[third] = angles[third] * sign
        angles[1] = angles[1] - np.pi / 2
    angles = jnp.stack(angles, axis=-1)
    return (angles + np.pi) % (2 * np.pi) - np.pi


class Rotation(typing.NamedTuple):
    """Rotations in 3 dimensions, as ``scipy.spatial.transform.Rotation``: ``quat`` holds one
    (shape (4,)) or several (shape (..., 4)) unit quaternions in scalar-last order."""
    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations: typing.Sequence):
        """One stack of all the rotations (single rotations count as one each)."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """From Euler angles about the axes of ``seq`` (lower case: extrinsic; upper case:
        intrinsic); ``angles`` has shape (..., len(seq)), or is a scalar for one axis."""
        axes, intrinsic = _parse_seq(seq, "Rotation.from_euler", exactly_three=False)
        angles = _inexact(jnp.atleast_1d(jnp.asarray(angles)), "Rotation.from_euler", len(axes))
        if degrees:
            angles = jnp.deg2rad(angles)
        quat = _elementary(axes[0], angles[..., 0])
        for n, axis in enumerate(axes[1:], 1):
            step = _elementary(axis, angles[..., n])
            quat = _compose(quat, step) if intrinsic else _compose(step, quat)
        return cls(quat)

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices, shape (..., 3, 3)."""
        matrix = _inexact(matrix, "Rotation.from_matrix", 3)
        if matrix.ndim < 2 or matrix.shape[-2] != 3:
            raise ValueError(f"{located('Rotation.from_matrix')}: expected matrices of shape (..., 3, 3), "
                             f"got shape {matrix.shape}")
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp):
        """From Modified Rodrigues Parameters, shape (..., 3)."""
        return cls(_from_mrp(_inexact(mrp, "Rotation.from_mrp", 3)))

    @classmethod
    def from_quat(cls, quat):
        """From quaternions (x, y, z, w), shape (..., 4); they are normalized."""
        return cls(_normalize(_inexact(quat, "Rotation.from_quat", 4)))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """From rotation vectors (axis times angle), shape (..., 3)."""
        rotvec = _inexact(rotvec, "Rotation.from_rotvec", 3)
        return cls(_from_rotvec(jnp.deg2rad(rotvec) if degrees else rotvec))

    @classmethod
    def identity(cls, num: int | None = None, dtype=float):
        """The identity rotation, or ``num`` of them."""
        quat = jnp.array([0., 0., 0., 1.], dtype=dtype)
        return cls(quat if num is None else jnp.broadcast_to(quat, (num, 4)))

    @classmethod
    def random(cls, random_key, num: int | None = None):
        """Rotations uniformly distributed over SO(3) (normalized 4-D Gaussian samples)."""
        shape = (4,) if num is None else (num, 4)
        return cls(_normalize(_random.normal(random_key, shape)))

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other) -> "Rotation":
        """The composition: apply ``other``, then this rotation."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors, inverse: bool = False):
        """Rotate ``vectors`` (shape (..., 3)), by the inverse rotation if ``inverse``."""
        if isinstance(vectors, (list, tuple)):
            vectors = jnp.asarray(vectors)
        shape = aval_of(vectors, "Rotation.apply").shape
        if shape[-1:] != (3,):
            raise ValueError(f"{located('Rotation.apply')}: expected vectors of shape (..., 3), got shape {shape}")
        matrix = self.as_matrix()
        matrix = jnp.where(inverse, jnp.swapaxes(matrix, -1, -2), matrix)
        return jnp.matmul(matrix, jnp.asarray(vectors)[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles about the axes of the three-letter ``seq``; the middle angle lies in
        [0, pi] (symmetric sequences) or [-pi/2, pi/2], the others in [-pi, pi]."""
        axes, intrinsic = _parse_seq(seq, "Rotation.as_euler", exactly_three=True)
        angles = _as_euler(self.quat, axes, extrinsic=not intrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    def as_matrix(self):
        return _as_matrix(self.quat)

    def as_mrp(self):
        """Modified Rodrigues Parameters, of the rotation's shorter (angle <= pi) form."""
        return _as_mrp(self.quat)

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors: axis times angle, the angle in [0, pi]."""
        rotvec = _as_rotvec(self.quat)
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """Quaternions, (x, y, z, w) or (w, x, y, z) when ``scalar_first``; ``canonical`` picks
        the sign with w > 0 (ties broken by the first nonzero of x, y, z)."""
        quat = _make_canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self):
        return Rotation(jnp.concatenate([-self.quat[..., :3], self.quat[..., 3:]], axis=-1))

    def magnitude(self):
        """The rotation angles, in [0, pi]."""
        return 2. * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation: the principal eigenvector of sum w q q^T (Markley et al.)."""
        quat = jnp.atleast_2d(self.quat)
        n = quat.shape[0]
        w = jnp.ones(n, dtype=quat.dtype) if weights is None else jnp.asarray(weights, dtype=quat.dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != n:
            raise ValueError("Expected `weights` to have number of values equal to number of rotations, "
                             f"got {w.shape[0]} values and {n} rotations.")
        _, vectors = jnp.linalg.eigh(jnp.matmul(w[None, :] * quat.T, quat))
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        """Whether this is one rotation (not a stack of them)."""
        return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times
    (``Slerp.init(times, rotations)``, then call with the query times). Times outside the key
    times extrapolate from the nearest interval, as in JAX."""
    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations: Rotation):
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got {times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of timestamps given, "
                             f"got {len(rotations)} rotations and {times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = (starts.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts, rotvecs=steps)

    def __call__(self, times):
        """The interpolated rotations at ``times`` (a scalar gives a single rotation)."""
        times = jnp.asarray(times, dtype=self.times.dtype)
        if times.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = times.ndim == 0
        times = jnp.atleast_1d(times)
        ind = jnp.maximum(jnp.searchsorted(self.times, times) - 1, 0)
        alpha = (times - self.times[ind]) / self.timedelta[ind]
        result = self.rotations[ind] * Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
        return result[0] if single else result
