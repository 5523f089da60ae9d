"""``jaxprc.experimental.pjit``: JAX's older name for ``jit`` with ``in_shardings``/``out_shardings``."""
from __future__ import annotations

from ..api import jit

__all__ = ["pjit"]


def pjit(fun, in_shardings=None, out_shardings=None, static_argnums=None, static_argnames=None,
         donate_argnums=None, donate_argnames=None, keep_unused: bool = False, device=None,
         backend: str | None = None, inline: bool = False, compiler_options: dict | None = None):
    """``jit(fun, ...)`` with JAX's positional signature for pjit."""
    return jit(fun, in_shardings=in_shardings, out_shardings=out_shardings,
               static_argnums=() if static_argnums is None else static_argnums,
               static_argnames=() if static_argnames is None else static_argnames,
               donate_argnums=() if donate_argnums is None else donate_argnums,
               donate_argnames=() if donate_argnames is None else donate_argnames,
               keep_unused=keep_unused, device=device, backend=backend, inline=inline,
               compiler_options=compiler_options)
