"""The built-in primitives, grouped by kind; each module defines primitives and their typing rules."""
from .elementwise import *  # noqa: F401,F403
