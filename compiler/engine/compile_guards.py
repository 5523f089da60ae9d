"""JAX's switches that watch the jit caches: ``no_tracing``, ``no_execution`` and
``explain_cache_misses`` (context managers, and the ``jax_no_tracing``,
``jax_no_execution``, ``jax_explain_cache_misses`` config options).

- ``no_tracing``: a jit call that misses its cache (it would trace the function)
  raises, and so does an eager op never run before with those argument types
  (its program would be built), as JAX's eager ops are jitted functions. Cached
  calls run.
- ``no_execution``: any run of a compiled program raises, cached or not. The
  option is part of the C++ dispatch's cache key (compiler/engine/cpp_dispatch.py), so
  calls made while it is on reach the Python path, which raises.
- ``explain_cache_misses``: a jit call that misses its cache logs, at WARNING on
  the ``jaxprc`` logger, where the call is, the function, and how its signature
  differs from the closest one seen before.
"""
from __future__ import annotations

import logging

from ..ir.dtypes import config, short_name
from ..ir.tracing import user_source_info
from ..ir.tree_util import keystr, tree_flatten_with_path

__all__ = ["explain_cache_misses", "no_execution", "no_tracing"]


def no_tracing(new_val: bool = True):
    """Context manager: tracing a function for ``jit`` (a cache miss) raises RuntimeError."""
    return config.override("jax_no_tracing", new_val)


def no_execution(new_val: bool = True):
    """Context manager: running any compiled program raises RuntimeError."""
    return config.override("jax_no_execution", new_val)


def explain_cache_misses(new_val: bool = True):
    """Context manager: each jit cache miss logs why it missed (logger ``jaxprc``, WARNING)."""
    return config.override("jax_explain_cache_misses", new_val)


def fun_sourceinfo(fun) -> str:
    """``name at file:line`` of a Python function, as JAX names functions in these messages."""
    name = getattr(fun, "__name__", None) or type(fun).__name__
    code = getattr(getattr(fun, "__wrapped__", fun), "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code is not None else name


def check_tracing(what) -> None:
    """Raise if ``no_tracing`` is on; ``what``: the function about to be traced (a Python
    function, or the name of a primitive)."""
    if config.jax_no_tracing:
        name = what if isinstance(what, str) else fun_sourceinfo(what)
        raise RuntimeError(f"re-tracing function {name} for `jit`, but 'no_tracing' is set")


def execution_refused(name: str) -> RuntimeError:
    """The error of running program ``name`` while ``no_execution`` is on."""
    return RuntimeError(f"jaxprc tried to execute function {name}, but the no_execution config option is set")


def explain_miss(fun, parts: dict, seen: list, arg_labels: list) -> None:
    """Log why a call of jit function ``fun`` missed: ``parts`` describes its signature
    (``structure``, ``static``, ``context``: the trace context, ``args``: one type per argument leaf), ``seen`` the
    signatures cached before, ``arg_labels`` names the argument leaves."""
    here = user_source_info()
    at = f" at {here.file}:{here.line} ({here.name})" if here is not None else ""
    lines = [f"TRACING CACHE MISS{at}:"]
    if not seen:
        lines += ["  never seen function:", f"    {fun_sourceinfo(fun).replace(' at ', f' id={id(fun)} defined at ', 1)}"]
    else:
        closest = min(seen, key=lambda old: len(_differences(parts, old, arg_labels)))
        lines += [f"  for {fun_sourceinfo(fun).replace(' at ', ' defined at ', 1)}",
                  "  all previously seen cache keys differ. For the closest previous key:",
                  *_differences(parts, closest, arg_labels)]
    logging.getLogger("jaxprc").warning("\n".join(lines))


def _differences(new: dict, old: dict, labels: list) -> list:
    if new["structure"] != old["structure"]:
        return ["  * different input pytree structure:", f"    now {new['structure']}",
                f"    and before {old['structure']}"]
    out = []
    if new["context"] != old["context"]:
        out.append("  Tracing context doesn't match, e.g. due to config or context manager.")
        out += [f"  * {name} differs: now {a} and before {b}"
                for name, a, b in zip(new["context"]._fields, new["context"], old["context"]) if a != b]
    if new["static"] != old["static"]:
        out.append(f"  * static arguments differ: now {_static(new['static'])} and before {_static(old['static'])}")
    types = [(label, a, b) for label, a, b in zip(labels, new["args"], old["args"]) if a != b]
    if types:
        out.append("  different input types:")
    for label, a, b in types:
        weak = _weak(a) != _weak(b) and _type_str(a) == _type_str(b)   # then JAX's page on weak types
        out.append(f"  * at {label}, now {_type_str(a, weak)} and before {_type_str(b, weak)}"
                   + ("https://docs.jax.dev/en/latest/type_promotion.html#weak-types" if weak else ""))
    return out


def _static(static) -> str:
    return ", ".join(f"{k}={v!r}" for k, _, v in static) or "none"


def _aval(t):
    return t[0] if isinstance(t, tuple) else t      # (aval, sharding) of an array on other devices


def _weak(t) -> bool | None:
    return None if t is None else _aval(t).weak_type


def _type_str(t, show_weak: bool = False) -> str:
    if t is None:
        return "a value of no array type"
    t = _aval(t)
    weak = f"{{weak_type={t.weak_type}}}" if show_weak else ""
    return f"{short_name(t.dtype)}[{','.join(map(str, t.shape))}]{weak}"


def leaf_labels(dyn_args: tuple, dyn_kwargs: dict) -> list:
    """``args[0]``, ``kwargs['x']``...: the names of a call's dynamic argument leaves, in order."""
    return ([f"args{keystr(p)}" for p, _ in tree_flatten_with_path(dyn_args)[0]]
            + [f"kwargs{keystr(p)}" for p, _ in tree_flatten_with_path(dyn_kwargs)[0]])
