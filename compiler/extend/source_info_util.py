"""``jaxprc.extend.source_info_util``: where equations come from.

Each equation records the user's ``file:line`` (the innermost frame outside the library files)
and the open ``named_scope`` names. A library registers its own files so that the lines recorded
are its callers'.
"""
from jaxprc.ir.core import SourceInfo  # noqa: F401
from jaxprc.ir.tracing import is_library_file, register_internal_dir, trace_state, user_source_info

from ..toplevel import named_scope
from ..engine.traceback_filtering import api_boundary  # noqa: F401 (a library's entry point)

__all__ = ["SourceInfo", "current", "current_name_stack", "extend_name_stack", "summarize",
           "register_exclusion", "include_frame", "api_boundary"]


def register_exclusion(path: str) -> None:
    """Frames in ``path``'s folder are a library's, never the user's line (jaxprc excludes whole
    folders: the folder holding the file named)."""
    register_internal_dir(path)


def include_frame(frame) -> bool:
    """Whether a traceback frame is the user's (not in jaxprc's or a registered library's files)."""
    return not is_library_file(frame.f_code.co_filename)


def current() -> SourceInfo | None:
    """The source location an equation recorded now would get."""
    return user_source_info()


def summarize(source_info: SourceInfo | None) -> str:
    """``file:line`` of an equation's location."""
    return "unknown" if source_info is None else str(source_info)


def current_name_stack() -> str:
    """The ``named_scope`` names open here, outermost first, joined with '/'."""
    return trace_state.location.scope


def extend_name_stack(name: str):
    """``named_scope(name)``: a context manager, also usable as a decorator."""
    return named_scope(name)


