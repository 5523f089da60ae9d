"""shard_map's ``check_vma``: values in its body are typed with the manual mesh axes they may vary
over (``ShapedArray.vma``, printed ``f32[4]{V:x}``), as JAX 0.10 types them.

An argument varies over the axes its in_spec splits it over; a constant or a fresh array over
none. Most primitives' results vary over what their operands do (``Primitive.with_vma``'s default);
``psum pmax pmin`` remove their axes; the collectives that leave each device a different value
(``all_gather ppermute psum_scatter all_to_all``) and ``axis_index`` first make an invariant
operand varying with ``pvary`` (``lax.pcast(to="varying")``), as JAX's builders do. Bodies of
calls, branches and loops are traced with these types, so a loop whose carry starts invariant and
comes out varying, or branches that disagree, are refused with JAX's errors (loops.py,
conditionals.py). Axes of size 1 are typed too, as JAX 0.10.2 types them.

This module holds the typing context of the body being traced (which manual axes are typed) and
the checks with JAX's words; the collectives' rules live with them in parallel.py.
"""
from __future__ import annotations

import threading

__all__ = ["typed_axes", "typing_axes", "axes_state", "check_out_specs"]

_ENV = threading.local()


def typed_axes() -> frozenset:
    """The manual axes values are typed over in the shard_map body being traced (none outside one
    or under ``check_vma=False``)."""
    return getattr(_ENV, "axes", frozenset())


class typing_axes:
    """Trace with ``axes`` as the typed manual axes (a context manager)."""

    def __init__(self, axes):
        self.axes = frozenset(axes)

    def __enter__(self):
        self.saved = typed_axes()
        _ENV.axes = self.axes

    def __exit__(self, *exc):
        _ENV.axes = self.saved


def _jax_type(aval) -> str:
    from jaxprc.ir.sharding_type import jax_type_text
    return jax_type_text(aval)


def axes_state(aval, axes: tuple, fn: str) -> str:
    """'varying' or 'invarying': how ``aval`` relates to all of ``axes`` (JAX's ValueError when
    it varies over some of them and not the others)."""
    states = {"varying" if a in aval.vma else "invarying" for a in axes}
    if len(states) > 1:
        raise ValueError(f"{fn} can only accept axis_name which corresponds to one of varying, unreduced, "
                         f"reduced or invarying state of the input. Got input type: {_jax_type(aval)}, axes: "
                         f"{tuple(axes)} and input state: {{{', '.join(map(repr, sorted(states)))}}}")
    return states.pop() if states else "invarying"


def check_out_specs(fun, mesh, out_avals, out_specs, out_paths) -> None:
    """Raise JAX's error when an out_spec leaves out an axis its result's type varies over."""
    names = mesh.axis_names
    msgs = []
    for path, spec, aval in zip(out_paths, out_specs, out_avals):
        mentioned = {a for axes in spec for a in axes}
        unmentioned = [n for n in names if n not in mentioned]
        diff = [n for n in unmentioned if n in aval.vma]
        if not diff:
            continue
        if len(unmentioned) > 1:
            need = ",".join(n for n in names if n in mentioned)
            got = ",".join(n for n in names if n in aval.vma)
            msgs.append(f"out_specs{path} is {_spec_repr(spec)} which implies that the corresponding output value "
                        f"is only varying across mesh axes {{{need}}} and not {{{','.join(diff)}}}, but it was "
                        f"inferred to be possibly varying over {{{got}}}")
        else:
            msgs.append(f"out_specs{path} is {_spec_repr(spec)} which implies that the corresponding output value "
                        f"is replicated across mesh axis '{unmentioned[0]}', but could not infer replication over "
                        "any axes")
    if msgs:
        if len(msgs) > 1:
            msgs = ["* " + m for m in msgs]
        raise ValueError(
            f"shard_map applied to the function '{getattr(fun, '__name__', fun)}' was given out_specs which "
            f"require replication which can't be statically inferred given the mesh:\n\nThe mesh given has "
            f"shape {tuple(mesh.axis_sizes)} with corresponding axis names {tuple(names)}.\n\n"
            + "\n\n".join(msgs) + "\n\nCheck if these output values are meant to be replicated over those "
            "mesh axes. If not, consider revising the corresponding out_specs entries. If so, consider "
            "disabling the check by passing the check_vma=False argument to `jaxprc.shard_map`.")


def _spec_repr(dims) -> str:
    """The spec as JAX's error writes the user's: ``P('x',)``, ``P()`` (trailing Nones left out)."""
    from jaxprc.ir.sharding_type import spec_of
    dims = list(dims)
    while dims and not dims[-1]:
        dims.pop()
    return repr(spec_of(dims))
