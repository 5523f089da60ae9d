"""Crash reproducers: one self-contained file for a failure of a pass, the verifier, lowering or
XLA compilation.

The file is a text IR program preceded by ``#`` comment lines (which the parser skips, so
``jaxprc opt``, ``check`` and ``reduce`` read it as it is) holding the failing stage, the
pipeline (for a pass), the error, the versions and the config flags in force::

    # jaxprc reproducer: `jaxprc repro THIS_FILE` replays it
    # stage: pass
    # pipeline: vmap:axis_size=4
    # error: NotImplementedError: no batching rule for 'my_op'
    # versions: jaxprc 0.1.0, jaxlib 0.10.2, python 3.11.7, linux
    # flags: jax_enable_x64=False; jaxprc_canonicalize=False; ...
    { lambda ; a:f32[3]. let ... }

``jaxprc repro FILE`` re-runs the stage and reports whether the same error comes back.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.metadata
import os
import platform
import re
import sys
from typing import NamedTuple

from jaxprc.ir.core import JaxprcError
from jaxprc.ir.dtypes import config

HEADER = "# jaxprc reproducer: `jaxprc repro THIS_FILE` replays it"
STAGES = ("pass", "verify", "lower", "compile")
# The config flags that change what a program means or how it is compiled: recorded, and set
# again when the reproducer is replayed.
RECORDED_FLAGS = ("jax_enable_x64", "jaxprc_canonicalize", "jax_default_matmul_precision",
                  "jaxprc_max_segment_eqns")


class ReproducerError(JaxprcError, ValueError):
    """A file that is not a reproducer (no header, an unknown stage, a missing field)."""


class Reproducer(NamedTuple):
    stage: str              # one of STAGES
    error: str              # "TypeName: message" (one line)
    program: str            # the text IR the stage ran on
    pipeline: str = ""      # the pipeline that failed (stages pass and verify)
    versions: str = ""
    flags: dict = {}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def versions() -> str:
    return (f"jaxprc {_version('jaxprc')}, jaxlib {_version('jaxlib')}, "
            f"python {platform.python_version()}, {sys.platform}")


def error_line(error: BaseException) -> str:
    """``TypeName: message`` on one line (newlines written as \\n)."""
    return f"{type(error).__name__}: {error}".replace("\\", "\\\\").replace("\n", "\\n")


def format_reproducer(program, stage: str, error: BaseException | str, pipeline: str = "") -> str:
    if stage not in STAGES:
        raise ValueError(f"unknown reproducer stage {stage!r}; expected one of {', '.join(STAGES)}")
    flags = "; ".join(f"{name}={getattr(config, name, None)!r}" for name in RECORDED_FLAGS)
    lines = [HEADER, f"# stage: {stage}"]
    if pipeline:
        lines.append(f"# pipeline: {pipeline}")
    lines += [f"# error: {error if isinstance(error, str) else error_line(error)}",
              f"# versions: {versions()}", f"# flags: {flags}", str(program)]
    return "\n".join(lines) + "\n"


def write_reproducer(directory: str, program, stage: str, error: BaseException, pipeline: str = "") -> str:
    """Write a reproducer into ``directory`` (created if needed); returns its path. The name
    holds a hash of the contents: the same failure again writes the same file."""
    os.makedirs(directory, exist_ok=True)
    text = format_reproducer(program, stage, error, pipeline)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = os.path.join(directory, f"jaxprc-repro-{stage}-{digest}.jaxpr")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _flag_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@contextlib.contextmanager
def flags_applied(flags: dict):
    """Within this block, the recorded flags (those written as Python literals) are set again."""
    saved = {name: getattr(config, name) for name in RECORDED_FLAGS if hasattr(config, name)}
    try:
        for name, value in flags.items():
            if name in saved and isinstance(value, (bool, int, type(None))):
                config.update(name, value)
        yield
    finally:
        for name, value in saved.items():
            config.update(name, value)


def read_reproducer(text: str) -> Reproducer:
    """The fields of a reproducer's text; ``ReproducerError`` if it is not one."""
    if not text.startswith(HEADER):
        raise ReproducerError("not a jaxprc reproducer: the first line must be "
                              f"{HEADER!r} (a file written by --reproducer or jaxprc_reproducer_dir)")
    fields, body = {}, []
    for line in text.splitlines()[1:]:
        m = re.fullmatch(r"# (stage|pipeline|error|versions|flags): (.*)", line)
        if m and not body:
            fields[m.group(1)] = m.group(2)
        else:
            body.append(line)
    for need in ("stage", "error"):
        if need not in fields:
            raise ReproducerError(f"the reproducer has no '# {need}:' line")
    if fields["stage"] not in STAGES:
        raise ReproducerError(f"the reproducer's stage {fields['stage']!r} is not one of {', '.join(STAGES)}")
    if fields["stage"] in ("pass", "verify") and not fields.get("pipeline"):
        raise ReproducerError(f"a reproducer of stage {fields['stage']!r} needs a '# pipeline:' line")
    flags = dict(item.split("=", 1) for item in fields.get("flags", "").split("; ") if "=" in item)
    return Reproducer(fields["stage"], fields["error"], "\n".join(body), fields.get("pipeline", ""),
                      fields.get("versions", ""), {k: _flag_value(v) for k, v in flags.items()})
