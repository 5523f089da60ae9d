"""JAX's ``jax.experimental.compilation_cache.compilation_cache``: ``set_cache_dir``, ``reset_cache``.

jaxprc's persistent cache (runtime/compile_cache.py) reads its directory from the config
``jaxprc_compilation_cache_dir`` at each compile, so a new directory applies to the next
compile at once (JAX keeps the first one it opened until ``reset_cache``).
"""
from ...ir.dtypes import config
from ...runtime import compile_cache

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path) -> None:
    """Keep compiled executables in directory ``path`` (created when first written) and look
    there before compiling; ``None`` turns the cache off. The cache is trusted: whoever can write
    to the directory can make this process run their code."""
    config.update("jaxprc_compilation_cache_dir", path)


def reset_cache() -> None:
    """Back to a fresh process's cache state (statistics, warnings); the directory setting and
    the entries on disk stay, as in JAX."""
    compile_cache.reset()
