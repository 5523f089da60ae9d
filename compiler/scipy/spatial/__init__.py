"""jax.scipy.spatial: 3-D rotations (``transform.Rotation``, ``transform.Slerp``)."""
from . import transform  # noqa: F401
