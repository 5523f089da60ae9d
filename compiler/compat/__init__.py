"""``jaxprc.compat``: run a program or library written against ``jax`` on jaxprc, unchanged.

``install()`` (before the program first imports jax) puts an import hook on ``sys.meta_path`` so
that ``import jax`` and every ``jax.<public module>`` resolve to jaxprc's module objects (``jax.numpy``
IS ``jaxprc.numpy``); ``python -m jaxprc.compat script.py [args]`` runs a script that way.

The hook adds no behaviour. Two things are not a plain renaming:

- ``jax`` itself is a view of ``jaxprc`` whose ``__version__`` is the JAX version whose API jaxprc
  implements (``jaxprc.__jax_version__``), because libraries compare it to pick code paths.
- JAX's private modules (``jax._src...``), which libraries import although they are not API, are
  served name by name from ``internals.INTERNALS``: each entry names the library that needs it.
  A private name not in the table is an ``AttributeError``/``ImportError`` saying so.
"""
from .hook import install, installed, uninstall  # noqa: F401
from .internals import INTERNALS  # noqa: F401

__all__ = ["install", "installed", "uninstall", "INTERNALS"]
