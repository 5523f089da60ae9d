"""What the distribution modules share: JAX's promotion of their arguments to one inexact dtype."""
from ... import numpy as jnp
from ..special._common import inexact as promote_inexact  # noqa: F401  (promotes and broadcasts)


def promote_dtypes_inexact(*args):
    """``args`` as arrays of one inexact dtype, their shapes left alone (they may differ)."""
    dtype = jnp.result_type(*args, 1.0)
    return [jnp.asarray(a, dtype) for a in args]
