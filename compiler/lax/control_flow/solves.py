"""Implicit differentiation: ``custom_root`` and ``custom_linear_solve``, with their primitives.

Both nodes run a user's solver (``solve_jaxpr``) and carry, beside it, the
functions their derivatives are defined by, as plain sub-jaxprs (printed,
parsed back, transformed like any other):

- ``custom_root[f_jaxpr, solve_jaxpr, tangent_solve_jaxpr, const_lengths]``
  finds x with f(x) = 0; its tangent follows from the implicit function
  theorem, -(∂f/∂x)⁻¹ (∂f/∂θ · θ̇), computed by the user's ``tangent_solve`` on
  f linearized at the solution. Only f's closed-over values θ have tangents.
- ``custom_linear_solve[matvec_jaxpr, vecmat_jaxpr, solve_jaxpr,
  transpose_solve_jaxpr, const_lengths]`` solves A x = b; it is linear in b,
  its tangent is a second solve with right-hand side ḃ - Ȧ x, and its
  transpose is a solve with the transposed operator (``transpose_solve`` on
  ``vecmat``).

Operands: the values each sub-jaxpr closes over, in the order of the
sub-jaxprs (``const_lengths`` counts them), then the initial guess (root) or
the right-hand side b (linear solve). Results: the solution's leaves, then any
auxiliary outputs of ``solve``, which carry no derivative.
"""
from __future__ import annotations

from typing import Any, Callable

from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir import tree_util as tu
from jaxprc.ir.core import JaxprTypeError, Primitive
from jaxprc.ir.params import ClosedJaxprParam, Int, OneOf, Tuple
from jaxprc.ir.tracing import close_over_consts, eval_jaxpr
from jaxprc.passes.dce import dce_closed
from jaxprc.passes.jvp import Zero, aval_of, instantiate_zeros, is_differentiable, jvp_eval, tangent_aval
from jaxprc.passes.partial_eval import linearize_jaxpr
from jaxprc.passes.transpose import UndefinedPrimal, backward_pass
from jaxprc.passes.vmap import axis_size_of, batch_jaxpr, matchaxis
from jaxprc.engine.traceback_filtering import api_boundary

from .. import elementwise as ew
from .common import _flatten, _fun_name, _trace, check_operand_types, check_subjaxpr, fmt_types

__all__ = ["custom_root", "custom_linear_solve", "custom_root_p", "custom_linear_solve_p"]


# ------------------------------------------------------------------ helpers

def _split(xs, lengths):
    """``xs`` cut into consecutive groups of ``lengths``, then the rest."""
    out, start = [], 0
    for n in lengths:
        out.append(list(xs[start:start + n]))
        start += n
    return out, list(xs[start:])


def _check_lengths(prim: str, const_lengths, n: int, count: int, n_operands: int) -> None:
    if type(const_lengths) is not tuple or len(const_lengths) != n:
        raise JaxprTypeError(f"{prim}: param const_lengths must be a tuple of {n} ints, got {const_lengths!r}")
    if sum(const_lengths) + count != n_operands:
        raise JaxprTypeError(f"{prim}: const_lengths {const_lengths} and {count} solution leaves make "
                             f"{sum(const_lengths) + count} operands, got {n_operands}")


def _check_jaxpr(prim: str, name: str, cj, consts, args, outs) -> None:
    """``cj`` takes ``consts`` then ``args``; its first outputs have the types ``outs``."""
    check_subjaxpr(prim, name, cj)
    check_operand_types(prim, f"{name} inputs (its consts, then the solution's types)",
                        cj.in_avals, list(consts) + list(args))
    check_operand_types(prim, f"{name} outputs (the solution's types)", list(outs),
                        cj.out_avals[:len(outs)])


def _trace_flat(fun: Callable, trees, avals, what: str):
    """Trace ``fun(*pytrees)``; (ClosedJaxpr without consts, its consts, output treedef). What
    the outputs do not need goes (a linearization traces the function's value too)."""
    cj, out_tree = _trace(lambda args: fun(*args), tu.treedef_tuple(trees), avals, what)
    cj, consts = close_over_consts(dce_closed(cj, [True] * len(cj.out_avals), keep_inputs=True)[0])
    return cj, consts, out_tree


def _check_tree(api: str, what: str, name: str, tree, expected, has_aux: bool):
    """The output tree of ``what`` (with aux: the first of a pair) matches ``expected``."""
    if has_aux:
        children = tu.treedef_children(tree)
        if len(children) != 2:
            raise ValueError(f"{api}: {what}() produced a pytree with structure {tree}, but a pair "
                             "(solution, aux) was expected because has_aux was set to True.")
        tree = children[0]
    if tree != expected:
        raise TypeError(f"{api}: {what}() output pytree structure must match {name}, "
                        f"got {tree} and {expected}.")


def _check_types(api: str, what: str, name: str, got, expected) -> None:
    if [(a.shape, a.dtype) for a in got] != [(a.shape, a.dtype) for a in expected]:
        raise TypeError(f"{api}: {what}() output shapes and dtypes must match {name}, got "
                        f"({fmt_types(got)}) and ({fmt_types(expected)})")


# ======================================================== custom_linear_solve

custom_linear_solve_p = Primitive("custom_linear_solve")
custom_linear_solve_p.multiple_results = True
custom_linear_solve_p.def_params(
    matvec_jaxpr=ClosedJaxprParam(), vecmat_jaxpr=OneOf(None, ClosedJaxprParam()),
    solve_jaxpr=ClosedJaxprParam(), transpose_solve_jaxpr=OneOf(None, ClosedJaxprParam()),
    const_lengths=Tuple(Int(min=0), length=4))

_LINEAR_SOLVE_JAXPRS = ("matvec_jaxpr", "vecmat_jaxpr", "solve_jaxpr", "transpose_solve_jaxpr")


@custom_linear_solve_p.def_abstract_eval
def _linear_solve_abstract_eval(*avals, const_lengths, **jaxprs):
    prim = "custom_linear_solve"
    solve = check_subjaxpr(prim, "solve_jaxpr", jaxprs["solve_jaxpr"])
    matvec = check_subjaxpr(prim, "matvec_jaxpr", jaxprs["matvec_jaxpr"])
    n_b = len(matvec.out_avals)
    _check_lengths(prim, const_lengths, 4, n_b, len(avals))
    groups, b = _split(avals, const_lengths)
    for name, consts in zip(_LINEAR_SOLVE_JAXPRS, groups):
        cj = jaxprs[name]
        if cj is None:
            if consts:
                raise JaxprTypeError(f"{prim}: {name} is None but has {len(consts)} consts")
            continue
        _check_jaxpr(prim, name, cj, consts, b, b)
    if jaxprs["vecmat_jaxpr"] is None and jaxprs["transpose_solve_jaxpr"] is not None:
        raise JaxprTypeError(f"{prim}: transpose_solve_jaxpr needs a vecmat_jaxpr")
    vecmat = jaxprs["vecmat_jaxpr"]
    if vecmat is not None and len(vecmat.out_avals) != n_b:
        raise JaxprTypeError(f"{prim}: vecmat_jaxpr must return {n_b} values (b's leaves), "
                             f"got {len(vecmat.out_avals)}")
    return list(b) + list(solve.out_avals[n_b:])     # the solution has b's types (JAX's rule)


@api_boundary
def custom_linear_solve(matvec: Callable, b: Any, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False):
    """``solve(matvec, b)``, differentiated implicitly: the tangent and the transpose are
    further solves with the same operator (JAX's ``lax.custom_linear_solve``).

    ``matvec`` is the linear map A; ``solve(matvec, v)`` must return x with A x = v (and, with
    ``has_aux``, a pair (x, aux)); ``transpose_solve(vecmat, v)`` solves with Aᵀ and is needed
    for reverse mode unless ``symmetric`` (then ``solve`` serves)."""
    api = "custom_linear_solve"
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    leaves, tree, b_avals, _ = _flatten(b, f"{api} b")

    def traced(fun, what: str, aux: bool):
        cj, consts, out_tree = _trace_flat(fun, [tree], b_avals, f"{api} {what} ({_fun_name(fun)})")
        _check_tree(api, what, "b", out_tree, tree, aux)
        _check_types(api, what, "b", cj.out_avals[:len(b_avals)], b_avals)
        return cj, consts, out_tree

    matvec_cj, matvec_consts, _ = traced(matvec, "matvec", False)
    solve_cj, solve_consts, solve_tree = traced(lambda v: solve(matvec, v), "solve", has_aux)
    vecmat_cj = tr_solve_cj = None
    vecmat_consts = tr_solve_consts = []
    if transpose_solve is not None:
        if symmetric:
            vecmat, vecmat_cj, vecmat_consts = matvec, matvec_cj, matvec_consts
        else:
            vecmat = _transpose_one_output(matvec, b)
            vecmat_cj, vecmat_consts, _ = traced(vecmat, "vecmat", False)
        tr_solve_cj, tr_solve_consts, _ = traced(lambda v: transpose_solve(vecmat, v), "transpose_solve",
                                                 has_aux)
    consts = [matvec_consts, vecmat_consts, solve_consts, tr_solve_consts]
    outs = custom_linear_solve_p.bind(
        *[c for group in consts for c in group], *leaves,
        matvec_jaxpr=matvec_cj, vecmat_jaxpr=vecmat_cj, solve_jaxpr=solve_cj,
        transpose_solve_jaxpr=tr_solve_cj, const_lengths=tuple(len(c) for c in consts))
    return tu.tree_unflatten(solve_tree, outs)


def _transpose_one_output(linear_fun: Callable, primals):
    """The transpose of a linear function of one pytree argument, as a function of one pytree
    (JAX's ``linear_transpose``): the transpose pass run over its trace where it is called."""
    leaves, in_tree = tu.tree_flatten(primals)
    avals = [aval_of(x).strip_weak_type() for x in leaves]
    for a in avals:
        if not is_differentiable(a):
            raise TypeError(f"linear_transpose only supports float and complex inputs, got {a.str_short()}")
    cj, out_tree = _trace(linear_fun, in_tree, avals, "linear_transpose")

    def transposed(ct):
        flat_ct, tree = tu.tree_flatten(ct)
        if tree != out_tree:
            raise TypeError(f"linear_transpose: the cotangent must have the output's structure "
                            f"{out_tree}, got {tree}")
        cts = backward_pass(cj.jaxpr, cj.consts, [UndefinedPrimal(a) for a in avals], flat_ct)
        return tu.tree_unflatten(in_tree, [instantiate_zeros(c) for c in cts])
    return transposed


def _linearize(f: Callable, x):
    """``f``'s linear map at ``x``, a function of one pytree (JAX's ``linearize(f, x)[1]``): the
    linearize pass over f's trace; the primal part runs here, once, the linear part at each call."""
    leaves, in_tree = tu.tree_flatten(x)
    cj, out_tree = _trace(f, in_tree, [aval_of(v) for v in leaves], "linearize")
    cj, consts = close_over_consts(cj)
    wrt = [is_differentiable(aval_of(v)) for v in leaves]
    known, lin, out_nz, _ = linearize_jaxpr(cj, [False] * len(consts) + wrt)
    residuals = eval_jaxpr(known.jaxpr, known.consts, *consts, *leaves)[len(cj.out_avals):]

    def f_jvp(t):
        tangents = [v for v, w in zip(tu.tree_leaves(t), wrt) if w]
        outs = iter(eval_jaxpr(lin.jaxpr, lin.consts, *residuals, *tangents))
        return tu.tree_unflatten(out_tree, [next(outs) if nz else instantiate_zeros(Zero(tangent_aval(a)))
                                            for nz, a in zip(out_nz, cj.out_avals)])
    return f_jvp


def _transposed_params(const_lengths, matvec_jaxpr, vecmat_jaxpr, solve_jaxpr, transpose_solve_jaxpr):
    """The params of the transposed system: Aᵀ's matvec is A's vecmat, its solve A's transpose
    solve, and back."""
    mv, vm, s, ts = const_lengths
    return dict(matvec_jaxpr=vecmat_jaxpr, vecmat_jaxpr=matvec_jaxpr, solve_jaxpr=transpose_solve_jaxpr,
                transpose_solve_jaxpr=solve_jaxpr, const_lengths=(vm, mv, ts, s))


def _linear_solve_jvp(primals, tangents, **params):
    """x = A⁻¹ b, so ẋ = A⁻¹ (ḃ - Ȧ x): a second solve. Ȧ x is matvec's tangent with respect to
    its consts at the solution; the other sub-jaxprs' consts carry no derivative."""
    const_lengths, matvec = params["const_lengths"], params["matvec_jaxpr"]
    x_all = custom_linear_solve_p.bind(*primals, **params)
    n_b = len(matvec.out_avals)
    x = x_all[:n_b]
    groups, _ = _split(primals, const_lengths)
    dgroups, b_dot = _split(tangents, const_lengths)
    rhs = list(b_dot)
    if any(not isinstance(t, Zero) for t in dgroups[0]):
        _, a_dot_x = jvp_eval(matvec.jaxpr, matvec.consts, groups[0] + x,
                              dgroups[0] + [Zero(tangent_aval(aval_of(v))) for v in x])
        rhs = [t if isinstance(d, Zero) else ew.neg(d) if isinstance(t, Zero) else ew.sub(t, d)
               for t, d in zip(rhs, a_dot_x)]
    aux_dots = [Zero(tangent_aval(a)) for a in params["solve_jaxpr"].out_avals[n_b:]]
    if all(isinstance(t, Zero) for t in rhs):
        return x_all, [Zero(tangent_aval(aval_of(v))) for v in x] + aux_dots
    x_dot = custom_linear_solve_p.bind(*[c for g in groups for c in g], *map(instantiate_zeros, rhs), **params)
    return x_all, list(x_dot[:n_b]) + aux_dots


def _linear_solve_transpose(cts, *args, **params):
    """bᵀ = A⁻ᵀ xᵀ: a solve of the transposed system. Only b is linear."""
    if params["transpose_solve_jaxpr"] is None:
        raise TypeError("transpose_solve required for backwards mode automatic differentiation of "
                        "custom_linear_solve")
    const_lengths = params["const_lengths"]
    n_consts = sum(const_lengths)
    if any(ad.is_undefined_primal(c) for c in args[:n_consts]):
        raise NotImplementedError("custom_linear_solve: transposition with respect to the values the "
                                  "operator or the solvers close over is not supported (only b is linear)")
    n_b = len(args) - n_consts
    x_cts, aux_cts = cts[:n_b], cts[n_b:]
    if any(not isinstance(ct, Zero) for ct in aux_cts):
        raise NotImplementedError("custom_linear_solve: the auxiliary outputs of solve are not linear "
                                  "in b and take no cotangent")
    b = args[n_consts:]
    if all(isinstance(ct, Zero) for ct in x_cts):
        return [None] * n_consts + [Zero(v.aval) if ad.is_undefined_primal(v) else None for v in b]
    groups, _ = _split(args, const_lengths)
    t = _transposed_params(**params)
    t_groups = [groups[1], groups[0], groups[3], groups[2]]
    b_cts = custom_linear_solve_p.bind(*[c for g in t_groups for c in g], *map(instantiate_zeros, x_cts), **t)
    return [None] * n_consts + [ct if ad.is_undefined_primal(v) else None for v, ct in zip(b, b_cts[:n_b])]


def _linear_solve_batch(args, dims, *, const_lengths, **jaxprs):
    """Every sub-jaxpr is batched with its consts as they come and the solution (and b) batched:
    the solution is then batched whatever batches the solvers, so the four stay consistent."""
    size = axis_size_of(args, dims)
    args = [matchaxis(x, d, 0 if d is not None else None, size) for x, d in zip(args, dims)]
    front = [0 if d is not None else None for d in dims]
    groups, b = _split(args, const_lengths)
    dgroups, _ = _split(front, const_lengths)
    b = [matchaxis(x, f, 0, size) for x, f in zip(b, front[sum(const_lengths):])]
    n_b = len(b)
    batched = {}
    for name, gdims in zip(_LINEAR_SOLVE_JAXPRS, dgroups):
        cj = jaxprs[name]
        batched[name] = None if cj is None else batch_jaxpr(cj, size, gdims + [0] * n_b,
                                                            [True] * len(cj.out_avals))[0]
    outs = custom_linear_solve_p.bind(*[c for g in groups for c in g], *b, const_lengths=const_lengths,
                                      **batched)
    return outs, [0] * len(outs)


def _linear_solve_lowering(ctx, *args, const_lengths, solve_jaxpr, **_):
    groups, b = _split(args, const_lengths)
    return ctx.lower_jaxpr(solve_jaxpr, *groups[2], *b)


ad.primitive_jvps[custom_linear_solve_p] = _linear_solve_jvp
ad.primitive_transposes[custom_linear_solve_p] = _linear_solve_transpose
batching.primitive_batchers[custom_linear_solve_p] = _linear_solve_batch
mlir.register_lowering(custom_linear_solve_p, _linear_solve_lowering)


# ================================================================ custom_root

custom_root_p = Primitive("custom_root")
custom_root_p.multiple_results = True
custom_root_p.def_params(f_jaxpr=ClosedJaxprParam(), solve_jaxpr=ClosedJaxprParam(),
                         tangent_solve_jaxpr=ClosedJaxprParam(), const_lengths=Tuple(Int(min=0), length=3))


@custom_root_p.def_abstract_eval
def _root_abstract_eval(*avals, f_jaxpr, solve_jaxpr, tangent_solve_jaxpr, const_lengths):
    prim = "custom_root"
    f = check_subjaxpr(prim, "f_jaxpr", f_jaxpr)
    n_x = len(f.out_avals)
    _check_lengths(prim, const_lengths, 3, n_x, len(avals))
    (f_consts, solve_consts, ts_consts), guess = _split(avals, const_lengths)
    _check_jaxpr(prim, "f_jaxpr", f, f_consts, guess, guess)
    _check_jaxpr(prim, "solve_jaxpr", solve_jaxpr, solve_consts, guess, guess)
    _check_jaxpr(prim, "tangent_solve_jaxpr", tangent_solve_jaxpr, ts_consts, guess + guess, guess)
    if len(f.out_avals) != n_x or len(tangent_solve_jaxpr.out_avals) != n_x:
        raise JaxprTypeError(f"{prim}: f_jaxpr and tangent_solve_jaxpr must return one value per "
                             f"solution leaf ({n_x})")
    return list(solve_jaxpr.out_avals)


@api_boundary
def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """``solve(f, initial_guess)``, a root of ``f``, differentiated implicitly with respect to
    the values ``f`` closes over (JAX's ``lax.custom_root``): the tangent is
    ``-tangent_solve(g, ∂f/∂θ · θ̇)`` with ``g`` the linearization of ``f`` at the root."""
    api = "custom_root"
    leaves, tree, avals, _ = _flatten(initial_guess, f"{api} initial_guess")

    f_cj, f_consts, f_tree = _trace_flat(f, [tree], avals, f"{api} f ({_fun_name(f)})")
    _check_tree(api, "f", "initial_guess", f_tree, tree, False)
    _check_types(api, "f", "initial_guess", f_cj.out_avals, avals)

    solve_cj, solve_consts, solve_tree = _trace_flat(lambda x: solve(f, x), [tree], avals,
                                                     f"{api} solve ({_fun_name(solve)})")
    _check_tree(api, "solve", "initial_guess", solve_tree, tree, has_aux)
    _check_types(api, "solve", "initial_guess", solve_cj.out_avals[:len(avals)], avals)

    def linearize_and_solve(x, rhs):
        return tangent_solve(_linearize(f, x), rhs)

    ts_cj, ts_consts, ts_tree = _trace_flat(linearize_and_solve, [tree, tree], avals + avals,
                                            f"{api} tangent_solve ({_fun_name(tangent_solve)})")
    _check_tree(api, "tangent_solve", "initial_guess", ts_tree, tree, False)
    _check_types(api, "tangent_solve", "initial_guess", ts_cj.out_avals, avals)

    consts = [f_consts, solve_consts, ts_consts]
    outs = custom_root_p.bind(*[c for g in consts for c in g], *leaves, f_jaxpr=f_cj, solve_jaxpr=solve_cj,
                              tangent_solve_jaxpr=ts_cj, const_lengths=tuple(len(c) for c in consts))
    return tu.tree_unflatten(solve_tree, outs)


def _root_jvp(primals, tangents, *, f_jaxpr, solve_jaxpr, tangent_solve_jaxpr, const_lengths):
    """Implicit function theorem at the root x of f(θ, x) = 0: ẋ = -(∂f/∂x)⁻¹ (∂f/∂θ θ̇), the
    inverse applied by tangent_solve_jaxpr (inlined: its ops are differentiated and transposed
    like any others). Only f's consts θ have tangents; the guess and the solvers' consts none."""
    params = dict(f_jaxpr=f_jaxpr, solve_jaxpr=solve_jaxpr, tangent_solve_jaxpr=tangent_solve_jaxpr,
                  const_lengths=const_lengths)
    sol = custom_root_p.bind(*primals, **params)
    n_x = len(f_jaxpr.out_avals)
    x = sol[:n_x]
    (f_consts, _, ts_consts), _ = _split(primals, const_lengths)
    (f_dots, _, _), _ = _split(tangents, const_lengths)
    zeros = [Zero(tangent_aval(a)) for a in solve_jaxpr.out_avals]
    if all(isinstance(t, Zero) for t in f_dots):
        return sol, zeros
    _, rhs = jvp_eval(f_jaxpr.jaxpr, f_jaxpr.consts, f_consts + x,
                      f_dots + [Zero(tangent_aval(a)) for a in f_jaxpr.out_avals])
    dx = eval_jaxpr(tangent_solve_jaxpr.jaxpr, tangent_solve_jaxpr.consts, *ts_consts, *x,
                    *map(instantiate_zeros, rhs))
    return sol, [ew.neg(t) for t in dx] + zeros[n_x:]


def _root_batch(args, dims, *, f_jaxpr, solve_jaxpr, tangent_solve_jaxpr, const_lengths):
    """The three sub-jaxprs batched with their consts as they come and the solution batched."""
    size = axis_size_of(args, dims)
    front = [0 if d is not None else None for d in dims]
    args = [matchaxis(x, d, f, size) for x, d, f in zip(args, dims, front)]
    groups, guess = _split(args, const_lengths)
    dgroups, _ = _split(front, const_lengths)
    guess = [matchaxis(x, f, 0, size) for x, f in zip(guess, front[sum(const_lengths):])]
    n_x = len(guess)
    jaxprs = {}
    for name, cj, gdims, n_args in [("f_jaxpr", f_jaxpr, dgroups[0], n_x),
                                    ("solve_jaxpr", solve_jaxpr, dgroups[1], n_x),
                                    ("tangent_solve_jaxpr", tangent_solve_jaxpr, dgroups[2], 2 * n_x)]:
        jaxprs[name] = batch_jaxpr(cj, size, gdims + [0] * n_args, [True] * len(cj.out_avals))[0]
    outs = custom_root_p.bind(*[c for g in groups for c in g], *guess, const_lengths=const_lengths, **jaxprs)
    return outs, [0] * len(outs)


def _root_lowering(ctx, *args, solve_jaxpr, const_lengths, **_):
    (_, solve_consts, _), guess = _split(args, const_lengths)
    return ctx.lower_jaxpr(solve_jaxpr, *solve_consts, *guess)


ad.primitive_jvps[custom_root_p] = _root_jvp
batching.primitive_batchers[custom_root_p] = _root_batch
mlir.register_lowering(custom_root_p, _root_lowering)
