"""Transposition of linear jaxprs: cotangents of the outputs -> cotangents of the linear inputs.

Inputs are either linear (``UndefinedPrimal(aval)``: the value is what we
solve for) or known (residuals, passed as values). Equations whose inputs
are all known are evaluated forward; the rest are walked backwards, each by
``transpose_rules[prim](ct, *invals, **params) -> list of input cotangents``
(``ct`` a list for multiple results; ``None`` or ``Zero`` for inputs that get
nothing). Cotangents reaching the same variable are added; ``Zero``
cotangents stay symbolic and are only materialised in the results.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxprc.ir import lax
from jaxprc.ir.core import PRIMITIVES, ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxprc.ir.prims.structural import ScatterDimensionNumbers
from jaxprc.ir.tracing import source_info_of, trace_to_jaxpr

from .jvp import Zero, add_tangents, aval_of, instantiate_zeros, literal_value, scatter_window_gather, zeros
from .registry import register_pass


class UndefinedPrimal:
    """A linear input of a transpose rule: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return isinstance(x, UndefinedPrimal)


transpose_rules: dict = {}


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], cts_out: Sequence[Any]):
    """Cotangents of ``jaxpr``'s linear inputs (those given as ``UndefinedPrimal``), in the
    current trace. ``cts_out`` may hold ``Zero``s; results may be ``Zero``."""
    primal_env: dict[Var, Any] = {}
    linear: set[Var] = set()
    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, x in zip(jaxpr.invars, args):
        if is_undefined_primal(x):
            linear.add(v)
        else:
            primal_env[v] = x

    def read_primal(a):
        if isinstance(a, Literal):
            return literal_value(a)
        return UndefinedPrimal(a.aval) if a in linear else primal_env[a]

    linear_eqns = []
    for eqn in jaxpr.eqns:          # forward: evaluate what does not depend on linear inputs
        if any(isinstance(a, Var) and a in linear for a in eqn.invars):
            linear.update(eqn.outvars)
            linear_eqns.append(eqn)
            continue
        with source_info_of(eqn.source_info):
            outs = eqn.primitive.bind(*[a if isinstance(a, Literal) else primal_env[a] for a in eqn.invars],
                                      **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
            primal_env[v] = o

    ct_env: dict[Var, Any] = {}

    def add_ct(v, ct):
        if isinstance(v, Var) and v in linear and ct is not None and not isinstance(ct, Zero):
            ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        cts = [Zero(v.aval) if ct is None else ct for v, ct in zip(eqn.outvars, cts)]
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"Transpose rule for '{eqn.primitive.name}' not implemented (transpose pass): it is "
                "not linear in its inputs, or its rule is missing, so reverse-mode differentiation "
                "through it is unavailable.")
        ct_arg = cts if eqn.primitive.multiple_results else cts[0]
        with source_info_of(eqn.source_info):    # the transposed ops keep the user's line
            cts_in = rule(ct_arg, *map(read_primal, eqn.invars), **eqn.params)
            for a, ct in zip(eqn.invars, cts_in):
                add_ct(a, ct)
    return [ct_env.get(v, Zero(v.aval)) if is_undefined_primal(x) else None
            for v, x in zip(jaxpr.invars, args)]


def transpose_jaxpr(cj: ClosedJaxpr, linear: Sequence[bool],
                    instantiate: Sequence[bool] | bool = True,
                    values: Sequence[Any] | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """The transpose of ``cj`` with respect to its ``linear`` inputs.

    The result takes (the non-linear inputs, then a cotangent per output) and returns a
    cotangent per linear input: materialised where ``instantiate``, else only those that are
    nonzero. Returns it and the nonzero mask over the linear inputs. ``values``, when given,
    are the concrete inputs of the result: a custom_vjp ``bwd`` then runs on concrete values
    (the user's Python sees numbers) and its results enter the program as constants.
    """
    in_avals = cj.in_avals
    lin_avals = [a for a, lin in zip(in_avals, linear) if lin]
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(lin_avals)
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    nonzeros: list[bool] = []

    def fun(*args):
        nonlin, cts = iter(args[:len(nonlin_avals)]), args[len(nonlin_avals):]
        primals = [UndefinedPrimal(a) if lin else next(nonlin) for a, lin in zip(in_avals, linear)]
        cts_in = backward_pass(cj.jaxpr, cj.consts, primals, cts)
        cts_in = [ct for ct, lin in zip(cts_in, linear) if lin]
        cts_in = [instantiate_zeros(ct) if inst else ct for ct, inst in zip(cts_in, instantiate)]
        nonzeros[:] = [not isinstance(ct, Zero) for ct in cts_in]
        return [ct for ct in cts_in if not isinstance(ct, Zero)]

    out = trace_to_jaxpr(fun, nonlin_avals + list(cj.out_avals), name="transpose", concrete_args=values)
    return out, nonzeros


def transpose(cj: ClosedJaxpr) -> ClosedJaxpr:
    """The pipeline pass: every input linear; cotangents of the outputs -> of the inputs."""
    return transpose_jaxpr(cj, [True] * len(cj.in_avals))[0]


register_pass("transpose", transpose)


# ------------------------------------------------------------------ rules

def _rule(*names):
    def register(fn):
        for name in names:
            if name in PRIMITIVES:
                prim = PRIMITIVES[name]
                transpose_rules[prim] = (fn if len(names) == 1 else
                                         (lambda p: lambda ct, *a, **kw: fn(p, ct, *a, **kw))(prim))
        return fn
    return register


def _bind(prim_name, *args, **params):
    return PRIMITIVES[prim_name].bind(*args, **params)


def _linear_unary(fn):
    """A rule for ops linear in their first operand: Zero in, Zero out."""
    def rule(ct, x, *rest, **params):
        if isinstance(ct, Zero):
            return [Zero(x.aval)] + [None] * len(rest)
        return [fn(ct, x, *rest, **params)] + [None] * len(rest)
    return rule


@_rule("add")
def _add_t(ct, x, y):
    return [ct if is_undefined_primal(x) else None, ct if is_undefined_primal(y) else None]


@_rule("sub")
def _sub_t(ct, x, y):
    neg = Zero(y.aval) if isinstance(ct, Zero) else lax.neg(ct)
    return [ct if is_undefined_primal(x) else None, neg if is_undefined_primal(y) else None]


@_rule("mul")
def _mul_t(ct, x, y):
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise ValueError("transpose of mul: both operands are linear, so the program is not linear")
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None, Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x):
        return [lax.mul(ct, y), None]
    return [None, lax.mul(x, ct)]


@_rule("div")
def _div_t(ct, x, y):
    if is_undefined_primal(y):
        raise ValueError("transpose of div: the divisor is linear, so the program is not linear")
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.div(ct, y), None]


transpose_rules[PRIMITIVES["neg"]] = _linear_unary(lambda ct, x: lax.neg(ct))
transpose_rules[PRIMITIVES["copy"]] = _linear_unary(lambda ct, x: ct)
transpose_rules[PRIMITIVES["conj"]] = _linear_unary(lambda ct, x: lax.conj(ct))
# real, imag and complex are linear over the reals. As in JAX, a complex cotangent ct pairs with
# a tangent t as Re(ct * t) (no conjugate), so ct of real(z) goes back as ct + 0i, of imag(z) as
# 0 - ct i, and ct of complex(x, y) as (Re ct, -Im ct). Parts are assembled with complex, not by
# multiplying with 1j, which would turn an infinite cotangent into NaN.
transpose_rules[PRIMITIVES["real"]] = _linear_unary(
    lambda ct, x: lax.convert_element_type(ct, x.aval.dtype))
transpose_rules[PRIMITIVES["imag"]] = _linear_unary(
    lambda ct, x: lax.complex(lax.full_like(ct, 0), lax.neg(ct)))


@_rule("complex")
def _complex_t(ct, x, y):
    def part(operand, fn):
        if not is_undefined_primal(operand):
            return None
        return Zero(operand.aval) if isinstance(ct, Zero) else fn(ct)
    return [part(x, lax.real), part(y, lambda c: lax.neg(lax.imag(c)))]


@_rule("convert_element_type")
def _convert_t(ct, x, *, new_dtype, weak_type=False, **_):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    return [lax.convert_element_type(ct, x.aval.dtype)]


@_rule("reduce_sum")
def _reduce_sum_t(ct, x, *, axes):
    shape = x.aval.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.broadcast_in_dim(ct, shape, kept)]


@_rule("broadcast_in_dim")
def _broadcast_in_dim_t(ct, x, *, shape, broadcast_dimensions):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    new_dims = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for k, d in enumerate(broadcast_dimensions) if x.aval.shape[k] == 1 and shape[d] != 1)
    summed = lax.reduce_sum(ct, tuple(sorted(new_dims + expanded)))
    return [lax.reshape(summed, x.aval.shape) if expanded else summed]


@_rule("reshape")
def _reshape_t(ct, x, *, new_sizes, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.reshape(ct, x.aval.shape)]


@_rule("transpose")
def _transpose_t(ct, x, *, permutation):
    inverse = tuple(int(i) for i in np.argsort(permutation))
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.transpose(ct, inverse)]


@_rule("squeeze")
def _squeeze_t(ct, x, *, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.reshape(ct, x.aval.shape)]


@_rule("rev")
def _rev_t(ct, x, *, dimensions):
    return [Zero(x.aval) if isinstance(ct, Zero) else lax.rev(ct, dimensions)]


@_rule("cumsum")
def _cumsum_t(ct, x, *, axis, reverse):
    return [Zero(x.aval) if isinstance(ct, Zero) else _bind("cumsum", ct, axis=axis, reverse=not reverse)]


@_rule("pad")
def _pad_t(ct, x, padval, *, padding_config):
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(padval.aval) if is_undefined_primal(padval) else None]
    lo, hi, interior = zip(*padding_config)
    # undo the edge padding (a negative pad crops), then drop the interior padding with strides
    unpadded = lax.pad(ct, lax.full((), 0, ct.dtype), [(-l, -h, 0) for l, h in zip(lo, hi)])
    ct_x = lax.slice(unpadded, (0,) * len(lo), unpadded.shape, tuple(i + 1 for i in interior))
    ct_pad = None
    if is_undefined_primal(padval):
        all_axes = lambda v: tuple(range(len(v.shape)))
        ct_pad = lax.sub(lax.reduce_sum(ct, all_axes(ct)), lax.reduce_sum(ct_x, all_axes(ct_x)))
    return [ct_x if is_undefined_primal(x) else None, ct_pad]


@_rule("concatenate")
def _concatenate_t(ct, *xs, dimension):
    cts, start = [], 0
    for x in xs:
        size = aval_of(x).shape[dimension]
        if is_undefined_primal(x):
            if isinstance(ct, Zero):
                cts.append(Zero(x.aval))
            else:
                limit = list(ct.shape)
                begin = [0] * len(limit)
                begin[dimension], limit[dimension] = start, start + size
                cts.append(lax.slice(ct, begin, limit))
        else:
            cts.append(None)
        start += size
    return cts


@_rule("slice")
def _slice_t(ct, x, *, start_indices, limit_indices, strides):
    if isinstance(ct, Zero):
        return [Zero(x.aval)]
    shape = x.aval.shape
    strides = strides or (1,) * len(shape)
    real_limits = [s + (n - 1) * st + 1 if n else s for s, n, st in zip(start_indices, ct.shape, strides)]
    config = [(s, d - lim, st - 1) for s, d, lim, st in zip(start_indices, shape, real_limits, strides)]
    return [lax.pad(ct, lax.full((), 0, ct.dtype), config)]


@_rule("dynamic_slice")
def _dynamic_slice_t(ct, x, *idx, slice_sizes):
    if isinstance(ct, Zero):
        return [Zero(x.aval)] + [None] * len(idx)
    return [_bind("dynamic_update_slice", zeros(x.aval), ct, *idx)] + [None] * len(idx)


@_rule("dynamic_update_slice")
def _dynamic_update_slice_t(ct, x, update, *idx):
    u_aval = aval_of(update)
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(u_aval) if is_undefined_primal(update) else None] + [None] * len(idx)
    ct_x = _bind("dynamic_update_slice", ct, zeros(u_aval), *idx) if is_undefined_primal(x) else None
    ct_u = _bind("dynamic_slice", ct, *idx, slice_sizes=u_aval.shape) if is_undefined_primal(update) else None
    return [ct_x, ct_u] + [None] * len(idx)


@_rule("select_n")
def _select_n_t(ct, which, *cases):
    if is_undefined_primal(which):
        raise ValueError("transpose of select_n: the selector must not be linear")
    out = []
    for i, c in enumerate(cases):
        if not is_undefined_primal(c):
            out.append(None)
        elif isinstance(ct, Zero):
            out.append(Zero(c.aval))
        else:
            z = lax.full_like(ct, 0)
            out.append(_bind("select_n", which, *[ct if j == i else z for j in range(len(cases))]))
    return [None] + out


@_rule("dot_general")
def _dot_general_t(ct, x, y, *, dimension_numbers, precision, preferred_element_type):
    if isinstance(ct, Zero):
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise ValueError("transpose of dot_general: both operands are linear")
    (xc, yc), (xb, yb) = dimension_numbers
    if is_undefined_primal(x):
        return [_dot_transpose_lhs(ct, x.aval, y, xc, yc, xb, yb, False, precision), None]
    return [None, _dot_transpose_lhs(ct, y.aval, x, yc, xc, yb, xb, True, precision)]


def _dot_transpose_lhs(ct, x_aval, y, xc, yc, xb, yb, swapped, precision):
    """Cotangent of the lhs ``x`` of ``dot_general(x, y)`` (of the rhs when ``swapped``).

    The output's dims are (batch, x free, y free) (or (batch, y free, x free) when swapped);
    contracting ct's y-free dims against y's free dims gives (batch, x free, x contracted in
    y's order), which a transpose puts back in x's order.
    """
    y_ndim = aval_of(y).ndim
    x_free = [d for d in range(x_aval.ndim) if d not in xc and d not in xb]
    y_free = [d for d in range(y_ndim) if d not in yc and d not in yb]
    nb = len(xb)
    if swapped:
        ct_y_free = list(range(nb, nb + len(y_free)))
    else:
        ct_y_free = list(range(nb + len(x_free), nb + len(x_free) + len(y_free)))
    dims = ((tuple(ct_y_free), tuple(y_free)), (tuple(range(nb)), tuple(yb)))
    out = lax.dot_general(ct, y, dims, precision=precision)
    x_contract_by_y = [xc[i] for i in np.argsort(yc)]
    perm = tuple(int(i) for i in np.argsort(list(xb) + x_free + x_contract_by_y))
    out = lax.transpose(out, perm)
    if out.dtype != x_aval.dtype:
        out = lax.convert_element_type(out, x_aval.dtype)
    return out


@_rule("gather")
def _gather_t(ct, operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
              unique_indices, mode, fill_value):
    if isinstance(ct, Zero):
        return [Zero(operand.aval), None]
    dn = dimension_numbers
    sdn = _scatter_dnums(offset_dims=dn.offset_dims, collapsed=dn.collapsed_slice_dims,
                         index_map=dn.start_index_map, operand_batching=dn.operand_batching_dims,
                         indices_batching=dn.start_indices_batching_dims)
    out = _bind("scatter-add", zeros(operand.aval), indices, ct, dimension_numbers=sdn,
                indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    return [out, None]


def _scatter_dnums(offset_dims, collapsed, index_map, operand_batching, indices_batching):
    return ScatterDimensionNumbers(update_window_dims=offset_dims, inserted_window_dims=collapsed,
                                   scatter_dims_to_operand_dims=index_map,
                                   operand_batching_dims=operand_batching,
                                   scatter_indices_batching_dims=indices_batching)


@_rule("scatter-add")
def _scatter_add_t(ct, operand, indices, updates, **params):
    u_aval = aval_of(updates)
    if isinstance(ct, Zero):
        return [Zero(operand.aval) if is_undefined_primal(operand) else None, None,
                Zero(u_aval) if is_undefined_primal(updates) else None]
    ct_updates = None
    if is_undefined_primal(updates):
        ct_updates = scatter_window_gather(ct, indices, u_aval.shape, **params)
    return [ct if is_undefined_primal(operand) else None, None, ct_updates]


@_rule("scatter-mul")
def _scatter_mul_t(ct, operand, indices, updates, **params):
    """Linear in the operand (a scaling by the scattered products), and in the updates when the
    indices are unique (out = operand * update there), like mul."""
    if is_undefined_primal(operand) and is_undefined_primal(updates):
        raise ValueError("transpose of scatter-mul: operand and updates are both linear, so the "
                         "program is not linear")
    if is_undefined_primal(operand):
        if isinstance(ct, Zero):
            return [Zero(operand.aval), None, None]
        return [_bind("scatter-mul", ct, indices, updates, **params), None, None]
    if not params["unique_indices"]:
        raise NotImplementedError("Transpose rule for 'scatter-mul' with respect to its updates is only "
                                  "implemented with unique_indices=True (transpose pass), as in JAX.")
    if isinstance(ct, Zero):
        return [None, None, Zero(updates.aval)]
    return [None, None, scatter_window_gather(lax.mul(ct, operand), indices, updates.aval.shape, **params)]


@_rule("scatter")
def _scatter_t(ct, operand, indices, updates, **params):
    """Linear only with unique indices (the jvp pass masks duplicates into scatter-adds): the
    operand's cotangent is ct with the overwritten windows zeroed, the updates' those windows."""
    if not params["unique_indices"]:
        raise NotImplementedError("Transpose rule for 'scatter' is only implemented with "
                                  "unique_indices=True (transpose pass), as in JAX.")
    u_aval = aval_of(updates)
    if isinstance(ct, Zero):
        return [Zero(operand.aval) if is_undefined_primal(operand) else None, None,
                Zero(u_aval) if is_undefined_primal(updates) else None]
    ct_operand = ct_updates = None
    if is_undefined_primal(operand):
        ct_operand = _bind("scatter", ct, indices, zeros(u_aval), **params)
    if is_undefined_primal(updates):
        ct_updates = scatter_window_gather(ct, indices, u_aval.shape, **params)
    return [ct_operand, None, ct_updates]
