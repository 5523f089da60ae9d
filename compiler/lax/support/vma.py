"""shard_map's ``check_vma``: which manual mesh axes each value of the body may vary over.

JAX types every value in a shard_map body with its varying manual axes (vma)
and rejects out_specs that claim a result is replicated over an axis it may
vary over. jaxprc infers the same sets from the traced body, structurally as
JAX does: an argument varies over the axes its in_spec splits it over, a
constant over none, ``axis_index(a)`` over ``a``; ``psum pmax pmin`` make
their result the same along their axes, ``all_gather ppermute psum_scatter
all_to_all ragged_all_to_all pvary`` (``lax.pcast(to="varying")``) make it vary (JAX types an all_gather's result as varying too);
any other equation varies over what its operands vary over. Bodies are followed: a call's (jit), each branch of a
cond (the result varies where any branch's does), a loop's body until its carry
stops changing. Other equations holding bodies count as varying over nothing,
so the check never rejects what JAX accepts there; axes of size 1 are ignored
(JAX drops them from types).
"""
from __future__ import annotations

from jaxprc.ir.core import Literal, subjaxprs

__all__ = ["check_out_specs"]

_SAME_ALONG = {"psum", "pmax", "pmin"}
_VARY_ALONG = {"all_gather", "ppermute", "psum_scatter", "all_to_all", "pvary", "ragged_all_to_all"}


def _body_vma(jaxpr, in_vma: list) -> list:
    """The vma of ``jaxpr``'s outputs given its inputs' (frozensets of axis names)."""
    env = dict(zip(jaxpr.invars, in_vma))
    for v in jaxpr.constvars:
        env[v] = frozenset()
    read = lambda x: frozenset() if isinstance(x, Literal) else env.get(x, frozenset())   # noqa: E731
    for eqn in jaxpr.eqns:
        ins = [read(x) for x in eqn.invars]
        union = frozenset().union(*ins)
        name = eqn.primitive.name
        subs = list(subjaxprs(eqn))
        if name == "axis_index":
            outs = [frozenset({eqn.params["axis_name"]})]
        elif name in _SAME_ALONG:
            outs = [union - frozenset(eqn.params["axes"])]
        elif name in _VARY_ALONG:
            outs = [union | frozenset(eqn.params["axes"])]
        elif not subs:
            outs = [union] * len(eqn.outvars)
        elif name == "cond":
            per_branch = [_body_vma(b.jaxpr, ins[1:]) for b in eqn.params["branches"]]
            outs = [frozenset().union(*vs) for vs in zip(*per_branch)]
        elif name == "scan":
            p = eqn.params
            nc, nk = p["num_consts"], p["num_carry"]
            outs = _loop_vma(p["jaxpr"].jaxpr, ins[:nc], ins[nc:nc + nk], ins[nc + nk:])
        elif name == "while":
            p = eqn.params
            skip = p["cond_nconsts"]
            nb = p["body_nconsts"]
            outs = _loop_vma(p["body_jaxpr"].jaxpr, ins[skip:skip + nb], ins[skip + nb:], [])
        elif (name != "shard_map" and len(subs) == 1 and len(subs[0].jaxpr.invars) == len(eqn.invars)
              and len(subs[0].jaxpr.outvars) == len(eqn.outvars)):     # a call: follow it
            outs = _body_vma(subs[0].jaxpr, ins)
        else:
            outs = [frozenset()] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs))
    return [read(x) for x in jaxpr.outvars]


def _loop_vma(body, consts, carry, xs) -> list:
    """A loop's results: its carry grown until the body keeps it, then the body's other results."""
    while True:
        outs = _body_vma(body, list(consts) + list(carry) + list(xs))
        grown = [c | o for c, o in zip(carry, outs)]
        if grown == list(carry):
            return grown + outs[len(carry):]
        carry = grown


def check_out_specs(fun, mesh, jaxpr, in_specs, out_specs, manual, out_paths) -> None:
    """Raise JAX's error when an out_spec leaves out an axis its result may vary over."""
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    real = {a for a in manual if sizes[a] > 1}
    in_vma = [frozenset(a for axes in spec for a in axes if a in real) for spec in in_specs]
    msgs = []
    for path, spec, vma in zip(out_paths, out_specs, _body_vma(jaxpr, in_vma)):
        mentioned = {a for axes in spec for a in axes}
        vma = vma & real
        missing = [a for a in mesh.axis_names if a in vma and a not in mentioned]
        if missing:
            msgs.append(f"out_specs{path} is {_spec_repr(spec)} which implies that the corresponding output "
                        f"value is replicated across mesh axes {missing}, but it was inferred to be possibly "
                        f"varying over {[a for a in mesh.axis_names if a in vma]}")
    if msgs:
        raise ValueError(
            f"shard_map applied to the function '{getattr(fun, '__name__', fun)}' was given out_specs which "
            f"require replication which can't be statically inferred given the mesh:\n\nThe mesh given has "
            f"shape {tuple(mesh.axis_sizes)} with corresponding axis names {tuple(mesh.axis_names)}.\n\n"
            + "\n\n".join(msgs) + "\n\nCheck if these output values are meant to be replicated over those "
            "mesh axes. If not, consider revising the corresponding out_specs entries. If so, consider "
            "disabling the check by passing the check_vma=False argument to `jaxprc.shard_map`.")


def _spec_repr(dims) -> str:
    entries = [None if not a else a[0] if len(a) == 1 else a for a in dims]
    while entries and entries[-1] is None:
        entries.pop()
    return f"P({', '.join(map(repr, entries))})"
