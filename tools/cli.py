"""The ``jaxprc`` command line: an mlir-opt-like tool over the text IR and Python functions.

Every subcommand is a function ``cmd_NAME(args) -> int`` registered with its
argparse parser in ``build_parser``. User errors (bad files, bad text, failing
passes) exit non-zero with a one-paragraph message; ``--debug`` shows the
traceback instead. IR dumps asked for with ``--print-after*`` go to stderr,
as mlir-opt's do, so stdout (or ``-o``) holds only the result.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
import sys
import textwrap
import time

from ..ir.config import OPTIONS


class UsageError(Exception):
    """A mistake on the command line (bad file, bad option value, failing step)."""


# The largest array dimension (and vmap axis size) XLA can represent: sizes are int64.
MAX_DIMENSION = 2**63 - 1


def _excerpt(text: str, limit: int = 60) -> str:
    """``text`` quoted, shortened in the middle when long: a message stays one readable paragraph."""
    if len(text) > limit:
        return f"{text[:limit // 2]!r}...{text[-limit // 4:]!r} ({len(text)} characters)"
    return repr(text)


def _user_code_exit(e: SystemExit, what: str) -> UsageError:
    """``sys.exit`` from the user's module must not end jaxprc silently with the user's status."""
    return UsageError(f"{what} called sys.exit({e.code!r}) (SystemExit raised by the user's code); "
                      "jaxprc stopped there")


@contextlib.contextmanager
def _user_code(what: str, failed: str):
    """Run the user's code (``what``, for a sys.exit): its exceptions become a usage error,
    ``failed: Type: message``, with the original as the cause (shown under --debug)."""
    try:
        yield
    except UsageError:
        raise
    except SystemExit as e:
        raise _user_code_exit(e, what) from e
    except Exception as e:
        raise UsageError(f"{failed}: {type(e).__name__}: {e}") from e


# ------------------------------------------------------------------ files

def _read_text(path: str) -> str:
    where = "<stdin>" if path == "-" else repr(path)
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{where} is not a text IR file: byte 0x{e.object[e.start]:02x} at offset "
                         f"{e.start} is not UTF-8 text (a binary file?)") from None
    binary = re.search("[\0\udc80-\udcff]", text)     # (NUL, or bytes stdin could not decode)
    if binary:
        raise UsageError(f"{where} is not a text IR file: it holds binary data at character "
                         f"{binary.start()} (a binary file?)")
    return text


def _write_text(path: str | None, text: str) -> None:
    text = text if text.endswith("\n") else text + "\n"
    if path in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {path!r}: {e.strerror}") from None


def load_program(path: str):
    """Parse and verify a text IR file; errors name the file (and line:column for parse errors)."""
    from jaxprc.ir.core import JaxprTypeError
    from jaxprc.ir.parser import ParseError, parse
    from jaxprc.ir.verify import verify
    where = "<stdin>" if path == "-" else path
    text = _read_text(path)
    try:
        program = parse(text)
    except ParseError as e:
        raise UsageError(f"{where}: {e}") from None
    try:
        verify(program)
    except JaxprTypeError as e:
        raise UsageError(f"{where}: the program does not verify: {e}") from None
    return program


def input_names(program) -> list[str]:
    """The names the printer gives the program's inputs (constvars are named first)."""
    from jaxprc.ir.printer import Namer
    namer = Namer()
    for v in program.jaxpr.constvars:
        namer.bind(v)
    return [namer.bind(v) for v in program.jaxpr.invars]


# ------------------------------------------------------------- type text

_TYPE_TEXT = re.compile(r"(~?)([A-Za-z][A-Za-z0-9]*)\[([^\]]*)\]")


def split_top_level(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets, so items may hold shapes or tuples (the pipeline
    syntax's own splitter)."""
    from jaxprc.passes.registry import split_top_level as split
    return split(text, sep)


def parse_type_text(text: str, scope=None):
    """``'f32[8,4]'`` (``~`` prefix: weakly typed) -> a ``ShapeDtypeStruct``; ``'f32[b,784]'``
    has a symbolic dimension of ``scope`` (a ``SymbolicScope``; a fresh one when None)."""
    import jaxprc
    from jaxprc.ir import dtypes as dt
    m = _TYPE_TEXT.fullmatch(text.strip())
    if m is None:
        raise UsageError(f"bad type text {_excerpt(text.strip())}: expected a dtype and a shape in "
                         "brackets, like f32[8,4] or i32[] (a scalar)")
    weak, name, dims = m.groups()
    dtype = dt.FROM_SHORT_NAME.get(name)
    if dtype is None:
        raise UsageError(f"bad type text {text.strip()!r}: unknown dtype {name!r}; expected one of "
                         + ", ".join(dt.FROM_SHORT_NAME))
    if not re.fullmatch(r"[0-9,\s]*", dims):
        from jaxprc.ir.shape_poly import SymbolicScope, symbolic_shape
        try:
            shape = symbolic_shape(dims, scope=scope if scope is not None else SymbolicScope())
        except ValueError as e:
            raise UsageError(f"bad type text {_excerpt(text.strip())}: {e}") from None
        return jaxprc.ShapeDtypeStruct(shape, dtype, weak_type=bool(weak))
    sizes = [d.strip() for d in dims.split(",")] if dims.strip() else []
    if any(not d for d in sizes):
        raise UsageError(f"bad type text {_excerpt(text.strip())}: malformed shape; expected "
                         "comma-separated sizes like f32[3,4]")
    for d in sizes:      # (count digits first: int() refuses more than 4300 of them)
        if len(d.lstrip("0")) > len(str(MAX_DIMENSION)) or int(d) > MAX_DIMENSION:
            raise UsageError(f"bad type text {_excerpt(text.strip())}: dimension {_excerpt(d, 30)} "
                             f"is too large; array sizes are at most 2**63-1")
    return jaxprc.ShapeDtypeStruct(tuple(int(d) for d in sizes), dtype, weak_type=bool(weak))


def parse_arg_types(text: str, constraints: str = "") -> tuple:
    """``'f32[8,4], f32[8]'`` -> a tuple of ``ShapeDtypeStruct``s; symbolic dimensions
    (``'f32[b,784], f32[b]'``) share one scope with ``constraints`` (``'b >= 2, b <= 64'``)."""
    from jaxprc.ir.shape_poly import SymbolicScope, split_top_level as split_constraints
    try:
        scope = SymbolicScope(split_constraints(constraints) if constraints.strip() else ())
    except ValueError as e:
        raise UsageError(f"--constraints: {e}") from None
    items = split_top_level(text, ",")
    if items == [""]:
        return ()
    out = []
    for i, item in enumerate(items):
        try:
            out.append(parse_type_text(item, scope))
        except UsageError as e:
            raise UsageError(f"--args, argument {i + 1}: {e}") from None
    return tuple(out)


def describe_specs(specs) -> str:
    """Argument types as type text: ``f32[8,4], {'b': f32[2]}``."""
    from jaxprc.ir.core import ShapedArray
    texts = _tree_map(lambda s: ShapedArray(s.shape, s.dtype, s.weak_type).str_short(), specs)
    return ", ".join(re.sub(r"'(~?\w+\[[^\]']*\])'", r"\1", repr(t)) for t in texts)


def eval_args_expr(text: str) -> tuple:
    """A Python expression of ``ShapeDtypeStruct``s (any pytree); a tuple is the argument list."""
    import numpy as np
    import jaxprc
    import jaxprc.numpy as jnp
    scope = {"ShapeDtypeStruct": jaxprc.ShapeDtypeStruct, "T": parse_type_text, "np": np, "jnp": jnp}
    try:
        value = eval(text, scope)  # noqa: S307  (the user's own expression, like their own .py file)
    except UsageError:
        raise
    except SystemExit as e:
        raise _user_code_exit(e, f"--args-expr {_excerpt(text)}") from e
    except Exception as e:
        raise UsageError(f"--args-expr {_excerpt(text)} does not evaluate: {type(e).__name__}: "
                         f"{_excerpt(str(e), 300)}") from None
    return value if isinstance(value, tuple) else (value,)


# ------------------------------------------------------- Python functions

def load_function(spec: str):
    """``'path/model.py:loss'`` (or ``:Class.method``) -> (the function, its name)."""
    import runpy
    path, colon, attr = spec.rpartition(":")
    if not colon or not path or not attr:
        raise UsageError(f"expected FILE.py:FUNC, got {spec!r}")
    if not os.path.isfile(path):
        raise UsageError(f"cannot read {path!r}: no such file")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))   # so the file's own imports work
    with _user_code(f"running {path}: the module", f"running {path} failed"):
        namespace = runpy.run_path(path, run_name="__jaxprc_trace__")
    head, *rest = attr.split(".")
    if head not in namespace:
        found = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_")
                       and getattr(v, "__module__", None) == "__jaxprc_trace__")
        raise UsageError(f"{path} defines no {head!r}; functions defined there: "
                         f"{', '.join(found) or 'none'}")
    fun = namespace[head]
    for part in rest:
        fun = getattr(fun, part, None)
        if fun is None:
            raise UsageError(f"{path}: {attr!r} not found (no attribute {part!r})")
    if not callable(fun):
        raise UsageError(f"{path}: {attr!r} is a {type(fun).__name__}, not a function")
    return fun, attr


# ------------------------------------------------------------ transforms
#
# ``--args`` gives the types of FUNC's own arguments; each transform builds a
# new function and derives its argument types from the previous ones, so every
# stage can be traced (and printed with --print-after).

def _tree_map(f, tree):
    from jaxprc.tree_util import tree_map
    return tree_map(f, tree)


def _tangent_struct(s):
    import jaxprc
    from jaxprc.ir import dtypes as dt
    dtype = s.dtype if dt.is_inexact(s.dtype) else dt.float0
    return jaxprc.ShapeDtypeStruct(s.shape, dtype)


def _t_derivative(api_name):
    def transform(fun, specs, argnums=0):
        import jaxprc
        return getattr(jaxprc, api_name)(fun, argnums=argnums), specs
    return transform


def _t_jvp(fun, specs):
    import jaxprc
    n = len(specs)

    def jvp_fun(*args):
        return jaxprc.jvp(fun, args[:n], args[n:])
    return jvp_fun, specs + _tree_map(_tangent_struct, specs)


def _t_linearize(fun, specs):
    import jaxprc
    n = len(specs)

    def linearized_fun(*args):
        out, f_jvp = jaxprc.linearize(fun, *args[:n])
        return out, f_jvp(*args[n:])
    return linearized_fun, specs + _tree_map(_tangent_struct, specs)


def _t_vjp(fun, specs):
    import jaxprc
    n = len(specs)
    cotangent = _tree_map(_tangent_struct, jaxprc.eval_shape(fun, *specs))

    def vjp_fun(*args):
        out, pullback = jaxprc.vjp(fun, *args[:n])
        return out, pullback(args[n])
    return vjp_fun, specs + (cotangent,)


def _t_vmap(fun, specs, in_axes=0, axis_size=4, out_axes=0):
    import jaxprc
    if isinstance(axis_size, bool) or not isinstance(axis_size, int) or not 0 <= axis_size <= MAX_DIMENSION:
        shown = repr(axis_size) if len(repr(axis_size)) <= 40 else repr(axis_size)[:30] + "..."
        raise UsageError(f"vmap axis_size={shown} is not a valid axis "
                         "size: expected an integer from 0 to 2**63-1")
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(specs)
    if len(axes) != len(specs):
        raise UsageError(f"vmap in_axes {in_axes!r} has {len(axes)} entries for "
                         f"{len(specs)} arguments")

    def batched(axis, s):
        if axis is None:
            return s
        if not isinstance(axis, int) or not -s.ndim - 1 <= axis <= s.ndim:
            raise UsageError(f"vmap in_axes entry {axis!r} is not an axis of an argument of "
                             f"shape {s.shape}")
        axis %= s.ndim + 1
        return jaxprc.ShapeDtypeStruct(s.shape[:axis] + (axis_size,) + s.shape[axis:], s.dtype,
                                       s.weak_type)

    new_specs = tuple(_tree_map(lambda s, a=a: batched(a, s), spec) for a, spec in zip(axes, specs))
    return jaxprc.vmap(fun, in_axes=tuple(axes), out_axes=out_axes), new_specs


TRANSFORMS = {
    "grad": _t_derivative("grad"),
    "value_and_grad": _t_derivative("value_and_grad"),
    "jacfwd": _t_derivative("jacfwd"),
    "jacrev": _t_derivative("jacrev"),
    "hessian": _t_derivative("hessian"),
    "jvp": _t_jvp,
    "vjp": _t_vjp,
    "linearize": _t_linearize,
    "vmap": _t_vmap,
}
# The option a bare value (``vmap:0``, ``grad:1``) stands for.
_POSITIONAL_OPTION = {"vmap": "in_axes", "grad": "argnums", "value_and_grad": "argnums",
                      "jacfwd": "argnums", "jacrev": "argnums", "hessian": "argnums"}


def _literal(text: str, what: str):
    digits = max((len(run) for run in re.findall(r"\d+", text)), default=0)
    if digits > 4000:          # (Python itself refuses integers of more than 4300 digits)
        raise UsageError(f"{what}: {_excerpt(text)} holds a number of {digits} digits; too large "
                         "to be a value here")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise UsageError(f"{what}: {_excerpt(text)} is not a Python literal "
                         "(like 0, None or (0, None))") from None


def parse_transform(spec: str) -> tuple[str, dict]:
    """``'vmap:(0,None):axis_size=8'`` -> ``('vmap', {'in_axes': (0, None), 'axis_size': 8})``."""
    name, *opts = split_top_level(spec, ":")
    if name not in TRANSFORMS:
        raise UsageError(f"unknown transform {_excerpt(name)} in --transform {_excerpt(spec)}; "
                         "known transforms: " + ", ".join(TRANSFORMS))
    options = {}
    for opt in opts:
        key, eq, value = opt.partition("=")
        if not eq:
            key, value = _POSITIONAL_OPTION.get(name), opt
            if key is None:
                raise UsageError(f"transform {name!r} takes no options, got {opt!r}")
        options[key.strip()] = _literal(value.strip(), f"--transform {name}:{key.strip()}")
    return name, options


def apply_transform(fun, specs, spec: str):
    name, options = parse_transform(spec)
    try:
        return TRANSFORMS[name](fun, specs, **options)
    except SystemExit as e:     # (vjp traces the function for its output type)
        raise _user_code_exit(e, f"--transform {spec}: the function") from e
    except TypeError as e:
        raise UsageError(f"--transform {spec}: {e}") from None


# -------------------------------------------------------------- pipelines

def make_printer(args):
    """The IR printing asked for by --print-after*, --print-ir-* (to stderr, as mlir-opt)."""
    from jaxprc.passes.instrument import IRPrinter
    return IRPrinter(after_all=args.print_after_all, after=args.print_after or (),
                     before=args.print_ir_before or (), after_change=args.print_ir_after_change,
                     diff=args.print_ir_diff)


def check_steps(args, steps: list[str]) -> None:
    """A --print-after or --print-ir-before STEP that never runs is a typo: say so before doing
    the work."""
    known = [s.split(":")[0] for s in steps]
    for flag, names in (("--print-after", args.print_after), ("--print-ir-before", args.print_ir_before)):
        unknown = sorted(set(names or ()) - set(known))
        if unknown:
            raise UsageError(f"{flag} {unknown[0]}: no step of that name runs here; "
                             f"the steps are: {', '.join(known) or '(none)'}")


def load_pass_plugins(paths: list[str] | None) -> None:
    """--load-pass-plugin FILE.py: run the file, which registers passes or pattern sets
    (``register_pass``, ``register_pattern``) that --passes may then name."""
    import runpy
    for path in paths or ():
        if not os.path.isfile(path):
            raise UsageError(f"--load-pass-plugin {path}: no such file")
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        with _user_code(f"--load-pass-plugin {path}: the module", f"--load-pass-plugin {path} failed"):
            runpy.run_path(path, run_name="__jaxprc_plugin__")


def parse_passes(pipeline: str | None) -> list:
    """The (name, options) steps of a --passes pipeline (none without --passes)."""
    from jaxprc.passes import PipelineError, parse_pipeline
    if pipeline is None:
        return []
    try:
        return parse_pipeline(pipeline)
    except PipelineError as e:
        raise UsageError(f"--passes {pipeline!r}: {e}") from None


class _PassInput:
    """Remembers the program each pass starts from (what a reproducer of its failure holds)."""

    program = None

    def run_before_pass(self, label, program):
        self.program = program


def run_passes(program, pipeline: str | None, where: str, instrument=()):
    """Run a pass pipeline, always verifying the IR after every pass; errors name the pass
    (and, with --reproducer, the reproducer written: the failing pass and its input)."""
    from jaxprc.ir.dtypes import config
    from jaxprc.passes import PassError, PassVerificationError, run_pipeline
    from jaxprc.passes.reproducer import write_reproducer
    steps = parse_passes(pipeline)
    if not steps:
        return program
    pass_input = _PassInput()
    try:
        return run_pipeline(program, steps, verify=True, instrument=[pass_input, *instrument])
    except (PassError, PassVerificationError) as e:
        failed = e.__cause__ if isinstance(e, PassError) else e
        written = ""
        if config.jaxprc_reproducer_dir:
            stage = "pass" if isinstance(e, PassError) else "verify"
            path = write_reproducer(config.jaxprc_reproducer_dir, pass_input.program, stage, failed, e.label)
            written = f" (reproducer: {path})"
        if isinstance(e, PassError):
            raise UsageError(f"pass {e.label!r} failed on {where}: {type(failed).__name__}: "
                             f"{failed}{written}") from e
        raise UsageError(f"pass {e.label!r} produced an ill-typed program from {where}: "
                         f"{e.reason}{written}") from e


def describe_error(e: BaseException) -> str:
    """``Type: message``, with the notes added to it (a reproducer's path)."""
    notes = "".join(f" ({note})" for note in getattr(e, "__notes__", ()))
    return f"{type(e).__name__}: {e}{notes}"


@contextlib.contextmanager
def reproducers_to(directory: str | None):
    """--reproducer DIR: failures of passes, lowering and compilation write reproducers there."""
    from jaxprc.ir.dtypes import config
    saved = config.jaxprc_reproducer_dir
    if directory:
        config.update("jaxprc_reproducer_dir", directory)
    try:
        yield
    finally:
        config.update("jaxprc_reproducer_dir", saved)


def use_devices(count: int | None) -> None:
    """Run on ``count`` CPU devices (``--devices``): set before the client exists."""
    if count is None:
        return
    from jaxprc.runtime import client
    if count < 1:
        raise UsageError(f"--devices {count}: expected a positive number of devices")
    if client._BACKEND is not None and len(client._BACKEND.devices) != count:
        raise UsageError(f"--devices {count}: the client already has {len(client._BACKEND.devices)} devices")
    os.environ["JAXPRC_NUM_CPU_DEVICES"] = str(count)


def program_text(program, debug_info: bool = False) -> str:
    """Text IR; ``debug_info``: with the equations' source locations, ``loc("file.py":12:4)``."""
    from jaxprc.ir.printer import pp_jaxpr
    return pp_jaxpr(program, debug_info=debug_info)


def emit(program, kind: str, name: str, debug_info: bool = False) -> str:
    """The program as text IR, StableHLO, or XLA's optimized HLO (after compiling it); a program
    over several devices (shard_map, sharding constraints) lowered partitioned, as jit does."""
    import jaxprc
    from jaxprc import runtime
    from jaxprc.engine import spmd
    from jaxprc.engine.dispatch import compile_closed_jaxpr, reproducer_on_failure
    from jaxprc.engine.lowering import lower_jaxpr
    name = re.sub(r"\W", "_", name) or "main"
    if kind == "jaxpr":
        return program_text(program, debug_info)
    try:
        if spmd.needs_spmd(program, [], None, None):
            fn = jaxprc.jaxpr_as_fun(program)
            fn.__name__ = name
            lowered = jaxprc.jit(fn).lower(*[jaxprc.ShapeDtypeStruct(a.shape, a.dtype) for a in program.in_avals])
            return lowered.as_text(debug_info=debug_info) if kind == "stablehlo" else lowered.compile().as_text()
        if kind == "stablehlo":      # symbolic dimensions: the dynamic module export writes
            with reproducer_on_failure(program, "lower"):
                lowered = lower_jaxpr(program, name=name, platform=runtime.default_backend(), dynamic=True)
                return lowered.as_text(debug_info=debug_info)
        return compile_closed_jaxpr(program, name).as_text()
    except Exception as e:
        raise UsageError(f"{'lowering' if kind == 'stablehlo' else 'compiling'} {name} failed: "
                         f"{describe_error(e)}") from e


# ---------------------------------------------------------------- commands

def argument_specs(args) -> tuple:
    """The argument types of ``--args`` (with ``--constraints``) or ``--args-expr``."""
    if args.args is not None and args.args_expr is not None:
        raise UsageError("give the argument types with either --args or --args-expr, not both")
    if args.args_expr is not None:
        return eval_args_expr(args.args_expr)
    return parse_arg_types(args.args or "", args.constraints or "")


def is_serialized_exported(path: str) -> bool:
    """Whether ``path`` holds bytes (``jaxprc export``, JAX's ``Exported.serialize``) rather than
    text IR: serialized artifacts hold NUL bytes, text never does."""
    if path == "-" or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return b"\0" in f.read(4096)


def load_exported(path: str):
    from jaxprc import export
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror}") from None
    try:
        return export.deserialize(blob)
    except Exception as e:   # noqa: BLE001 -- any failure to read the bytes is the file's fault
        raise UsageError(f"{path!r} is not a text IR file, nor a serialized Exported that jaxprc can "
                         f"read: {describe_error(e)}") from None


def cmd_export(args) -> int:
    """Trace FILE.py:FUNC for the argument types and write it serialized (JAX's format)."""
    import jaxprc
    from jaxprc import export
    specs = argument_specs(args)
    fun, name = load_function(args.function)
    platforms = [p.strip() for p in args.platforms.split(",")] if args.platforms else None
    with _user_code(f"tracing {name}: the function",
                    f"tracing {name} on arguments ({describe_specs(specs)}) failed"):
        exported = export.export(jaxprc.jit(fun), platforms=platforms)(*specs)
    try:
        blob = exported.serialize(vjp_order=args.vjp_order)
    except (NotImplementedError, ValueError, TypeError) as e:
        raise UsageError(f"serializing {name} failed: {describe_error(e)}") from None
    try:
        with open(args.output, "wb") as f:
            f.write(blob)
    except OSError as e:
        raise UsageError(f"cannot write {args.output!r}: {e.strerror}") from None
    print(f"wrote {args.output}: {_signature(exported)} for {', '.join(exported.platforms)}"
          f"{f', with vjps to order {args.vjp_order}' if args.vjp_order else ''} ({len(blob)} bytes)",
          file=sys.stderr)
    return 0


def _signature(exported) -> str:
    shows = lambda avals: ", ".join(a.str_short() for a in avals)
    return f"{exported.fun_name}({shows(exported.in_avals)}) -> ({shows(exported.out_avals)})"


def _run_exported(args) -> int:
    """``jaxprc run model.bin``: call a serialized Exported on the inputs (flat, in order)."""
    import numpy as np
    from jaxprc.tree_util import tree_leaves
    exported = load_exported(args.file)
    names = [f"in{i}" for i in range(len(exported.in_avals))]
    inputs = collect_inputs(exported, args.input or [], names)
    call_args = exported.in_tree.unflatten(inputs)
    try:
        outs = tree_leaves(exported.call(*call_args[0], **call_args[1]))
    except Exception as e:
        raise UsageError(f"running {args.file} ({_signature(exported)}) failed: {describe_error(e)}") from e
    return _show_outputs(args, [np.asarray(o) for o in outs], exported.out_avals)

def cmd_trace(args) -> int:
    """Trace FILE.py:FUNC, apply transforms and passes, emit IR / StableHLO / HLO."""
    import jaxprc
    from jaxprc.passes import count_equations
    from jaxprc.passes.instrument import PassTiming
    specs = argument_specs(args)
    load_pass_plugins(args.load_pass_plugin)
    fun, name = load_function(args.function)
    printer = make_printer(args)
    check_steps(args, ["trace", *(args.transform or ()), *(n for n, _ in parse_passes(args.passes))])
    timing = PassTiming() if args.timing else None

    def trace(f, stage):
        with _user_code(f"tracing {name} ({stage}): the function",
                        f"tracing {name} ({stage}) on arguments ({describe_specs(specs)}) failed"):
            return jaxprc.make_jaxpr(f)(*specs)

    if printer.wants("trace"):
        printer.show("trace", trace(fun, "as written"))
    for spec in args.transform or ():
        fun, specs = apply_transform(fun, specs, spec)
        if printer.wants(spec):
            printer.show(spec, trace(fun, f"after --transform {spec}"))
    stage = "after --transform " + " ".join(args.transform) if args.transform else "as written"
    program = (timing.timed("trace", trace, fun, stage, count=count_equations) if timing
               else trace(fun, stage))
    printer.start(program)
    program = run_passes(program, args.passes, name, [i for i in (printer, timing) if i])
    out = (timing.timed(f"emit {args.emit}", emit, program, args.emit, name.split(".")[-1], args.debug_info)
           if timing else emit(program, args.emit, name.split(".")[-1], args.debug_info))
    _write_text(args.output, out)
    if timing:
        print(timing.report(), file=sys.stderr)
    return 0


def cmd_opt(args) -> int:
    """Run a pass pipeline over a text IR file and write text IR."""
    from jaxprc.passes import count_equations
    from jaxprc.passes.instrument import PassTiming
    load_pass_plugins(args.load_pass_plugin)
    printer = make_printer(args)
    check_steps(args, [n for n, _ in parse_passes(args.passes)])
    timing = PassTiming() if args.timing else None
    program = (timing.timed("parse and verify", load_program, args.file, count=count_equations) if timing
               else load_program(args.file))
    printer.start(program)
    program = run_passes(program, args.passes, args.file, [i for i in (printer, timing) if i])
    _write_text(args.output, timing.timed("print", program_text, program, args.debug_info) if timing
                else program_text(program, args.debug_info))
    if timing:
        print(timing.report(), file=sys.stderr)
    return 0


def cmd_lower(args) -> int:
    """Lower a text IR file to StableHLO, or compile it to XLA's optimized HLO."""
    use_devices(args.devices)
    program = load_program(args.file)
    name = "main" if args.file == "-" else os.path.splitext(os.path.basename(args.file))[0]
    _write_text(args.output, emit(program, args.emit, name, args.debug_info))
    return 0


def _load_value(text: str, aval, name: str):
    """An input value: a .npy file or a Python literal, checked against the input's type."""
    import numpy as np
    from jaxprc.ir import dtypes as dt
    from jaxprc.ir.shape_poly import is_constant_shape
    if text.endswith(".npy") or os.path.isfile(text):
        try:
            value = np.load(text, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"input {name}: cannot load {text!r}: {e}") from None
        if not np.can_cast(value.dtype, aval.dtype, "same_kind"):
            raise UsageError(f"input {name}: {text} holds {value.dtype} values, but {name} is "
                             f"{aval.str_short()}")
    else:
        value = _literal(text, f"input {name}")
    try:
        value = np.asarray(value, dtype=aval.dtype)
    except OverflowError:
        raise UsageError(f"input {name}: {_excerpt(text)} does not fit in the input's type "
                         f"{aval.str_short()}") from None
    except (TypeError, ValueError) as e:
        raise UsageError(f"input {name}: {_excerpt(text)} is not a value of type "
                         f"{aval.str_short()}: {e}") from None
    if not is_constant_shape(aval.shape):      # symbolic sizes: checked when the program is called
        if value.ndim != aval.ndim:
            raise UsageError(f"input {name}: expected type {aval.str_short()}, got shape {value.shape}")
        return value
    if value.ndim == 0 and aval.shape:
        value = np.broadcast_to(value, aval.shape)     # a scalar fills the whole input
    if value.shape != aval.shape:
        raise UsageError(f"input {name}: expected type {aval.str_short()}, got shape "
                         f"{value.shape} of dtype {dt.short_name(value.dtype)}")
    return value


def collect_inputs(program, given: list[str], names: list[str] | None = None) -> list:
    """``NAME=VALUE`` or positional ``VALUE`` items -> one value per program input (``names``:
    the inputs' names, by default the printer's)."""
    names = input_names(program) if names is None else names
    avals = dict(zip(names, program.in_avals))
    signature = ", ".join(f"{n}:{a.str_short()}" for n, a in avals.items()) or "none"
    values: dict[str, str] = {}
    position = 0
    for item in given:
        m = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", item, re.S)
        if m:
            name, text = m.groups()
            if name not in avals:
                raise UsageError(f"--input {item}: the program has no input named {name!r}; "
                                 f"its inputs are {signature}")
        else:
            if position >= len(names):
                raise UsageError(f"--input {item}: more inputs than the program's {len(names)} "
                                 f"({signature})")
            name, text = names[position], item
            position += 1
        if name in values:
            raise UsageError(f"input {name} is given twice")
        values[name] = text
    missing = [f"{n}:{avals[n].str_short()}" for n in names if n not in values]
    if missing:
        raise UsageError(f"missing --input for {', '.join(missing)} (the program's inputs are "
                         f"{signature}; give NAME=FILE.npy or NAME=literal)")
    return [_load_value(values[n], avals[n], n) for n in names]


def bind_named_callbacks(program, given: list[str]) -> None:
    """``--callback NAME=FILE.py:FUNC``: the program's host callback NAME calls FUNC (on flat
    arrays, returning its results; the text names callbacks only)."""
    from jaxprc.ir import bind_callbacks
    callbacks = {}
    for item in given:
        name, eq, spec = item.partition("=")
        if not eq or not name:
            raise UsageError(f"--callback {item}: expected NAME=FILE.py:FUNC")
        callbacks[name] = load_function(spec)[0]
    try:
        bind_callbacks(program, callbacks)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None


def cmd_run(args) -> int:
    """Compile and run a text IR file on the given inputs."""
    import numpy as np
    import jaxprc
    use_devices(args.devices)
    if is_serialized_exported(args.file):
        return _run_exported(args)
    program = load_program(args.file)
    bind_named_callbacks(program, args.callback or [])
    inputs = collect_inputs(program, args.input or [])
    try:
        inputs = jaxprc.sharding.put_as_typed(inputs, program.in_avals)    # f32[8@x]: split over x
        outs = jaxprc.jit(jaxprc.jaxpr_as_fun(program))(*inputs)
    except Exception as e:
        raise UsageError(f"running {args.file} failed: {describe_error(e)}") from e
    return _show_outputs(args, [np.asarray(o) for o in outs], program.out_avals)


def _show_outputs(args, outs, out_avals) -> int:
    import numpy as np
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        for i, o in enumerate(outs):
            np.save(os.path.join(args.output, f"out{i}.npy"), o)
        print(f"wrote {len(outs)} output{'s' if len(outs) != 1 else ''} to {args.output}/out*.npy")
        return 0
    for i, (o, aval) in enumerate(zip(outs, out_avals)):
        print(f"out{i}:{aval.str_short()} = {np.array2string(o, separator=', ', threshold=200)}")
    return 0


def replay_stage(program, stage: str, pipeline: str) -> BaseException | None:
    """Run one stage of the compiler on ``program``; the error it raises (None: none)."""
    from jaxprc import runtime
    from jaxprc.engine.dispatch import compile_closed_jaxpr
    from jaxprc.engine.lowering import lower_jaxpr
    from jaxprc.passes import PassError, run_pipeline
    try:
        if stage in ("pass", "verify"):
            run_pipeline(program, pipeline, verify=True)
        elif stage == "lower":
            lower_jaxpr(program, name="repro", platform=runtime.default_backend())
        else:
            compile_closed_jaxpr(program, "repro")
    except PassError as e:
        return e.__cause__
    except Exception as e:  # noqa: BLE001 -- whatever the stage raises is the answer
        return e
    return None


def cmd_repro(args) -> int:
    """Replay a reproducer (or each in a directory): 0 when every error comes back, else 3 if
    one fails differently, else 1."""
    if not os.path.isdir(args.file):
        return replay_reproducer(args.file)
    files = sorted(f for f in os.listdir(args.file) if f.endswith(".jaxpr"))
    if not files:
        raise UsageError(f"{args.file}: no reproducers (*.jaxpr files) in this directory")
    statuses = [replay_reproducer(os.path.join(args.file, f)) for f in files]
    return max(statuses, key=(0, 1, 3).index)


def replay_reproducer(path: str) -> int:
    from jaxprc.ir.parser import ParseError, parse
    from jaxprc.passes.reproducer import ReproducerError, error_line, flags_applied, read_reproducer
    try:
        repro = read_reproducer(_read_text(path))
    except ReproducerError as e:
        raise UsageError(f"{path}: {e}") from None
    with flags_applied(repro.flags):
        try:
            program = parse(repro.program)
        except ParseError as e:
            raise UsageError(f"{path}: the reproducer's program does not parse: {e}") from None
        error = replay_stage(program, repro.stage, repro.pipeline)
    where = f"stage {repro.stage}" + (f" (pipeline {repro.pipeline})" if repro.pipeline else "")
    if error is None:
        print(f"{path}: does not reproduce: {where} succeeded (recorded error: {repro.error})")
        return 1
    got = error_line(error)
    if got == repro.error:
        print(f"{path}: reproduces: {where} fails with the recorded error: {got}")
        return 0
    print(f"{path}: fails differently: {where} raised {got}\n  recorded: {repro.error}")
    return 3


def _header_comments(text: str) -> str:
    """The ``#`` lines a file starts with (a reproducer's header), kept on every candidate."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line + "\n")
    return "".join(lines)


def command_test(command: str, header: str, timeout: float):
    """``--test CMD``: CMD with a candidate file's path appended exits 0 while it is interesting."""
    import shlex
    import signal
    import subprocess
    import tempfile
    argv = shlex.split(command)
    if not argv:
        raise UsageError("--test: empty command")
    directory = tempfile.mkdtemp(prefix="jaxprc-reduce-")

    def interesting(program) -> bool:
        path = os.path.join(directory, "candidate.jaxpr")
        with open(path, "w", encoding="utf-8") as f:
            f.write(header + str(program) + "\n")
        try:
            # A session of its own: at the timeout, what the command started goes with it.
            process = subprocess.Popen([*argv, path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        except OSError as e:
            raise UsageError(f"--test {command!r} cannot run: {e.strerror}") from None
        try:
            return process.wait(timeout=timeout) == 0
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return False
    return interesting


def error_test(pattern: str, pipeline: str | None):
    """``--until-error REGEX``: the passes (if any), lowering or compilation raise an error whose
    ``Type: message`` matches REGEX."""
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"--until-error {pattern!r} is not a regular expression: {e}") from None
    stages = ["pass"] if pipeline else []

    def interesting(program) -> bool:
        from jaxprc.passes.reproducer import error_line
        for stage in [*stages, "compile"]:
            error = replay_stage(program, stage, pipeline)
            if error is not None:
                return regex.search(error_line(error)) is not None
        return False
    return interesting


def reference_inputs(avals) -> list:
    """Deterministic inputs for a program: small varied values of each input's type."""
    import numpy as np
    rng = np.random.default_rng(0)
    out = []
    for a in avals:
        if a.dtype == np.bool_:
            out.append(rng.random(a.shape) < 0.5)
        elif a.dtype.kind in "iu":
            out.append(rng.integers(0, 5, a.shape).astype(a.dtype))
        else:
            out.append((rng.standard_normal(a.shape)).astype(a.dtype))
    return out


def differs_test(rtol: float = 1e-5, atol: float = 1e-6):
    """``--until-differs``: XLA's result (one compilation of the whole program) differs from the
    reference evaluator's (each primitive evaluated on its own) on deterministic inputs."""
    import numpy as np
    import jaxprc
    from jaxprc.ir.tracing import eval_jaxpr

    def interesting(program) -> bool:
        args = reference_inputs(program.in_avals)
        try:
            compiled = jaxprc.jit(jaxprc.jaxpr_as_fun(program))(*args)
            reference = eval_jaxpr(program.jaxpr, program.consts, *args)
        except Exception:  # noqa: BLE001 -- a candidate that fails is not a miscompile
            return False
        for c, r in zip(compiled, reference):
            c, r = np.asarray(c), np.asarray(r)
            if c.shape != r.shape or c.dtype != r.dtype:
                return True
            if c.dtype.kind in "fc" or c.dtype.name == "bfloat16":
                if not np.allclose(c.astype(np.complex128), r.astype(np.complex128), rtol, atol, equal_nan=True):
                    return True
            elif not np.array_equal(c, r):
                return True
        return False
    return interesting


def cmd_reduce(args) -> int:
    """Shrink a program while the interestingness test holds; write the smallest found."""
    from jaxprc.passes import count_equations
    from jaxprc.tools.isolated_test import IsolatedTest, WorkerDied
    from jaxprc.tools.reduce import Reducer
    chosen = [t for t in (args.test, args.until_error, args.until_differs or None) if t is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one interestingness test: --test CMD, --until-error REGEX or "
                         "--until-differs")
    if args.passes is not None and args.until_error is None:
        raise UsageError("--passes goes with --until-error (the pipeline whose failure is kept)")
    text = _read_text(args.file)
    load_pass_plugins(args.load_pass_plugin)
    program = load_program(args.file)
    if args.test is not None:
        interesting = command_test(args.test, _header_comments(text), args.timeout)
    elif args.until_error is not None:
        parse_passes(args.passes)
        error_test(args.until_error, args.passes)           # a bad pattern is said here
        interesting = IsolatedTest({"test": "error", "pattern": args.until_error, "pipeline": args.passes},
                                   args.load_pass_plugin or [], args.timeout)
    else:
        interesting = IsolatedTest({"test": "differs"}, args.load_pass_plugin or [], args.timeout)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    reducer = Reducer(interesting, progress)
    try:
        smallest = reducer.reduce(program)
    except ValueError as e:
        timed_out = isinstance(interesting, IsolatedTest) and interesting.timeouts
        if args.test is not None or timed_out:       # (a --test run that times out is not interesting)
            e = f"{e} (or it ran past --timeout {args.timeout:g}s)"
        raise UsageError(f"{args.file}: {e}") from None
    except WorkerDied as e:
        raise UsageError(f"{args.file}: {e}") from None
    finally:
        if isinstance(interesting, IsolatedTest):
            interesting.close()
    if isinstance(interesting, IsolatedTest) and (interesting.timeouts or interesting.deaths):
        print(f"reduce: {interesting.timeouts} candidates ran past --timeout {args.timeout:g}s, "
              f"{interesting.deaths} killed the test's process", file=sys.stderr)
    n = count_equations(smallest)
    print(f"reduce: {count_equations(program)} -> {n} equation{'s' if n != 1 else ''} "
          f"({reducer.tests} tests, {time.perf_counter() - reducer.start:.1f}s)", file=sys.stderr)
    _write_text(args.output, _header_comments(text) + str(smallest))
    return 0


def cmd_check(args) -> int:
    """Parse, verify and round-trip a text IR file."""
    from jaxprc.ir.equality import alpha_equivalent
    from jaxprc.ir.parser import parse
    program = load_program(args.file)
    printed = str(program)
    again = parse(printed)
    reprinted = str(again)       # (printing forces custom rules' thunks, so both sides compare by jaxpr)
    if reprinted != printed or not alpha_equivalent(program, again):
        raise UsageError(f"{args.file}: the program does not survive a print/parse round trip")
    n = len(program.jaxpr.eqns)
    print(f"{args.file}: ok ({n} equation{'s' if n != 1 else ''}, verified, round-trips)")
    return 0


def cmd_graph(args) -> int:
    """Write the dataflow graph of a text IR file as Graphviz DOT or SVG."""
    from jaxprc.tools.graph import to_dot, to_svg
    program = load_program(args.file)
    suffix = os.path.splitext(args.output or "")[1]
    if args.format is None and suffix not in ("", ".svg", ".dot", ".gv"):
        raise UsageError(f"-o {args.output}: cannot write {suffix} files; name an .svg or .dot file "
                         f"(or choose with --format)")
    fmt = args.format or ("svg" if suffix == ".svg" else "dot")
    _write_text(args.output, to_svg(program) if fmt == "svg" else to_dot(program))
    return 0


def cmd_demo(args) -> int:
    """The end-to-end walk; see ``demo``'s description."""
    from jaxprc.tools.demo import run_demo
    return run_demo()


# ------------------------------------------------------------------ parser

EPILOG = textwrap.dedent("""\
    examples:
      jaxprc trace model.py:loss --args 'f32[8,4], f32[8]' --transform grad --print-after-all
      jaxprc opt prog.jaxpr --passes jvp,vmap:axis_size=4,dce -o batched.jaxpr
      jaxprc lower batched.jaxpr --emit stablehlo
      jaxprc run prog.jaxpr --input x=data.npy --input y=2.0
      jaxprc check prog.jaxpr
      jaxprc graph prog.jaxpr -o prog.svg
      jaxprc demo

    `jaxprc COMMAND --help` explains each command.
    """)

def environment_help() -> str:
    """The epilog's list of the environment variables that set jaxprc.config options (from the
    options' table, ir/config.py)."""
    rows = [f"  {o.env}={o.default!r}\n" + textwrap.fill(o.doc, 79, initial_indent=" " * 6,
                                                          subsequent_indent=" " * 6)
            for o in OPTIONS.values() if o.env]
    return "\nenvironment (jaxprc.config options; default shown):\n" + "\n".join(rows) + "\n"


TRANSFORM_HELP = textwrap.dedent("""\
    transforms (--transform, applied in the order given; each derives the
    argument types of the function it builds from the previous ones):
      grad[:argnums], value_and_grad[:argnums]   same arguments
      jacfwd[:argnums], jacrev[:argnums], hessian[:argnums]
      jvp, linearize    arguments + one tangent per argument -> (outputs, output tangents)
      vjp               arguments + a cotangent of the output -> (outputs, input cotangents)
      vmap[:in_axes][:axis_size=N][:out_axes=A]
                        inserts a batch axis of size N (default 4) at in_axes (default 0)
    options are Python literals, e.g. vmap:(0,None):axis_size=8 or grad:(0,1).
    """)


_DEBUG_ANYWHERE = argparse.ArgumentParser(add_help=False)
_DEBUG_ANYWHERE.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show Python tracebacks on errors")


def _sub(sub, name, help_, description, examples, run, notes=""):
    p = sub.add_parser(name, help=help_, description=textwrap.fill(description, 79),
                       parents=[_DEBUG_ANYWHERE],
                       epilog=notes + "examples:\n" + textwrap.indent(textwrap.dedent(examples), "  "),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(run=run)
    return p


def _add_pipeline_options(p):
    p.add_argument("--passes", metavar="PIPELINE",
                   help="comma-separated passes with :key=value options, e.g. jvp,vmap:axis_size=4,dce")
    p.add_argument("--print-after-all", action="store_true",
                   help="print the IR after every step to stderr")
    p.add_argument("--print-after", action="append", metavar="STEP",
                   help="print the IR after the pass (or transform, or 'trace') named STEP; repeatable")
    p.add_argument("--print-ir-before", action="append", metavar="STEP",
                   help="print the IR before the pass named STEP; repeatable")
    p.add_argument("--print-ir-after-change", action="store_true",
                   help="print the IR after every step that changed it")
    p.add_argument("--print-ir-diff", action="store_true",
                   help="print a unified diff of the IR before and after every step that changed it")
    _add_debug_info_option(p)
    p.add_argument("--timing", action="store_true",
                   help="print a table of each step's wall time and equations before/after to stderr")
    _add_plugin_option(p)


def _add_plugin_option(p):
    p.add_argument("--load-pass-plugin", action="append", metavar="FILE.py",
                   help="run FILE.py first: the passes, pattern sets and primitives it registers can "
                        "be named (e.g. --passes rewrite:set=my_rules); repeatable")


def _add_debug_info_option(p):
    p.add_argument("--debug-info", action="store_true",
                   help="print source locations: loc(\"file.py\":12:4) after each equation of the text "
                        "IR (they parse back), and in StableHLO")


def _add_reproducer_option(p):
    p.add_argument("--reproducer", metavar="DIR",
                   help="when a pass, the verifier, lowering or XLA compilation fails, write a "
                        "reproducer file into DIR (replay it with `jaxprc repro FILE`)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxprc", description=__doc__.splitlines()[0].replace("``", ""),
                                epilog=EPILOG + environment_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = _sub(sub, "trace", "trace a Python function, transform it, emit IR/StableHLO/HLO",
             "Trace FUNC from FILE.py on arguments of the given types, apply --transform's in "
             "order, run --passes, and write the result.", """\
             jaxprc trace model.py:loss --args 'f32[8,4], f32[8]'
             jaxprc trace model.py:loss --args 'f32[8,4], f32[8]' --transform grad --print-after-all
             jaxprc trace model.py:loss --args 'f32[8,4], f32[8]' --transform grad --transform vmap:0
             jaxprc trace model.py:predict --args-expr "({'w': T('f32[4,2]')}, T('f32[8,4]'))"
             jaxprc trace model.py:loss --args 'f32[8,4], f32[8]' --passes cse,dce --emit hlo -o loss.hlo
             """, cmd_trace, notes=TRANSFORM_HELP + "\n")
    t.add_argument("function", metavar="FILE.py:FUNC", help="the Python file and the function in it")
    t.add_argument("--args", metavar="TYPES",
                   help="argument types as IR type text, e.g. 'f32[8,4], f32[8], ~f32[]' (~: weak type)")
    t.add_argument("--constraints", metavar="C",
                   help="constraints on the symbolic dimensions of --args, e.g. 'b >= 2, b <= 1024' "
                        "(types like f32[b,784] have symbolic dimensions)")
    t.add_argument("--args-expr", metavar="EXPR",
                   help="arguments as a Python expression (a tuple is the argument list) of "
                        "ShapeDtypeStruct(shape, dtype) or T('f32[3]'), for pytree arguments; "
                        "np and jnp are in scope")
    t.add_argument("--transform", action="append", metavar="T", help="a transform (see above); repeatable")
    _add_pipeline_options(t)
    t.add_argument("--emit", choices=["jaxpr", "stablehlo", "hlo"], default="jaxpr",
                   help="what to write: text IR (default), StableHLO, or XLA's optimized HLO")
    t.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    o = _sub(sub, "opt", "run a pass pipeline over a text IR file",
             "Read a text IR program (FILE or - for stdin), run the --passes pipeline, verifying "
             "the IR after each pass, and write the resulting text IR.", """\
             jaxprc opt prog.jaxpr --passes jvp,dce
             jaxprc opt prog.jaxpr --passes vmap:axis_size=4,dce -o batched.jaxpr
             cat prog.jaxpr | jaxprc opt - --passes jvp,cse,dce --print-after-all
             """, cmd_opt)
    o.add_argument("file", help="text IR file, or - for stdin")
    _add_pipeline_options(o)
    _add_reproducer_option(o)
    o.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")

    lo = _sub(sub, "lower", "lower a text IR file to StableHLO or XLA's optimized HLO",
              "Lower a text IR program to StableHLO (the MLIR module jit compiles), or with "
              "--emit hlo compile it and print XLA's optimized HLO.", """\
              jaxprc lower prog.jaxpr
              jaxprc lower prog.jaxpr --emit hlo -o prog.hlo
              """, cmd_lower)
    lo.add_argument("file", help="text IR file, or - for stdin")
    lo.add_argument("--emit", choices=["stablehlo", "hlo"], default="stablehlo")
    _add_reproducer_option(lo)
    _add_debug_info_option(lo)
    lo.add_argument("--devices", type=int, metavar="N", help="lower for N CPU devices (programs over a mesh)")
    lo.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")

    ex = _sub(sub, "export", "trace a Python function and write it serialized (JAX's format)",
              "Trace FUNC from FILE.py on arguments of the given types and write the Exported "
              "serialized as JAX's jax.export does (the StableHLO module and its calling "
              "convention), for `jaxprc run` or JAX's jax.export.deserialize.", """\
              jaxprc export model.py:predict --args 'f32[8,784]' -o model.bin
              jaxprc export model.py:loss --args 'f32[8,4], f32[8]' --vjp-order 1 -o loss.bin
              jaxprc run model.bin --input x.npy
              """, cmd_export)
    ex.add_argument("function", metavar="FILE.py:FUNC", help="the Python file and the function in it")
    ex.add_argument("--args", metavar="TYPES", help="argument types as IR type text, e.g. 'f32[8,4], i32[8]'")
    ex.add_argument("--constraints", metavar="C", help="constraints on the symbolic dimensions of --args")
    ex.add_argument("--args-expr", metavar="EXPR",
                    help="arguments as a Python expression of ShapeDtypeStruct(shape, dtype) or "
                         "T('f32[3]'), for pytree arguments")
    ex.add_argument("--vjp-order", type=int, default=0, metavar="N",
                    help="also serialize the vjps up to order N (to differentiate the loaded function)")
    ex.add_argument("--platforms", metavar="P", help="comma-separated platforms (default: this machine's)")
    ex.add_argument("-o", "--output", metavar="FILE", required=True, help="the file to write")

    r = _sub(sub, "run", "compile and run a text IR file or a serialized Exported",
             "Compile a text IR program with XLA and run it. Inputs are named as the program "
             "prints them (the names in its `lambda` header), or given in order without a name. "
             "A value is a .npy file or a Python literal; a scalar fills a whole array. A "
             "serialized Exported (jaxprc export, JAX's Exported.serialize) runs too: its inputs "
             "are its flat arguments in0, in1, ...", """\
             jaxprc run prog.jaxpr --input a=x.npy --input b=2.0
             jaxprc run model.bin --input x.npy
             jaxprc run prog.jaxpr --input '[1.0, 2.0, 3.0]' --input 0.5
             jaxprc run prog.jaxpr --input a=x.npy --input b=y.npy --output results/
             jaxprc run prog.jaxpr --input 1.0 --callback 'solve=host_fns.py:solve'
             """, cmd_run)
    r.add_argument("file", help="text IR file, serialized Exported, or - for stdin")
    _add_reproducer_option(r)
    r.add_argument("--input", "-i", action="append", metavar="[NAME=]VALUE",
                   help="an input: NAME=FILE.npy, NAME=literal, or positional; repeatable")
    r.add_argument("--output", metavar="DIR", help="write the outputs as DIR/out0.npy, out1.npy, ...")
    r.add_argument("--callback", action="append", metavar="NAME=FILE.py:FUNC",
                   help="the Python function a host callback named NAME calls; repeatable")
    r.add_argument("--devices", type=int, metavar="N",
                   help="run on N CPU devices (programs over a mesh: shard_map, pmap, sharding constraints)")

    rp = _sub(sub, "repro", "replay a reproducer and report whether its failure reproduces",
              "Re-run the failing stage of a reproducer file (written by --reproducer DIR or the "
              "jaxprc_reproducer_dir config option) with the flags it records, and report whether "
              "the same error comes back. Exit status: 0 the same error, 3 another error, 1 no "
              "error (or the file is not a reproducer).", """\
              jaxprc opt prog.jaxpr --passes vmap:axis_size=4 --reproducer crashes/
              jaxprc repro crashes/jaxprc-repro-pass-5d41402abc4b.jaxpr
              jaxprc repro crashes/
              """, cmd_repro)
    rp.add_argument("file", help="the reproducer file, or a directory of them (each is replayed)")

    rd = _sub(sub, "reduce", "shrink a program while a failure (or a test) persists",
              "Delta-debug a text IR program: try smaller programs (observe fewer results, cut "
              "equations into inputs, bypass them or make their results constants, the same "
              "inside branches and bodies, drop outputs and inputs, inline or extract sub-jaxprs, "
              "halve input dimensions, canonicalize) and keep those that verify and are still "
              "interesting, until none is smaller. "
              "Interesting means: --test CMD exits 0 on the candidate (its path appended), or "
              "--until-error REGEX: the --passes pipeline, lowering or compilation raises an error "
              "matching REGEX, or --until-differs: XLA's results differ from the reference "
              "evaluator's (each primitive on its own). Progress goes to stderr.", """\
              jaxprc reduce crash.jaxpr --until-error 'MLIR lowering rule' -o small.jaxpr
              jaxprc reduce prog.jaxpr --passes vmap:axis_size=4 --until-error 'batching rule'
              jaxprc reduce prog.jaxpr --until-differs
              jaxprc reduce repro.jaxpr --test 'jaxprc repro'
              """, cmd_reduce)
    rd.add_argument("file", help="text IR file (a reproducer too), or - for stdin")
    rd.add_argument("--test", metavar="CMD", help="a command run with the candidate's path appended; "
                                                  "exit status 0: still interesting")
    rd.add_argument("--until-error", metavar="REGEX", help="keep programs whose passes, lowering or "
                                                           "compilation raise an error matching REGEX")
    rd.add_argument("--until-differs", action="store_true",
                    help="keep programs whose XLA results differ from the reference evaluator's")
    rd.add_argument("--passes", metavar="PIPELINE", help="with --until-error: run this pipeline first")
    _add_plugin_option(rd)
    rd.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="seconds for the test of one candidate (past them: not interesting)")
    rd.add_argument("--quiet", action="store_true", help="no progress lines")
    rd.add_argument("-o", "--output", metavar="OUT", help="write the smallest program here instead of stdout")

    c = _sub(sub, "check", "parse, verify and round-trip a text IR file",
             "Parse FILE (or - for stdin), verify it, and check that printing and parsing it "
             "again gives the same program. Errors give the line and column.", """\
             jaxprc check prog.jaxpr
             jaxprc opt prog.jaxpr --passes jvp | jaxprc check -
             """, cmd_check)
    c.add_argument("file", help="text IR file, or - for stdin")

    g = _sub(sub, "graph", "draw the dataflow graph of a text IR file (DOT or SVG)",
             "Write the dataflow graph of a program: inputs, one node per equation, edges "
             "labelled with the values' types, sub-jaxprs (cond branches, loop bodies, custom "
             "rules' functions) as nested clusters. The format follows -o's suffix (.svg or "
             ".dot; DOT by default). SVG is laid out by jaxprc itself; for large programs, "
             "write .dot and use Graphviz (dot -Tsvg prog.dot > prog.svg).", """\
             jaxprc graph prog.jaxpr -o prog.svg
             jaxprc graph prog.jaxpr -o prog.dot && dot -Tpng prog.dot > prog.png
             """, cmd_graph)
    g.add_argument("file", help="text IR file, or - for stdin")
    g.add_argument("-o", "--output", metavar="OUT", help="OUT.svg or OUT.dot (default: DOT to stdout)")
    g.add_argument("--format", choices=["dot", "svg"], help="override the format chosen from -o")

    _sub(sub, "demo", "an end-to-end walk through a small model with a custom rule",
         "Trace a small model whose activation has a custom derivative rule, print its IR, "
         "the IR after each pass of a gradient pipeline (jvp, partial evaluation, transpose, "
         "cse, dce), the StableHLO, and the gradient computed by XLA, checked against finite "
         "differences.", """\
         jaxprc demo
         python -m jaxprc demo
         """, cmd_demo)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with reproducers_to(getattr(args, "reproducer", None)):
            return args.run(args)
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:     # user code reached by a path not wrapped above
        if args.debug:
            raise
        print(f"jaxprc {args.command}: error: {_user_code_exit(e, 'user code')}", file=sys.stderr)
        return 1
    except Exception as e:  # user-facing boundary: one paragraph, no traceback
        if args.debug:
            raise
        from jaxprc.ir.core import JaxprcError
        kind = "error" if isinstance(e, (UsageError, JaxprcError)) else f"error ({type(e).__name__})"
        hint = "" if isinstance(e, UsageError) else " (run with --debug for the traceback)"
        print(f"jaxprc {args.command}: {kind}: {e}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
