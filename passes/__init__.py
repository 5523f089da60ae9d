"""jaxprc.passes: IR-to-IR transformations and their per-primitive rules.

Importing the package registers every pass for pipelines (``run_pipeline``).
"""
from .registry import (PASSES, count_equations, PassError, PassVerificationError, PipelineError, UnknownPassError,  # noqa: F401
                       get_pass, parse_pipeline, register_pass, run_pipeline, verify_pass_result)
from .jvp import Zero, instantiate_zeros, jvp_jaxpr, jvp_rules  # noqa: F401
from .partial_eval import linearize_jaxpr, partial_eval_jaxpr, pe_rules  # noqa: F401
from .transpose import UndefinedPrimal, backward_pass, is_undefined_primal, transpose_jaxpr, transpose_rules  # noqa: F401
from .dce import dce, dce_jaxpr, dce_rules  # noqa: F401
from .cse import cse  # noqa: F401
from .inline import inline  # noqa: F401
from .specialize import is_polymorphic, specialize, specialize_for_args  # noqa: F401
from . import vmap  # noqa: F401  (registers the vmap pass)
from .jet import jet_jaxpr, jet_rules  # noqa: F401  (registers the jet pass)
from .patterns import Pat, PatternError, Splat, bind, pattern, register_pattern  # noqa: F401
from .canonicalize import canonicalize  # noqa: F401
