"""Passes by name, pipelines of passes, and a hook to observe the IR after each pass.

A pass is ``fn(closed_jaxpr, **options) -> closed_jaxpr``. A pipeline is a
comma-separated list of pass names, each optionally followed by
``:key=value`` options (values are Python literals, else strings), e.g.
``"jvp,dce"`` or ``"vmap:axis_size=4:in_axes=(0,None),dce"``.

``run_pipeline`` is the one pipeline runner (the API, the command line and
the tests use it). With verification on (``verify=True``, or the
``jaxprc_verify_passes`` config flag / ``JAXPRC_VERIFY_PASSES=1``) it runs the
verifier after each pass, and an ill-typed result raises
``PassVerificationError`` naming the pass that produced it.
"""
from __future__ import annotations

import ast
import functools
import inspect
import time
from typing import Callable, Sequence

from jaxprc.ir.deep import deep_entry
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprcError, JaxprTypeError
from jaxprc.ir.dtypes import config
from jaxprc.ir.verify import verify as verify_program

PASSES: dict[str, Callable[..., ClosedJaxpr]] = {}


class PipelineError(JaxprcError, ValueError):
    """A pipeline that cannot run: empty, an empty step, an unknown pass, a malformed option or
    one the pass does not take."""


class UnknownPassError(PipelineError, KeyError):
    """No pass is registered under this name."""

    def __str__(self):          # a message, not KeyError's repr of the key
        return str(self.args[0])


class PassError(JaxprcError):
    """A pass of a pipeline raised; ``label`` names it (with its options), ``__cause__`` is the
    original error."""

    def __init__(self, label: str, cause: BaseException):
        self.label = label
        super().__init__(f"pass {label!r} failed: {type(cause).__name__}: {cause}")


class PassVerificationError(JaxprTypeError):
    """A pass produced an ill-typed program; ``label`` names the pass, ``reason`` is the
    verifier's message."""

    def __init__(self, label: str, reason: str):
        self.label, self.reason = label, reason
        super().__init__(f"pass {label!r} produced an ill-typed program: {reason}")


def register_pass(name: str, fn: Callable[..., ClosedJaxpr]) -> Callable[..., ClosedJaxpr]:
    if not name or any(c in name for c in ",:= \t\n"):
        raise ValueError(f"register_pass: {name!r} cannot be written in a pipeline "
                         "(a pass name has no commas, colons, '=' or spaces)")
    PASSES[name] = fn
    _accepted_options.cache_clear()
    _parse_text.cache_clear()
    return fn


def get_pass(name: str) -> Callable[..., ClosedJaxpr]:
    try:
        return PASSES[name]
    except KeyError:
        raise UnknownPassError(f"Unknown pass '{name}'; registered passes: "
                               f"{', '.join(sorted(PASSES))}") from None


def split_top_level(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets, so items may hold tuples or shapes; the parts are
    stripped, and empty parts are kept (``"a,,b"`` -> ``["a", "", "b"]``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _option_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@functools.lru_cache(maxsize=None)
def _accepted_options(fn) -> frozenset | None:
    """The option names ``fn`` takes after the program; None when it takes any (``**options``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _check_options(name: str, options: dict, where: str) -> None:
    accepted = _accepted_options(get_pass(name))
    if accepted is None:
        return
    for key in options:
        if key not in accepted:
            takes = f"its options are {', '.join(sorted(accepted))}" if accepted else "it takes no options"
            raise PipelineError(f"pass '{name}' has no option {key!r}{where}; {takes}")


def _parse_step(item: str, spec: str) -> tuple[str, dict]:
    where = f" in pipeline {spec!r}"
    name, *opts = split_top_level(item, ":")
    if not name:
        raise PipelineError(f"a step of pipeline {spec!r} has no pass name")
    get_pass(name)
    options = {}
    for opt in opts:
        key, eq, value = (s.strip() for s in opt.partition("="))
        if not eq or not key.isidentifier():
            raise PipelineError(f"option {opt!r} of pass '{name}'{where} must be written key=value")
        if key in options:
            raise PipelineError(f"option {key!r} of pass '{name}' is given twice{where}")
        options[key] = _option_value(value)
    _check_options(name, options, where)
    return name, options


def parse_pipeline(spec: str | Sequence) -> list[tuple[str, dict]]:
    """``"a,b:k=1"`` or ``["a", ("b", {"k": 1})]`` -> ``[("a", {}), ("b", {"k": 1})]``.

    Raises ``PipelineError`` for an empty pipeline or step (``""``, ``"a,,b"``), an unknown
    pass (``UnknownPassError``), a malformed option, or an option the pass does not take.
    """
    if isinstance(spec, str):
        return [(name, dict(options)) for name, options in _parse_text(spec)]
    steps = []
    for item in spec:
        if isinstance(item, str):
            steps.append(_parse_step(item, item))
            continue
        try:
            name, options = item
            options = dict(options)
        except (TypeError, ValueError):
            raise PipelineError(f"pipeline step {item!r} is not a pass name or a (name, options) "
                                "pair") from None
        get_pass(name)
        _check_options(name, options, "")
        steps.append((name, options))
    if not steps:
        raise PipelineError("empty pipeline: name at least one pass")
    return steps


@functools.lru_cache(maxsize=256)
def _parse_text(spec: str) -> tuple[tuple[str, dict], ...]:
    items = split_top_level(spec, ",")
    if not any(items):
        raise PipelineError(f"empty pipeline {spec!r}: name at least one pass, e.g. 'jvp,dce'")
    if not all(items):
        raise PipelineError(f"pipeline {spec!r} has an empty step (two commas in a row, or a "
                            "comma at an end)")
    return tuple(_parse_step(item, spec) for item in items)


def step_label(name: str, options: dict) -> str:
    """A step as a pipeline writes it: ``vmap:axis_size=4``."""
    return ":".join([name, *(f"{k}={v!r}" for k, v in options.items())])


def verify_pass_result(label: str, cj: ClosedJaxpr, verify: bool | None = None) -> ClosedJaxpr:
    """``cj``, which the pass ``label`` produced, verified when verification is on (``verify``,
    else the ``jaxprc_verify_passes`` flag); ill-typed, it raises ``PassVerificationError``.

    ``run_pipeline`` calls this after each pass; front ends that call a pass function directly
    (with arguments a pipeline cannot write, like masks) call it on the result too.
    """
    if verify is None:
        verify = config.jaxprc_verify_passes
    if verify:
        try:
            verify_program(cj)
        except JaxprTypeError as e:
            raise PassVerificationError(label, str(e)) from e
    return cj


@deep_entry
def run_pipeline(cj: ClosedJaxpr, spec: str | Sequence,
                 observe: Callable[[str, ClosedJaxpr], None] | None = None,
                 verify: bool | None = None, instrument: Sequence = ()) -> ClosedJaxpr:
    """Run the passes of ``spec`` in order; ``observe(name, jaxpr)`` sees the IR after each.

    ``verify``: verify the program after each pass (default: the ``jaxprc_verify_passes``
    config flag). A pass that raises becomes ``PassError`` naming it; an ill-typed result,
    ``PassVerificationError`` naming it. The pipeline is parsed (and rejected, if it must be)
    before any pass runs. ``instrument``: objects with ``run_before_pass(label, program)`` and/or
    ``run_after_pass(label, program, seconds)`` (``jaxprc.passes.instrument``: timing, printing).

    >>> program = jaxprc.ir.parse("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")
    >>> print(jaxprc.passes.run_pipeline(program, "jvp,dce"))
    { lambda ; a:f32[3] b:f32[3]. let
        c:f32[3] = sin a
        d:f32[3] = cos a
        e:f32[3] = mul b d
      in (c, e) }
    """
    if verify is None:
        verify = config.jaxprc_verify_passes
    before = [i.run_before_pass for i in instrument if hasattr(i, "run_before_pass")]
    after = [i.run_after_pass for i in instrument if hasattr(i, "run_after_pass")]
    for name, options in parse_pipeline(spec):
        label = step_label(name, options)
        for hook in before:
            hook(label, cj)
        start = time.perf_counter()
        try:
            out = PASSES[name](cj, **options)
        except Exception as e:  # noqa: BLE001 -- any failure of a pass: name the pass
            raise PassError(label, e) from e
        seconds = time.perf_counter() - start
        if not isinstance(out, ClosedJaxpr):
            raise PassError(label, TypeError(
                f"the pass returned a {type(out).__name__}, expected a ClosedJaxpr"))
        if verify:
            verify_pass_result(label, out, True)
        cj = out
        for hook in after:
            hook(label, cj, seconds)
        if observe is not None:
            observe(name, cj)
    return cj


# ----------------------------------------------------------- sub-jaxprs

def count_equations(program: ClosedJaxpr | Jaxpr) -> int:
    """Equations of a program, those of its sub-jaxprs (bodies, branches) included."""
    j = program.jaxpr if isinstance(program, ClosedJaxpr) else program
    total = len(j.eqns)
    for eqn in j.eqns:
        for v in eqn.params.values():
            for inner in (v if isinstance(v, tuple) else (v,)):
                if isinstance(inner, (ClosedJaxpr, Jaxpr)):
                    total += count_equations(inner)
    return total


def map_subjaxprs(params: dict, fn: Callable[[ClosedJaxpr], ClosedJaxpr]) -> dict:
    """``params`` with every ClosedJaxpr (also inside tuples) replaced by ``fn(it)``.

    Passes that rewrite programs wholesale (cse, inline) recurse into the
    bodies of control flow and calls with this; thunks are left unforced.
    ``params`` itself comes back when it holds no jaxpr.
    """
    if not any(isinstance(v, (ClosedJaxpr, Jaxpr, tuple)) for v in params.values()):
        return params

    def visit(v):
        if isinstance(v, ClosedJaxpr):
            return fn(v)
        if isinstance(v, Jaxpr):
            return fn(ClosedJaxpr(v, [None] * len(v.constvars))).jaxpr
        if isinstance(v, tuple) and any(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
            return tuple(visit(x) for x in v)
        return v
    new = {k: visit(v) for k, v in params.items()}
    return params if all(new[k] is v for k, v in params.items()) else new
