"""What the distribution modules share: JAX's promotion of their arguments to one inexact dtype."""
from ..special._common import inexact as promote_inexact  # noqa: F401
