"""The import hook: ``jax.*`` module names resolved to jaxprc's modules and the internals table."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from .internals import INTERNALS

_PREFIX = "jax"


class JaxShim(types.ModuleType):
    """``jax``: every attribute is ``jaxprc``'s but the version, which is the JAX API's."""

    def __getattr__(self, name):
        import jaxprc
        try:
            return getattr(jaxprc, name)
        except AttributeError:
            if _is_internal_package(f"{_PREFIX}.{name}"):     # jax._src, imported by JAX itself
                return importlib.import_module(f"{_PREFIX}.{name}")
            raise AttributeError(f"module 'jax' has no attribute '{name}' (jaxprc does not "
                                 "provide it)") from None

    def __dir__(self):
        import jaxprc
        return sorted(set(dir(jaxprc)) | set(self.__dict__))


class InternalModule(types.ModuleType):
    """A private JAX module (``jax._src.core``): only the names the table lists, resolved lazily."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        fullname = f"{self.__name__}.{name}"
        if _is_internal_package(fullname):       # a submodule read as an attribute, as JAX has
            return importlib.import_module(fullname)     # them all imported (chex: xla_bridge)
        target = INTERNALS.get(fullname)
        if target is None:
            raise AttributeError(
                f"'{self.__name__}.{name}' is a JAX internal that jaxprc.compat does not provide "
                "(jaxprc.compat.internals lists the ones the measured libraries use)")
        return _resolve_target(target[0])

    def __dir__(self):
        prefix = self.__name__ + "."
        return sorted({k[len(prefix):].split(".")[0] for k in INTERNALS if k.startswith(prefix)})


def _resolve_target(target: str):
    """``"pkg.mod"`` (a module) or ``"pkg.mod:attr"`` to the object it names."""
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def _is_internal_package(fullname: str) -> bool:
    prefix = fullname + "."
    return any(k.startswith(prefix) for k in INTERNALS)


def _public_counterpart(fullname: str):
    """``jax.a.b`` -> the module ``jaxprc.a.b`` if it exists; private paths are never mapped."""
    rest = fullname[len(_PREFIX) + 1:]
    if any(part.startswith("_") for part in rest.split(".")):
        return None
    try:
        return importlib.import_module("jaxprc." + rest)
    except ModuleNotFoundError as e:
        if e.name and ("jaxprc." + rest).startswith(e.name):
            return None     # the module itself is missing, not one it imports
        raise


class JaxFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``jax`` and ``jax.*``; loads each as an existing module object."""

    def __init__(self):
        self._found: dict[str, types.ModuleType] = {}
        self._original_specs: dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        module = self._module_for(fullname)
        if module is None:
            return None
        self._found[fullname] = module
        is_package = hasattr(module, "__path__")
        return importlib.machinery.ModuleSpec(fullname, self, is_package=is_package)

    def _module_for(self, fullname):
        if fullname == _PREFIX:
            import jaxprc
            shim = JaxShim(_PREFIX, jaxprc.__doc__)
            shim.__path__ = []
            shim.__version__ = jaxprc.__jax_version__
            shim.__version_info__ = jaxprc.__jax_version_info__
            return shim
        entry = INTERNALS.get(fullname)
        if entry is not None and entry[0] is not None:   # a module the table names
            return _resolve_target(entry[0])
        if entry is not None or _is_internal_package(fullname):
            module = InternalModule(fullname)
            module.__path__ = []
            return module
        return _public_counterpart(fullname)

    def create_module(self, spec):
        module = self._found.pop(spec.name)
        # importlib overwrites __spec__ on the module it is given; jaxprc's modules keep their own.
        self._original_specs[spec.name] = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module):
        spec = self._original_specs.pop(module.__spec__.name, None)
        if spec is not None:
            module.__spec__ = spec


_finder: JaxFinder | None = None


def installed() -> bool:
    return _finder is not None


def install() -> None:
    """Resolve ``import jax`` (and ``jax.*``) to jaxprc from now on, in this process.

    Raises ``RuntimeError`` if the real ``jax`` is already imported: its modules and jaxprc's
    cannot be mixed in one program."""
    global _finder
    if _finder is not None:
        return
    real = sys.modules.get(_PREFIX)
    if real is not None and not isinstance(real, JaxShim):
        raise RuntimeError(
            "jaxprc.compat.install(): the real 'jax' package is already imported "
            f"({getattr(real, '__file__', real)!r}); install the hook before anything imports jax "
            "(or run the program as `python -m jaxprc.compat script.py`)")
    _finder = JaxFinder()
    sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Remove the hook and forget the ``jax`` modules it served (a later ``import jax`` is real)."""
    global _finder
    if _finder is None:
        return
    sys.meta_path.remove(_finder)
    _finder = None
    for name in [n for n in sys.modules if n == _PREFIX or n.startswith(_PREFIX + ".")]:
        del sys.modules[name]
