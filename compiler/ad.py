"""Automatic differentiation API: jvp, vjp, grad, value_and_grad, linearize, linear_transpose,
jacfwd, jacrev, hessian, stop_gradient (JAX's signatures and semantics).

Each transformation traces the function once into a jaxpr, runs the passes
(jvp, partial evaluation, transpose, dce, cse) and evaluates the resulting
program in the current context: inside another trace it is inlined; at top
level it is compiled once per program structure and run. With concrete
inputs the trace can concretize values on demand, so ``f`` may branch on
them in Python (``if x > 0:``), as in JAX outside ``jit``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .ir import dtypes as dt
from .ir import lax
from .evaluate import evaluate_jaxpr
from .ir.core import ClosedJaxpr
from .ir.tracing import (ConcretizationTypeError, JaxprBuilder, Tracer, close_over_consts,
                         current_builder, eval_jaxpr, get_aval, trace_to_jaxpr)
from .ir.tree_util import tree_flatten, tree_map, tree_structure, tree_unflatten
from .passes.cse import cse
from .passes.dce import dce, dce_closed
from .passes.jvp import is_differentiable, jvp_jaxpr, tangent_aval
from .passes.partial_eval import linearize_jaxpr
from .passes.transpose import transpose_jaxpr

__all__ = ["jvp", "vjp", "grad", "value_and_grad", "linearize", "linear_transpose",
           "jacfwd", "jacrev", "hessian", "stop_gradient"]


# ---------------------------------------------------------------- tracing

class _NestedBuilder(JaxprBuilder):
    """A builder whose inputs may be tracers of an enclosing trace: when Python asks for a
    value, the enclosing trace is asked for theirs (``grad(grad(f))`` with concrete inputs)."""

    def __init__(self, name):
        super().__init__(name)
        self.outer_args: dict = {}

    def concretize(self, tracer, what, error):
        for v, outer in list(self.outer_args.items()):
            try:
                self.known[v] = outer._builder.concretize(outer, what, error)
            except ConcretizationTypeError:
                continue
            del self.outer_args[v]
        return super().concretize(tracer, what, error)


def _trace_flat(fun: Callable, args: Sequence[Any], name: str):
    """Trace ``fun`` (flat args -> flat outputs) with the values of ``args`` known where concrete.

    Returns the jaxpr with its consts hoisted into leading inputs, and those consts.
    """
    builder = _NestedBuilder(name)
    with builder:
        tracers = []
        for x in args:
            outer = isinstance(x, Tracer)
            t = builder.new_arg(get_aval(x), None if outer else x)
            if outer:
                builder.outer_args[t._var] = x
            tracers.append(t)
        cj = builder.build(fun(*tracers))
    return close_over_consts(cj)


def _flatten_fun(fun, in_tree, has_aux=False):
    """A flat-in, flat-out version of ``fun``; ``store`` receives the output trees."""
    store = {}

    def flat(*leaves):
        out = fun(*tree_unflatten(in_tree, leaves))
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair (output, aux), "
                                f"got {type(out).__name__}")
            out, aux = out
            aux_leaves, store["aux_tree"] = tree_flatten(aux)
        else:
            aux_leaves = []
        out_leaves, store["out_tree"] = tree_flatten(out)
        store["n_out"] = len(out_leaves)
        return list(out_leaves) + list(aux_leaves)
    return flat, store


# -------------------------------------------------------------- evaluating

def _evaluate(cj: ClosedJaxpr, args: Sequence[Any], name: str) -> list:
    """Run ``cj`` on ``args`` here: inline inside a trace, compiled once at top level."""
    return evaluate_jaxpr(cj, args, name)


def _simplify(cj: ClosedJaxpr, used_outputs: Sequence[bool] | None = None) -> ClosedJaxpr:
    if used_outputs is not None:
        cj = dce_closed(cj, used_outputs, keep_inputs=True)[0]
    return cse(dce(cj))


def _float0_zeros(aval):
    return np.zeros(aval.shape, dt.float0)


# -------------------------------------------------------------------- jvp

def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """``(fun(*primals), d fun(primals) . tangents)``; with ``has_aux``, also the aux value."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists with one entry per "
                        f"positional argument, got {type(primals).__name__} and {type(tangents).__name__}")
    flat_primals, in_tree = tree_flatten(tuple(primals))
    flat_tangents, tangent_tree = tree_flatten(tuple(tangents))
    if tangent_tree != in_tree:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree structure, "
                        f"got {in_tree} and {tangent_tree}")
    for p, t in zip(flat_primals, flat_tangents):
        pa, ta = get_aval(p), get_aval(t)
        expected = tangent_aval(pa)
        if ta.shape != pa.shape or (ta.dtype != expected.dtype and expected.dtype != dt.float0):
            raise TypeError(f"jvp: a primal of type {pa.str_short()} needs a tangent of type "
                            f"{expected.strip_weak_type().str_short()}, got {ta.str_short()}")
    flat_fun, store = _flatten_fun(fun, in_tree, has_aux)
    cj, consts = _trace_flat(flat_fun, flat_primals, "jvp")
    nonzeros = [False] * len(consts) + [is_differentiable(get_aval(p)) for p in flat_primals]
    jvp_cj, out_nz = jvp_jaxpr(cj, nonzeros, instantiate=True)
    n_out = store["n_out"]
    jvp_cj = _simplify(jvp_cj, [True] * (len(cj.out_avals) + sum(out_nz[:n_out])) + [False] * sum(out_nz[n_out:]))
    tangent_args = [t for t, nz in zip(flat_tangents, nonzeros[len(consts):]) if nz]
    outs = _evaluate(jvp_cj, list(consts) + list(flat_primals) + tangent_args, "jvp")
    primal_outs, rest = outs[:len(cj.out_avals)], iter(outs[len(cj.out_avals):])
    tangent_outs = [next(rest) if nz else _float0_zeros(a)
                    for nz, a in zip(out_nz[:n_out], cj.out_avals[:n_out])]
    out_tree = store["out_tree"]
    result = (tree_unflatten(out_tree, primal_outs[:n_out]), tree_unflatten(out_tree, tangent_outs))
    if has_aux:
        return result + (tree_unflatten(store["aux_tree"], primal_outs[n_out:]),)
    return result


# ------------------------------------------------------ linearize and vjp

class _Linearized:
    """A function traced and linearized once: its primal outputs, residuals and linear map."""

    def __init__(self, fun, primals, has_aux, name, diff_mask=None):
        flat_primals, self.in_tree = tree_flatten(tuple(primals))
        flat_fun, store = _flatten_fun(fun, self.in_tree, has_aux)
        cj, consts = _trace_flat(flat_fun, flat_primals, name)
        self.n_out = store["n_out"]
        self.out_tree, self.aux_tree = store["out_tree"], store.get("aux_tree")
        self.in_avals = [get_aval(p) for p in flat_primals]
        if diff_mask is None:
            diff_mask = [True] * len(flat_primals)
        self.wrt = [m and is_differentiable(a) for m, a in zip(diff_mask, self.in_avals)]
        nonzeros = [False] * len(consts) + self.wrt
        known, lin, out_nz, n_res = linearize_jaxpr(cj, nonzeros)
        self.out_avals = cj.out_avals
        # tangents are wanted for the main outputs only, not for aux
        self.out_nz = out_nz[:self.n_out]
        lin_used = [True] * sum(self.out_nz) + [False] * sum(out_nz[self.n_out:])
        self.lin = _simplify(lin, lin_used)
        self.known, self.n_res = known, n_res
        self.n_primal_outs = len(cj.out_avals)
        self.args = list(consts) + list(flat_primals)

    def run_primal(self, name):
        outs = _evaluate(_simplify(self.known), self.args, name)
        self.residuals = outs[self.n_primal_outs:]
        self.primal_outs = primal_outs = outs[:self.n_primal_outs]
        out = tree_unflatten(self.out_tree, primal_outs[:self.n_out])
        aux = tree_unflatten(self.aux_tree, primal_outs[self.n_out:]) if self.aux_tree is not None else None
        return out, aux

    def transposed(self, values=None):
        """residuals + cotangents of the differentiable outputs -> cotangents of the inputs.
        ``values``: those inputs' concrete values, so a custom_vjp bwd runs on them."""
        n_lin_in = len(self.lin.in_avals) - self.n_res
        ct_cj, _ = transpose_jaxpr(self.lin, [False] * self.n_res + [True] * n_lin_in, values=values)
        return _simplify(ct_cj)

    def calls_python_bwd(self) -> bool:
        """Outside any trace, a custom_vjp's bwd in the linear map runs on concrete values: the
        backward pass is then formed after the primal pass has run."""
        return current_builder() is None and any(
            e.primitive.name == "custom_lin" and getattr(e.params["bwd"], "runs_on_values", False)
            for e in self.lin.eqns)

    def concrete_cotangents(self, cts) -> list:
        """Run the backward pass on concrete residuals and output cotangents."""
        args = list(self.residuals) + list(cts)
        return _evaluate(self.transposed(values=args), args, "vjp")

    def input_cotangents(self, cts, fill: Sequence[bool] | None = None) -> list:
        """Cotangents per input leaf: float0 zeros for integers, zeros where ``fill`` (all by
        default) for the rest, else None."""
        cts = iter(cts)
        fill = [True] * len(self.wrt) if fill is None else fill
        return [next(cts) if w else (_float0_zeros(a) if not is_differentiable(a) else
                                     lax.full(a.shape, 0, a.dtype) if f else None)
                for w, f, a in zip(self.wrt, fill, self.in_avals)]


def linearize(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map."""
    lz = _Linearized(fun, primals, has_aux, "linearize")
    out, aux = lz.run_primal("linearize")
    residuals, lin = lz.residuals, lz.lin

    def f_jvp(*tangents):
        flat_t, tree = tree_flatten(tuple(tangents))
        if tree != lz.in_tree:
            raise TypeError(f"linearize: the linearized function takes tangents structured like the "
                            f"primals {lz.in_tree}, got {tree}")
        t_args = [t for t, w in zip(flat_t, lz.wrt) if w]
        outs = iter(_evaluate(lin, list(residuals) + t_args, "linearized"))
        t_outs = [next(outs) if nz else _float0_zeros(a) for nz, a in zip(lz.out_nz, lz.out_avals)]
        return tree_unflatten(lz.out_tree, t_outs)
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), vjp_fun)``; ``vjp_fun(ct)`` returns a tuple of cotangents, one per primal.

    ``vjp_fun`` may be called many times; the primal computation ran once.
    """
    lz = _Linearized(fun, primals, has_aux, "vjp")
    out, aux = lz.run_primal("vjp")
    residuals = lz.residuals
    ct_cj = None if lz.calls_python_bwd() else lz.transposed()

    def vjp_fun(ct):
        flat_ct, tree = tree_flatten(ct)
        if tree != lz.out_tree:
            raise TypeError(f"vjp: the cotangent must have the structure of the output {lz.out_tree}, "
                            f"got {tree}")
        for c, a in zip(flat_ct, lz.out_avals):
            if get_aval(c).shape != a.shape:
                raise ValueError(f"vjp: a cotangent of shape {get_aval(c).shape} was given for an "
                                 f"output of type {a.str_short()}")
        cts = [c for c, nz in zip(flat_ct, lz.out_nz) if nz]
        if ct_cj is None:
            in_cts = lz.input_cotangents(lz.concrete_cotangents(cts))
        else:
            in_cts = lz.input_cotangents(_evaluate(ct_cj, list(residuals) + cts, "vjp"))
        return tree_unflatten(lz.in_tree, in_cts)
    return (out, vjp_fun, aux) if has_aux else (out, vjp_fun)


# ----------------------------------------------------------------- grad

def _argnums_tuple(argnums, nargs, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(f"{name}: argnums={argnums} is out of range for a function called with "
                             f"{nargs} positional arguments")
    return tuple(n % nargs for n in nums)


def _check_grad_input(x, allow_int, name):
    aval = get_aval(x)
    if not is_differentiable(aval) and not allow_int:
        raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {aval.dtype.name}. If you want to use "
                        "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False, reduce_axes=()):
    """A function returning ``(fun(*args), gradient)`` (``((value, aux), gradient)`` with has_aux)."""
    return _grad_transform(fun, argnums, has_aux, allow_int, with_value=True, name="value_and_grad")


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False, reduce_axes=()):
    """The gradient of a scalar-valued ``fun`` with respect to the ``argnums`` arguments."""
    return _grad_transform(fun, argnums, has_aux, allow_int, with_value=False, name="grad")


def _grad_transform(fun, argnums, has_aux, allow_int, with_value, name):
    def transformed(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), name)
        for n in nums:
            for leaf in tree_flatten(args[n])[0]:
                _check_grad_input(leaf, allow_int, name)
        leaves_per_arg = [len(tree_flatten(a)[0]) for a in args]
        diff_mask = [i in nums for i, n in enumerate(leaves_per_arg) for _ in range(n)]
        f = (lambda *a: fun(*a, **kwargs)) if kwargs else fun
        lz = _Linearized(f, args, has_aux, name, diff_mask)
        if lz.n_out != 1 or lz.out_avals[0].shape != ():
            raise TypeError(f"Gradient only defined for scalar-output functions. Output "
                            f"{'had shape: ' + str(list(lz.out_avals[0].shape)) if lz.n_out == 1 else 'was a pytree of ' + str(lz.n_out) + ' arrays'}.")
        if not is_differentiable(lz.out_avals[0]):
            raise TypeError(f"{name} requires real- or complex-valued outputs (output dtype that is "
                            f"a sub-dtype of np.inexact), but got {lz.out_avals[0].dtype.name}.")
        n_val = lz.n_primal_outs if (with_value or has_aux) else 0
        if lz.calls_python_bwd():
            lz.run_primal(name)
            one = np.ones((), lz.out_avals[0].dtype)
            outs = list(lz.primal_outs[:n_val]) + lz.concrete_cotangents([one])
        else:
            outs = _evaluate(_grad_program(lz, with_value or has_aux), lz.args, name)
        values, cts = outs[:n_val], outs[n_val:]
        in_cts = lz.input_cotangents(cts, fill=[False] * len(diff_mask))
        per_arg, pos = [], 0
        for a, n in zip(args, leaves_per_arg):
            per_arg.append(tree_unflatten(tree_structure(a), in_cts[pos:pos + n]))
            pos += n
        g = per_arg[nums[0]] if isinstance(argnums, int) else tuple(per_arg[n] for n in nums)
        value = tree_unflatten(lz.out_tree, values[:1]) if n_val else None
        aux = tree_unflatten(lz.aux_tree, values[1:]) if has_aux else None
        if with_value:
            return ((value, aux), g) if has_aux else (value, g)
        return (g, aux) if has_aux else g
    transformed.__name__ = f"{name}_{getattr(fun, '__name__', 'fun')}"
    transformed.__wrapped__ = fun
    return transformed


def _grad_program(lz: _Linearized, with_values: bool) -> ClosedJaxpr:
    """One program: primal pass, then the transposed linear map applied to a cotangent of 1."""
    ct_cj = lz.transposed()
    known = lz.known
    n_p = lz.n_primal_outs

    def whole(*args):
        outs = eval_jaxpr(known.jaxpr, known.consts, *args)
        one = lax.full((), 1, lz.out_avals[0].dtype)
        cts = eval_jaxpr(ct_cj.jaxpr, ct_cj.consts, *outs[n_p:], one)
        return (outs[:n_p] if with_values else []) + cts
    program = trace_to_jaxpr(whole, [get_aval(a) for a in lz.args], name="grad")
    return _simplify(program)


# -------------------------------------------------------- linear_transpose

def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """The transpose of the linear ``fun`` at the types of ``primals``: ct -> tuple of input cts."""
    flat_primals, in_tree = tree_flatten(tuple(primals))
    in_avals = [get_aval(p).strip_weak_type() for p in flat_primals]
    for a in in_avals:
        if not is_differentiable(a):
            raise TypeError(f"linear_transpose only supports float and complex inputs, got {a.str_short()}")
    flat_fun, store = _flatten_fun(fun, in_tree)
    cj = trace_to_jaxpr(flat_fun, in_avals, name="linear_transpose")
    cj, consts = close_over_consts(cj)
    ct_cj, _ = transpose_jaxpr(cj, [False] * len(consts) + [True] * len(in_avals))
    ct_cj = _simplify(ct_cj)
    out_tree, out_avals = store["out_tree"], cj.out_avals

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        flat_ct, tree = tree_flatten(ct)
        if tree != out_tree:
            raise TypeError(f"linear_transpose: the cotangent must have the output's structure "
                            f"{out_tree}, got {tree}")
        return tree_unflatten(in_tree, _evaluate(ct_cj, list(consts) + list(flat_ct), "linear_transpose"))
    return transposed


# ---------------------------------------------------------------- jacobians

def _stack_rows(rows, out_shape, in_shape, out_dims_first):
    """Stack per-basis-vector results into a Jacobian of shape out_shape + in_shape."""
    n = len(rows)
    if out_dims_first:        # rows are d out / d x_i: shape out_shape each -> [out, in]
        flat = [lax.reshape(r, (int(np.prod(out_shape, dtype=np.int64)), 1)) for r in rows]
        jac = lax.concatenate(flat, 1) if n else None
    else:                     # rows are d y_i / d in: shape in_shape each -> [out, in]
        flat = [lax.reshape(r, (1, int(np.prod(in_shape, dtype=np.int64)))) for r in rows]
        jac = lax.concatenate(flat, 0) if n else None
    return lax.reshape(jac, tuple(out_shape) + tuple(in_shape))


def _basis(aval, i):
    e = np.zeros(aval.size, aval.dtype)
    e[i] = 1
    return e.reshape(aval.shape)


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False):
    """The Jacobian by forward mode: one jvp per input element, sharing one linearization."""
    def jac_fun(*args):
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        wrt = tuple(args[n] for n in nums)

        def partial(*xs):
            full = list(args)
            for n, x in zip(nums, xs):
                full[n] = x
            return fun(*full)
        out, f_jvp, *aux = linearize(partial, *wrt, has_aux=has_aux)
        flat_wrt, wrt_tree = tree_flatten(wrt)
        flat_out, out_tree = tree_flatten(out)
        wrt_avals = [get_aval(x) for x in flat_wrt]
        # columns[j][k]: d out_k / d (wrt leaf j), as a list of per-element tangents
        per_leaf = []
        for j, a in enumerate(wrt_avals):
            cols = []
            for i in range(a.size):
                ts = [_basis(b, i) if k == j else np.zeros(b.shape, b.dtype) for k, b in enumerate(wrt_avals)]
                cols.append(tree_flatten(f_jvp(*tree_unflatten(wrt_tree, ts)))[0])
            per_leaf.append([_stack_rows([c[k] for c in cols], get_aval(o).shape, a.shape, True)
                             for k, o in enumerate(flat_out)])
        jac = _assemble(per_leaf, out_tree, wrt_tree, isinstance(argnums, int))
        return (jac, aux[0]) if has_aux else jac
    return jac_fun


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False):
    """The Jacobian by reverse mode: one vjp per output element, sharing one linearization."""
    def jac_fun(*args):
        nums = _argnums_tuple(argnums, len(args), "jacrev")
        wrt = tuple(args[n] for n in nums)

        def partial(*xs):
            full = list(args)
            for n, x in zip(nums, xs):
                full[n] = x
            return fun(*full)
        out, vjp_fun, *aux = vjp(partial, *wrt, has_aux=has_aux)
        flat_wrt, wrt_tree = tree_flatten(wrt)
        flat_out, out_tree = tree_flatten(out)
        out_avals = [get_aval(o) for o in flat_out]
        rows_per_out = []
        for k, a in enumerate(out_avals):
            rows = []
            for i in range(a.size):
                cts = [_basis(b, i) if m == k else np.zeros(b.shape, b.dtype) for m, b in enumerate(out_avals)]
                rows.append(tree_flatten(vjp_fun(tree_unflatten(out_tree, cts)))[0])
            rows_per_out.append(rows)
        per_leaf = [[_stack_rows([r[j] for r in rows_per_out[k]], out_avals[k].shape,
                                 get_aval(x).shape, False) for k in range(len(out_avals))]
                    for j, x in enumerate(flat_wrt)]
        jac = _assemble(per_leaf, out_tree, wrt_tree, isinstance(argnums, int))
        return (jac, aux[0]) if has_aux else jac
    return jac_fun


def _assemble(per_leaf, out_tree, wrt_tree, single_arg):
    """Nest Jacobian blocks as JAX does: the output's tree of (the argument's tree of blocks)."""
    n_out = out_tree.num_leaves
    blocks = []
    for k in range(n_out):
        inner = tree_unflatten(wrt_tree, [per_leaf[j][k] for j in range(len(per_leaf))])
        blocks.append(inner[0] if single_arg else inner)
    return tree_unflatten(out_tree, blocks)


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False):
    """The Hessian: ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)


def stop_gradient(x):
    """``x`` with a zero derivative (each leaf of a pytree)."""
    return tree_map(lax.stop_gradient, x)
