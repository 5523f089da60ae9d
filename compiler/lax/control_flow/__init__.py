"""Control flow: ``cond``/``switch`` (conditionals.py) and ``while_loop``/``fori_loop``/``scan``/``map``
(loops.py), with the ``cond``, ``while`` and ``scan`` primitives and all their rules.

Each primitive holds sub-programs as ClosedJaxprs without consts (what a body
closed over is hoisted into leading operands); common.py has their shared
typing and tracing helpers.
"""
from .conditionals import *  # noqa: F401,F403
from .loops import *  # noqa: F401,F403
from .solves import *  # noqa: F401,F403
from . import conditionals, loops, solves

__all__ = [*conditionals.__all__, *loops.__all__, *solves.__all__]
