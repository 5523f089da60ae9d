"""``jaxprc.experimental.compilation_cache``: the persistent compilation cache's switches."""
from . import compilation_cache  # noqa: F401
