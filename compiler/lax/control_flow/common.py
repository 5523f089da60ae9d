"""What cond, the loops, calls and custom nodes share: typing of sub-programs, tracing of
Python functions into sub-jaxprs, and small helpers of their transformation rules.

Sub-programs are ClosedJaxprs *without* consts: whatever a body closed over is
hoisted into leading operands (``num_consts``, ``cond_nconsts``,
``body_nconsts``), so outer values flow as data and passes see them.

Weak types. As in JAX (``core.typematch``/``typecompat``), every comparison is
on shape and dtype only: an operand may be weakly typed where the sub-jaxpr's
binder is strong and vice versa, branch signatures may differ in weak bits, and
a loop body may return a carry whose weak bit differs from its input carry's.
Results take their weak bits from the sub-jaxpr: ``cond`` from branch 0,
``while`` from the body's outputs, ``scan`` from the body's carry and ``ys``
outputs, calls from the callee's outputs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jaxprc import lax
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import ClosedJaxpr, Jaxpr, JaxprTypeError, ShapedArray, Var
from jaxprc.ir.sharding_type import jax_type_text
from jaxprc.ir.tracing import Tracer, get_aval, is_scalar_constant, trace_to_jaxpr
from jaxprc.engine.dispatch import put_on_device
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.jvp import Zero, instantiate_zeros, tangent_aval
from jaxprc.passes.transpose import is_undefined_primal

__all__: list[str] = []


# ------------------------------------------------------------------ typing

def fmt_types(avals) -> str:
    return ", ".join(a.str_short() for a in avals)


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype; weak types are ignored (JAX's ``core.typematch``)."""
    return a.shape == b.shape and a.dtype == b.dtype


# ------------------------------------------------------- JAX's error words
# The builders' mistakes (a branch or carry of the wrong type or structure) are reported in JAX's
# words: users search for them, and JAX's own tests match them.

def jax_type(a: ShapedArray) -> str:
    """A type as JAX's messages print it: ``float32[2,3]``, ``float32[8@x,4]``, ``float32[4]{V:x}``
    (no weak-type mark)."""
    return jax_type_text(a)


def same_type(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype (weak types aside), and equal shardings in type: what branches'
    results and a loop's carry must agree on (the manual axes they vary over are checked apart)."""
    return typematch(a, b) and a.sharding_in_type == b.sharding_in_type


VMA_HINT_URL = "See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for more information.\n"


def vma_hints(hints: Sequence[str]) -> str:
    """JAX's advice after manual-axis type mismatches: one sentence, or a bulleted list."""
    if len(hints) == 1:
        return f"This might be fixed by {hints[0]}.\n{VMA_HINT_URL}"
    return ("This might be fixed by:\n" + "".join(f"  * {h};\n" for h in hints[:-1])
            + f"  * {hints[-1]}.\n{VMA_HINT_URL}")


def mismatch_extra(a: ShapedArray, b: ShapedArray) -> str:
    """``, so the dtypes do not match`` and the like, after two types that differ."""
    why = [w for w, differs in (("the dtypes do not match", a.dtype != b.dtype),
                                ("the shapes do not match", a.shape != b.shape)) if differs]
    if not why and a.vma != b.vma:
        why = ["the manual axis types do not match"]
    return ", so " + ", and ".join(why) if why else ""


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def differences(diffs: Sequence[str], capital: bool = True) -> str:
    """One difference as a sentence, several as a bulleted list (JAX's layout)."""
    if len(diffs) == 1:
        return f"{capitalize(diffs[0]) if capital else diffs[0]}.\n"
    return "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"


def joined_vma(avals: Sequence[ShapedArray], *others: Sequence[ShapedArray], extra=frozenset()) -> list:
    """``avals`` each typed as varying over what it or its counterparts in ``others`` vary over,
    and over ``extra``: a loop's results vary where its initial or final carry does, a cond's
    where any branch's result or its predicate does."""
    vmas = [frozenset(extra).union(a.vma, *(o[i].vma for o in others)) for i, a in enumerate(avals)]
    return [a if a.vma == v else a.update(vma=v) for a, v in zip(avals, vmas)]


def _all_match(expected: Sequence[ShapedArray], got: Sequence[ShapedArray]) -> bool:
    return len(expected) == len(got) and all(map(typematch, expected, got))


def check_operand_types(prim: str, what: str, expected: Sequence[ShapedArray],
                        got: Sequence[ShapedArray]) -> None:
    """Raise naming the primitive and both type lists unless ``got`` matches ``expected``."""
    if not _all_match(expected, got):
        raise JaxprTypeError(
            f"{prim}: {what} expected types ({fmt_types(expected)}) "
            f"but got ({fmt_types(got)})")


def check_subjaxpr(prim: str, param: str, cj) -> ClosedJaxpr:
    """A sub-program param must be a ClosedJaxpr whose consts were hoisted into operands."""
    if not isinstance(cj, ClosedJaxpr):
        raise JaxprTypeError(f"{prim}: param {param} must be a ClosedJaxpr, got {type(cj).__name__}")
    if cj.consts:
        raise JaxprTypeError(
            f"{prim}: param {param} must be a ClosedJaxpr without consts (consts are passed as "
            f"leading operands), got one with {len(cj.consts)} consts")
    return cj


def check_count(prim: str, name: str, value, bound: int) -> None:
    if type(value) is not int or not 0 <= value <= bound:
        raise JaxprTypeError(f"{prim}: param {name} must be an int in [0, {bound}] "
                             f"(the number of operands), got {value!r}")


# ------------------------------------------------------------------ pytrees

def _leaf_aval(x, what: str, path) -> ShapedArray:
    try:
        return get_aval(x)
    except TypeError:
        raise TypeError(
            f"{what}{tu.keystr(path)} is a {type(x).__name__} ({x!r:.60}), not an array: every "
            "leaf of a control-flow operand or result must be an array or a scalar. Close over "
            "other Python values (capture them in the function) instead of passing them.") from None


def _flatten(tree, what: str):
    """Leaves, treedef, avals and key paths of a pytree of arrays."""
    keyed, treedef = tu.tree_flatten_with_path(tree)
    paths = [p for p, _ in keyed]
    leaves = [x for _, x in keyed]
    return leaves, treedef, [_leaf_aval(x, what, p) for p, x in keyed], paths


def _trace(fun: Callable[[Any], Any], in_tree, in_avals: Sequence[ShapedArray], what: str):
    """Trace ``fun(pytree) -> pytree``; returns (ClosedJaxpr with consts, output treedef)."""
    box = {}

    def flat_fun(*args):
        out = fun(tu.tree_unflatten(in_tree, args))
        leaves, box["tree"], _, _ = _flatten(out, f"{what} output")
        return leaves

    return trace_to_jaxpr(flat_fun, in_avals, name=what), box["tree"]


def _fun_name(fun) -> str:
    """``name at file:line`` of a Python function, for error messages."""
    name, code = getattr(fun, "__name__", repr(fun)), getattr(fun, "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name


def _convert(x, dtype):
    """``x`` as a strong ``dtype``: numpy for Python/numpy values, the primitive otherwise."""
    if is_scalar_constant(x) or type(x) is np.ndarray:
        return np.asarray(x, dtype)[()] if np.ndim(x) == 0 else np.asarray(x, dtype)
    return lax.convert_element_type_p.bind(x, new_dtype=np.dtype(dtype), weak_type=False)


# -------------------------------------------------------- rule helpers

def _nonzero_tangents(tangents, nonzeros):
    return [instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz]


def _split_outs(outs, n, out_nz, out_avals):
    primals, rest = list(outs[:n]), iter(outs[n:])
    return primals, [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(out_nz, out_avals)]


def _transpose_call_outputs(outs, linear_args, nonzeros):
    outs = iter(outs)
    nz = iter(nonzeros)
    result = []
    for a in linear_args:
        if not is_undefined_primal(a):
            result.append(None)
        else:
            result.append(next(outs) if next(nz) else Zero(a.aval))
    return result


def _front_dims(batched) -> list:
    """Batch dims of values that are batched at axis 0 or not at all."""
    return [0 if b else None for b in batched]


def _pick(xs, mask, keep=True):
    return [x for x, m in zip(xs, mask) if bool(m) == keep]


def _new_vars(avals):
    return [Var(a) for a in avals]


# ---------------------------------------------------------- forwarding
# As in JAX, the control-flow APIs do not make a primitive result of what a branch or loop body
# returns unchanged from its inputs: they return that input itself. So it keeps its batching
# (an unbatched value forwarded by a cond with a batched predicate stays unbatched under vmap),
# its weak type, and the loop does not carry it.

def forwarded_inputs(jaxpr: Jaxpr) -> list:
    """For each output of ``jaxpr``, the index of the input it returns unchanged, else None."""
    where = {v: i for i, v in enumerate(jaxpr.invars)}
    return [where.get(v) if type(v) is Var else None for v in jaxpr.outvars]


def keep_outputs(cj: ClosedJaxpr, keep: Sequence[bool]) -> ClosedJaxpr:
    """``cj`` without the outputs not in ``keep`` (its inputs all stay)."""
    return cj if all(keep) else dce_closed(cj, keep, keep_inputs=True)[0]


def inputs_to_front(cj: ClosedJaxpr, mask: Sequence[bool]) -> ClosedJaxpr:
    """``cj`` with the inputs in ``mask`` moved before the others (order kept within each)."""
    j = cj.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, _pick(j.invars, mask) + _pick(j.invars, mask, keep=False),
                             j.outvars, j.eqns), cj.consts)


def merge(mask: Sequence[bool], falses, trues) -> list:
    """Interleave: ``trues`` where ``mask`` is set, ``falses`` elsewhere (JAX's merge_lists)."""
    falses, trues = iter(falses), iter(trues)
    return [next(trues) if m else next(falses) for m in mask]


def as_array(x):
    """A forwarded input as JAX's ``lax.asarray`` returns it: tracers and Arrays as they are,
    host values put on the device."""
    return put_on_device(x)


# ---------------------------------------------------------- jet (Taylor series)
def _flat_series(series) -> list:
    return [t for s in series for t in s]


def _series_chunks(flat, order: int, n: int) -> list:
    """``n`` series of ``order`` terms from a flat list."""
    return [list(flat[i * order:(i + 1) * order]) for i in range(n)]
