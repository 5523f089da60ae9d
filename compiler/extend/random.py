"""``jaxprc.extend.random``: the PRNG's building blocks (the threefry-2x32 hash)."""
from ..random import threefry2x32 as threefry_2x32  # noqa: F401

__all__ = ["threefry_2x32"]
