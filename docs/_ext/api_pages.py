"""The API reference: a page per public module, each public name documented by autodoc under its
public name (``jaxprc.lax.scan``, never the module that happens to define it, so modules may move)
and linked to the JAX name it mirrors."""
from __future__ import annotations

import importlib
import inspect

# The modules a user imports by name: JAX's, by JAX's names, then jaxprc's own (the IR language,
# its param schemas, the passes). Every submodule of jaxprc.scipy.stats is added below.
JAX_MODULES = """
jaxprc jaxprc.numpy jaxprc.numpy.linalg jaxprc.numpy.fft jaxprc.lax jaxprc.lax.linalg jaxprc.nn
jaxprc.nn.initializers jaxprc.random jaxprc.scipy.special jaxprc.scipy.stats jaxprc.scipy.linalg
jaxprc.scipy.fft jaxprc.scipy.signal jaxprc.scipy.ndimage jaxprc.scipy.sparse.linalg
jaxprc.scipy.optimize jaxprc.scipy.integrate jaxprc.scipy.interpolate jaxprc.scipy.cluster.vq
jaxprc.scipy.spatial.transform jaxprc.image jaxprc.tree_util jaxprc.tree jaxprc.flatten_util
jaxprc.ops jaxprc.dtypes jaxprc.sharding jaxprc.distributed jaxprc.experimental
jaxprc.experimental.multihost_utils jaxprc.experimental.checkify jaxprc.experimental.jet
jaxprc.experimental.mesh_utils jaxprc.experimental.compilation_cache.compilation_cache
jaxprc.experimental.ode jaxprc.example_libraries.stax jaxprc.example_libraries.optimizers
jaxprc.custom_derivatives jaxprc.custom_batching jaxprc.ad_checkpoint jaxprc.debug jaxprc.profiler
jaxprc.typing jaxprc.stages jaxprc.export jaxprc.ref jaxprc.errors jaxprc.dlpack jaxprc.ffi jaxprc.test_util jaxprc.monitoring
jaxprc.core jaxprc.interpreters.ad jaxprc.interpreters.batching jaxprc.interpreters.mlir
jaxprc.interpreters.partial_eval
""".split()
OWN_MODULES = ["jaxprc.ir", "jaxprc.ir.params", "jaxprc.ir.effects", "jaxprc.passes",
               "jaxprc.passes.jet"]
JAX_DOCS = "https://docs.jax.dev/en/latest/_autosummary/{}.html"
_STDLIB_HELPERS = {"typing", "__future__", "functools", "collections.abc", "contextlib", "types", "abc"}


def public_modules() -> list[str]:
    stats = importlib.import_module("jaxprc.scipy.stats")
    distributions = sorted(f"jaxprc.scipy.stats.{n}" for n, m in vars(stats).items()
                           if inspect.ismodule(m) and not n.startswith("_"))
    return JAX_MODULES + distributions + OWN_MODULES


def public_names(module) -> list[str]:
    """``__all__`` where the module declares it; else its attributes, less submodules and the
    typing/functools helpers it imported for its own use."""
    if hasattr(module, "__all__"):
        return sorted(set(module.__all__))
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if getattr(value, "__module__", None) in _STDLIB_HELPERS or name == "annotations":
            continue
        names.append(name)
    return sorted(names)


def jax_counterpart(module_name: str) -> str | None:
    if module_name in OWN_MODULES or module_name.startswith("jaxprc.ir"):
        return None
    return "jax" + module_name[len("jaxprc"):]


def _ours(value) -> bool:
    """Data, and functions and classes jaxprc defines (not NumPy's ``dtype`` or typing's ``Any``)."""
    if not (inspect.isclass(value) or callable(value)):
        return True
    return (getattr(value, "__module__", None) or "").split(".")[0] == "jaxprc"


def _directive(full_name: str, value, first_names: dict) -> str:
    if inspect.isclass(value):
        # a class is described once, under the first public name met (autodoc also indexes it
        # under its defining module's name, so a second description would clash); the other
        # names point there
        if id(value) in first_names:
            return f"``{full_name}``\n   The class :py:class:`{first_names[id(value)]}`.\n"
        first_names[id(value)] = full_name
        return f".. autoclass:: {full_name}\n   :members:\n"
    if callable(value):
        return f".. autofunction:: {full_name}\n"
    return f".. autodata:: {full_name}\n   :no-value:\n"


def module_page(module_name: str, jax_has=None, first_names: dict | None = None) -> str:
    """``jax_has(jax_name) -> bool`` says whether a JAX name exists (None: no JAX to ask, no links);
    ``first_names``: the public name of each class earlier pages described, by id."""
    module = importlib.import_module(module_name)
    summary = (inspect.getdoc(module) or "").split("\n\n")[0].replace("\n", " ")
    counterpart = jax_counterpart(module_name)
    out = [f"# `{module_name}`", "", summary, ""]
    if counterpart:
        out += [f"Mirrors JAX's `{counterpart}`.", ""]
    ours, foreign = [], []
    for name in public_names(module):
        value = getattr(module, name)
        (ours if _ours(value) else foreign).append((name, value))
    directives = []
    for name, value in ours:
        text = _directive(f"{module_name}.{name}", value, {} if first_names is None else first_names)
        if counterpart and jax_has is not None and jax_has(f"{counterpart}.{name}"):
            text += f"\n   JAX: `{counterpart}.{name} <{JAX_DOCS.format(f'{counterpart}.{name}')}>`__\n"
        directives.append(text)
    if directives:
        out += ["```{eval-rst}", *directives, "```", ""]
    if foreign:
        out += ["## Re-exported", "", "These names are other libraries' objects, re-exported as JAX does:", ""]
        out += [f"- `{module_name}.{name}`: `{_qualified(value)}`" for name, value in foreign]
        out.append("")
    return "\n".join(out)


def _qualified(value) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"


def index_page(modules: list[str]) -> str:
    out = ["# API reference", "",
           "A page per public module, by the module's public name. Each name links to the JAX name "
           "it mirrors, where JAX has one.", "", "```{toctree}", ":maxdepth: 1", ":titlesonly:", ""]
    out += modules
    out += ["```", ""]
    return "\n".join(out)
