"""Compiling StableHLO with PJRT and running it on device arrays.

``compile(module)`` accepts StableHLO text, MLIR bytecode or an ``ir.Module``
and returns an ``Executable``. Running one takes jaxlib's lean path:
``execute_sharded`` on the input buffers, then ``consume_with_handlers`` with
result handlers that attach our avals (never the jaxlib calls that import
jax).
"""
from __future__ import annotations

import time

import ml_dtypes
import numpy as np
from jaxlib import _jax, xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import stablehlo

from .array import (Array, Aval, carries_no_data, deleted_error, device_aval, device_put,
                    host_value_without_data)
from . import compile_cache, effects, monitoring
from .client import backend


JaxRuntimeError = _jax.JaxRuntimeError


class XlaError(JaxRuntimeError):
    """XLA rejected a program (compile) or failed running it; names the function. A
    ``JaxRuntimeError`` (jaxlib's type, JAX's ``jax.errors.JaxRuntimeError``), as in JAX."""


class XlaCompileError(XlaError):
    pass


class XlaRuntimeError(XlaError):
    pass


# ---------------------------------------------------------- module signature

_DIALECTS = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(_DIALECTS)

# MLIR element type text -> numpy dtype.
_ELEMENT_DTYPES = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "complex<f32>": np.complex64, "complex<f64>": np.complex128,
    "i2": ml_dtypes.int2, "i4": ml_dtypes.int4, "ui1": ml_dtypes.uint1, "ui2": ml_dtypes.uint2,
    "ui4": ml_dtypes.uint4,
    # f8E4M3FN -> float8_e4m3fn, ... (the narrow floats)
    **{"f" + n[5:].replace("_", "").upper(): getattr(ml_dtypes, n) for n in dir(ml_dtypes)
       if n.startswith(("float8_", "float6_", "float4_"))},
}


def _context() -> ir.Context:
    ctx = ir.Context()
    ctx.append_dialect_registry(_DIALECTS)
    ctx.dialects["func"]            # load (not just register) func, so it parses in pretty form
    stablehlo.register_dialect(ctx)
    return ctx


def _parse(module) -> ir.Module:
    if isinstance(module, ir.Module):
        return module
    ctx = _context()
    with ctx:
        return ir.Module.parse(module)


def _main_func(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise XlaCompileError("the module has no function named 'main' (the entry point XLA runs)")


def _aval_of_type(t) -> Aval:
    tensor = ir.RankedTensorType(t)
    return Aval.get(tuple(tensor.shape), _ELEMENT_DTYPES[str(tensor.element_type)])


def _mark_donated(module: ir.Module, donated_args) -> None:
    """Let XLA reuse the buffers of ``donated_args`` for outputs (``jax.buffer_donor``)."""
    main = _main_func(module)
    with module.context:
        n = len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs)
        old = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else None
        attrs = []
        for i in range(n):
            d = {} if old is None else {a.name: a.attr for a in ir.DictAttr(old[i])}
            if i in donated_args:
                d["jax.buffer_donor"] = ir.BoolAttr.get(True)
            attrs.append(ir.DictAttr.get(d))
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


# ------------------------------------------------------------------ compile

def compile(module, *, name: str | None = None, out_avals=None, donated_args=(),
            options: xc.CompileOptions | None = None, host_callbacks=(),
            runtime_token: bool = False, cache_dir: str | None = None) -> "Executable":
    """Compile StableHLO (text, bytecode or ``ir.Module``) for the default device.

    ``out_avals`` (objects with shape, dtype, weak_type) give the results'
    types; by default they are read from ``main``'s signature (never weak).
    ``donated_args`` are the argument positions whose buffers XLA may reuse.
    ``host_callbacks`` are the Python functions the module's callback custom calls name by
    index; ``runtime_token``: ``main`` takes and returns a runtime token first (ordered
    effects, runtime/effects.py), which ``out_avals`` leave out. ``cache_dir``: the persistent
    compilation cache's directory (runtime/compile_cache.py), None for none; programs with host
    callbacks are never cached (the callbacks are this process's Python functions).
    """
    if out_avals is None or donated_args or host_callbacks:
        module = _parse(module)        # jaxlib takes host callbacks only with an ir.Module
    if out_avals is None:
        main = _main_func(module)
        with module.context:
            out_avals = [_aval_of_type(t) for t in
                         ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results]
        out_avals = out_avals[1:] if runtime_token else out_avals
    if donated_args:
        _mark_donated(module, set(donated_args))
    if name is None:
        name = "main"
        if isinstance(module, ir.Module) and "sym_name" in module.operation.attributes:
            name = ir.StringAttr(module.operation.attributes["sym_name"]).value
    b = backend()
    options = options or xc.CompileOptions()
    with monitoring.elapsed(monitoring.BACKEND_COMPILE_EVENT, name):
        loaded = _cached_or_compiled(module, name, b, options, host_callbacks, cache_dir)
    exe = Executable(loaded, name, [Aval.get(a.shape, a.dtype, a.weak_type) for a in out_avals])
    if host_callbacks or runtime_token:
        exe.calls_host(host_callbacks, runtime_token)
    return exe


def _cached_or_compiled(module, name: str, b, options, host_callbacks, cache_dir):
    """The loaded executable: from the persistent cache if it has it, else compiled by XLA (and
    stored). Records JAX's cache events (monitoring.py)."""
    entry_key = None
    compile_cache.report_use_once(cache_dir)
    if cache_dir and not host_callbacks:
        monitoring.record_event(monitoring.CACHE_REQUEST_EVENT)
        start = time.monotonic()
        cache_dir = compile_cache.directory(cache_dir)
        entry_key = compile_cache.key(compile_cache.module_bytes(module), options.SerializeAsString(), b)
        loaded = compile_cache.load(cache_dir, name, entry_key, b, options)
        if loaded is not None:
            monitoring.record_event(monitoring.CACHE_HIT_EVENT)
            monitoring.record_event_duration_secs(monitoring.CACHE_RETRIEVAL_EVENT, time.monotonic() - start)
            return loaded
    try:
        extra = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
        loaded = b.client.compile_and_load(module, b.device_list, options, **extra)
    except JaxRuntimeError as e:
        raise XlaCompileError(f"XLA failed to compile '{name}': {e}") from None
    compile_cache.stats["compiles"] += 1
    if entry_key is not None:
        monitoring.record_event(monitoring.CACHE_MISS_EVENT)
        compile_cache.store(cache_dir, name, entry_key, b, loaded)
    return loaded


class Executable:
    """A compiled program for one device: call it on Arrays (or host values), get Arrays."""

    def __init__(self, loaded, name: str, out_avals: list[Aval]):
        self.loaded = loaded
        self.name = name
        self.out_avals = out_avals
        sharding = backend().sharding
        self._execute = loaded.execute_sharded
        # Attach our avals to the results; _skip_checks avoids a jax-only validation (notes §9).
        self.result_handlers = [_jax.array_result_handler(device_aval(a), sharding, True, _skip_checks=True)
                                for a in out_avals]
        # Results that carry no data (float0) go back as host zeros, as in JAX.
        self.dataless_outputs = [i for i, a in enumerate(out_avals) if carries_no_data(a.dtype)]
        self.host_callbacks = ()          # kept alive as long as the executable
        self.runtime_token = False
        self.effectful = False            # runs through execute_effectful

    def calls_host(self, host_callbacks, runtime_token: bool) -> None:
        """The program calls Python functions (and, with ``runtime_token``, has ordered effects)."""
        self.host_callbacks = tuple(host_callbacks)
        self.runtime_token = runtime_token
        self.effectful = True
        if runtime_token:
            self.result_handlers = [_jax.array_result_handler(device_aval(_TOKEN_AVAL), backend().sharding, True,
                                                              _skip_checks=True)] + self.result_handlers

    def __call__(self, *args) -> list[Array]:
        return self.execute([a._buf if type(a) is Array else device_put(a)._buf for a in args])

    def execute(self, buffers: list) -> list[Array]:
        """Run on device buffers (``Array._buf``); the fast path used by jit and eager dispatch."""
        if self.effectful:
            return self.wrap_results(self.execute_effectful(buffers))
        try:
            outs = self._execute(buffers).consume_with_handlers(self.result_handlers)
        except JaxRuntimeError as e:
            raise self.runtime_error(e, buffers) from None
        return self.wrap_results(outs)

    def execute_effectful(self, buffers: list) -> list:
        """Run a program calling host callbacks: after the previous ordered execution when it has
        ordered effects, and waited for, so that its callbacks' output and errors come at this
        call. Returns the handled results (without the runtime token)."""
        if self.runtime_token:
            buffers = [effects.ordered_token(_initial_token)] + list(buffers)
        try:
            outs = effects.wait_for(self._execute(buffers, with_tokens=True), self.result_handlers,
                                    _hand_on_ordered_token if self.runtime_token else None)
        except JaxRuntimeError as e:
            if self.runtime_token:        # a failed run's token may carry its error: start afresh
                effects.set_ordered_token(None)
            error = self.runtime_error(e, buffers)
            raise error from error.__cause__     # the callback's own exception, if it raised one
        return outs

    def wrap_results(self, outs) -> list:
        """Arrays for the handled results of one run (host zeros where they carry no data)."""
        results = list(map(Array, outs))
        for i in self.dataless_outputs:
            results[i] = host_value_without_data(self.out_avals[i])
        return results

    def runtime_error(self, e: Exception, buffers=()) -> Exception:
        """The error to raise for a failed run on ``buffers``: a deleted argument is named (it is
        looked for only after a failure, so successful calls pay nothing for it)."""
        for i, b in enumerate(buffers):
            if b.is_deleted():
                return deleted_error(b.aval.shape, b.aval.dtype, f"It is argument {i} of '{self.name}'.")
        return (self.effectful and callback_error(self.name)) or XlaRuntimeError(
            f"XLA failed to run '{self.name}': {_explain(e)}")

    def as_text(self) -> str:
        """XLA's optimized HLO."""
        return self.loaded.hlo_modules()[0].to_string()

    def memory_analysis(self):
        """Compiled memory statistics (argument/output/temp sizes in bytes)."""
        return self.loaded.get_compiled_memory_stats()

    def cost_analysis(self) -> dict:
        return self.loaded.cost_analysis()

    def __repr__(self):
        return f"Executable({self.name!r}, outputs={self.out_avals})"


def callback_error(name: str) -> XlaRuntimeError | None:
    """The error for a failed run of ``name`` whose host callback raised, with the callback's own
    exception as its cause; None when no callback raised."""
    cause = effects.take_callback_error()
    if cause is None:
        return None
    error = XlaRuntimeError(f"A host callback of '{name}' raised {type(cause).__name__}: {cause}")
    error.__cause__ = cause
    return error


def _hand_on_ordered_token(outs: list) -> list:
    """An ordered program's first result is its token: the next ordered run starts from it."""
    effects.set_ordered_token(outs[0])
    return outs[1:]


_TOKEN_AVAL = Aval.get((0,), np.bool_)


def _initial_token():
    return device_put(np.zeros(0, np.bool_))._buf


def _explain(e: Exception) -> str:
    msg = str(e)
    if "has been deleted" in msg or "Expected args to execute_sharded" in msg:
        msg += (" (an argument's buffer was deleted: it was donated to an earlier call with "
                "donate_argnums, or freed with .delete())")
    return msg
