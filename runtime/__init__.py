"""jaxprc.runtime: PJRT clients and devices, device arrays, transfers, executables.

Imports only jaxlib and numpy. Never calls the jaxlib functions that import
jax when it is installed (some of jaxlib's Python helpers do).
"""
from .client import backend, default_backend, devices
from .array import Array, Aval, DeletedArrayError, Token, carries_no_data, deleted_error, device_put, to_buffer, to_numpy
from .effects import effects_barrier
from . import cpp_jit, dlpack
from .executable import Executable, JaxRuntimeError, XlaCompileError, XlaError, XlaRuntimeError, compile

__all__ = ["Array", "Aval", "DeletedArrayError", "Executable", "JaxRuntimeError", "XlaCompileError", "XlaError",
           "XlaRuntimeError", "backend", "carries_no_data", "compile", "default_backend", "deleted_error", "device_put", "devices",
           "effects_barrier", "to_buffer", "to_numpy", "Token"]
