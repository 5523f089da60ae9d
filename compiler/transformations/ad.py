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

import functools
from typing import Callable, Sequence

import numpy as np

from ..ir import dtypes as dt
from .. import lax
from ..api import argnums_positions, shaped_abstractify
from ..ir.tree_util import equality_errors
from ..lax.custom_derivatives import custom_lin_p
from ..ir.core import ClosedJaxpr, Jaxpr, Literal, Var
from ..ir.tracing import Tracer, close_over_consts, current_builder, get_aval, trace_to_jaxpr
from .nested_tracing import flatten_fun, trace_hoisting_consts
from .running import evaluate, simplified, without_gc
from .tracer_styles import GradStyle, JVPStyle
from ..ir.tree_util import Partial, tree_flatten, tree_map, tree_structure, tree_unflatten
from ..passes.dce import dce_closed
from ..passes.jvp import is_differentiable, jvp_jaxpr, tangent_aval
from ..passes.partial_eval import linearize_jaxpr
from ..passes.registry import run_pipeline, verify_pass_result
from ..passes.transpose import transpose_jaxpr
from ..engine.traceback_filtering import api_boundary
from .. import ref as _ref

__all__ = ["jvp", "vjp", "grad", "value_and_grad", "linearize", "linear_transpose",
           "jacfwd", "jacrev", "hessian", "stop_gradient"]


def _float0_zeros(aval):
    return np.zeros(aval.shape, dt.float0)


# -------------------------------------------------------------------- jvp

@api_boundary
@_ref.reading_closed_refs
@without_gc
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
        if ta.shape != pa.shape or ta.dtype != expected.dtype:
            hint = (" (integer and boolean primals take float0 tangents: "
                    "np.zeros(shape, jaxprc.dtypes.float0))" if expected.dtype == dt.float0 else "")
            raise TypeError(f"jvp: a primal of type {pa.str_short()} needs a tangent of type "
                            f"{expected.strip_weak_type().str_short()}, got {ta.str_short()}{hint}")
    flat_fun, store = flatten_fun(fun, in_tree, has_aux)
    cj, consts = trace_hoisting_consts(flat_fun, flat_primals, "jvp", JVPStyle(flat_tangents))
    nonzeros = [False] * len(consts) + [is_differentiable(get_aval(p)) for p in flat_primals]
    jvp_cj, out_nz = jvp_jaxpr(cj, nonzeros, instantiate=True)
    verify_pass_result("jvp", jvp_cj)
    n_out = store["n_out"]
    jvp_cj = simplified(jvp_cj, [True] * (len(cj.out_avals) + sum(out_nz[:n_out])) + [False] * sum(out_nz[n_out:]))
    tangent_args = [t for t, nz in zip(flat_tangents, nonzeros[len(consts):]) if nz]
    outs = evaluate(jvp_cj, list(consts) + list(flat_primals) + tangent_args, "jvp")
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
        self.fun = fun
        flat_fun, store = flatten_fun(fun, self.in_tree, has_aux)
        cj, consts = trace_hoisting_consts(flat_fun, flat_primals, name, GradStyle())
        self.n_out = store["n_out"]
        self.out_tree, self.aux_tree = store["out_tree"], store.get("aux_tree")
        self.in_avals = [get_aval(p) for p in flat_primals]
        if diff_mask is None:
            diff_mask = [True] * len(flat_primals)
        self.wrt = [m and is_differentiable(a) for m, a in zip(diff_mask, self.in_avals)]
        nonzeros = [False] * len(consts) + self.wrt
        known, lin, out_nz, n_res = linearize_jaxpr(cj, nonzeros)
        verify_pass_result("linearize (primal part)", known)
        verify_pass_result("linearize (linear part)", lin)
        self.out_avals = cj.out_avals
        # tangents are wanted for the main outputs only, not for aux
        self.out_nz = out_nz[:self.n_out]
        self._traced, self._nonzeros = cj, nonzeros
        lin_used = [True] * sum(self.out_nz) + [False] * sum(out_nz[self.n_out:])
        lin = verify_pass_result("dce", dce_closed(lin, lin_used, keep_inputs=True)[0])
        self.lin = run_pipeline(lin, "dce")   # cse'd where it runs
        self.known, self.n_res = known, n_res
        self.n_primal_outs = len(cj.out_avals)
        self.args = list(consts) + list(flat_primals)

    def aux_depends_on_inputs(self) -> list:
        """Per aux output: whether it depends on the inputs differentiated."""
        return jvp_jaxpr(self._traced, self._nonzeros, instantiate=False)[1][self.n_out:]

    def run_primal(self, name):
        outs = evaluate(simplified(self.known), self.args, name)
        self.residuals = outs[self.n_primal_outs:]
        self.primal_outs = primal_outs = outs[:self.n_primal_outs]
        out = tree_unflatten(self.out_tree, primal_outs[:self.n_out])
        aux = tree_unflatten(self.aux_tree, primal_outs[self.n_out:]) if self.aux_tree is not None else None
        return out, aux

    def transposed(self, values=None, simplify=True):
        """residuals + cotangents of the differentiable outputs -> cotangents of the inputs.
        ``values``: those inputs' concrete values, so a custom_vjp bwd runs on them."""
        n_lin_in = len(self.lin.in_avals) - self.n_res
        ct_cj, _ = transpose_jaxpr(self.lin, [False] * self.n_res + [True] * n_lin_in, values=values)
        verify_pass_result("transpose", ct_cj)
        return simplified(ct_cj) if simplify else ct_cj

    def calls_python_bwd(self) -> bool:
        """Outside any trace, a custom_vjp's bwd in the linear map runs on concrete values: the
        backward pass is then formed after the primal pass has run."""
        return current_builder() is None and any(
            e.primitive is custom_lin_p and getattr(e.params["bwd"], "runs_on_values", False)
            for e in self.lin.eqns)

    def concrete_cotangents(self, cts) -> list:
        """Run the backward pass on concrete residuals and output cotangents (traced ones, as
        under ``vmap(vjp_fun)``, stay traced: bwd then sees tracers)."""
        args = list(self.residuals) + list(cts)
        values = [None if isinstance(x, Tracer) else x for x in args]
        return evaluate(self.transposed(values=values), args, "vjp")

    def input_cotangents(self, cts, fill: Sequence[bool] | None = None) -> list:
        """Cotangents per input leaf: float0 zeros for integers, zeros where ``fill`` (all by
        default) for the rest, else None."""
        cts = iter(cts)
        fill = [True] * len(self.wrt) if fill is None else fill
        return [next(cts) if w else (_float0_zeros(a) if not is_differentiable(a) else
                                     lax.full(a.shape, 0, a.dtype) if f else None)
                for w, f, a in zip(self.wrt, fill, self.in_avals)]


@api_boundary
@_ref.reading_closed_refs
@without_gc
def linearize(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map."""
    lz = _Linearized(fun, primals, has_aux, "linearize")
    out, aux = lz.run_primal("linearize")
    residuals, lin = lz.residuals, run_pipeline(lz.lin, "cse")

    @api_boundary
    @without_gc
    def f_jvp(*tangents):
        flat_t, tree = tree_flatten(tuple(tangents))
        if tree != lz.in_tree:
            raise TypeError(f"linearize: the linearized function takes tangents structured like the "
                            f"primals {lz.in_tree}, got {tree}")
        t_args = [t for t, w in zip(flat_t, lz.wrt) if w]
        outs = iter(evaluate(lin, list(residuals) + t_args, "linearized"))
        t_outs = [next(outs) if nz else _float0_zeros(a) for nz, a in zip(lz.out_nz, lz.out_avals)]
        return tree_unflatten(lz.out_tree, t_outs)
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


@api_boundary
@_ref.reading_closed_refs
@without_gc
def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), vjp_fun)``; ``vjp_fun(ct)`` returns a tuple of cotangents, one per primal.

    ``vjp_fun`` may be called many times; the primal computation ran once. As in JAX it is a
    ``tree_util.Partial`` whose leaves are the residuals, so it can be returned from a jitted
    function or saved as a custom_vjp residual.
    """
    lz = _Linearized(fun, primals, has_aux, "vjp")
    out, aux = lz.run_primal("vjp")
    if lz.calls_python_bwd():     # a custom_vjp bwd runs in Python on the saved concrete values
        vjp_fun = Partial(api_boundary(without_gc(functools.partial(_apply_vjp, lz, None))))
    else:
        vjp_fun = Partial(api_boundary(without_gc(functools.partial(_apply_vjp, lz, lz.transposed()))),
                          *lz.residuals)
    return (out, vjp_fun, aux) if has_aux else (out, vjp_fun)


def _apply_vjp(lz, ct_cj, *args):
    """The cotangents of ``lz``'s inputs for the output cotangent ``args[-1]``, from the
    transposed program ``ct_cj`` applied to the residuals ``args[:-1]`` (None: the program
    calls a custom_vjp bwd, which runs on the concrete values ``lz`` saved)."""
    n_res = 0 if ct_cj is None else len(lz.residuals)
    residuals, given = args[:n_res], args[n_res:]
    if len(given) != 1:
        raise TypeError(_VJP_ONE_ARGUMENT.format(_func_src_info(lz.fun).split(" ")[0], len(given)))
    flat_ct, tree = tree_flatten(given[0])
    if tree != lz.out_tree:
        raise ValueError(
            "unexpected tree structure.\n\nThe argument to a VJP function returned by `jax.vjp` must match "
            f"the pytree\nstructure of the differentiated function {_func_src_info(lz.fun)}.\n\n"
            "But the tree structures differ:\n" + "\n".join(
                f"  * out{path} was a {seen} in the original output, but a {here} here, so {why}."
                for path, seen, here, why in equality_errors(lz.out_tree.unflatten([0] * lz.out_tree.num_leaves),
                                                             tree.unflatten([0] * tree.num_leaves))))
    for c, a in zip(flat_ct, lz.out_avals):
        ct_aval, want = get_aval(c), tangent_aval(a)
        # as JAX's check: same shape and dtype, any dtype where the output's cotangent is a float0
        if ct_aval.shape != want.shape or (ct_aval.dtype != want.dtype and want.dtype != dt.float0):
            raise ValueError("unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                             f"{_long_type(ct_aval)}, but expected {_long_type(want)} because the corresponding "
                             f"output of the differentiated function had JAX type {_long_type(a)}")
    cts = [c for c, nz in zip(flat_ct, lz.out_nz) if nz]
    if ct_cj is None:
        in_cts = lz.input_cotangents(lz.concrete_cotangents(cts))
    else:
        in_cts = lz.input_cotangents(evaluate(ct_cj, list(residuals) + cts, "vjp"))
    return tree_unflatten(lz.in_tree, in_cts)


_VJP_ONE_ARGUMENT = """
The function returned by `jax.vjp` applied to {} was called with {} arguments,
but functions returned by `jax.vjp` must be called with a single argument
corresponding to the single value returned by the function being differentiated
(even if that returned value is a tuple or other container).

For example, if we have:

  def f(x):
    return (x, x)
  _, f_vjp = jax.vjp(f, 1.0)

the function `f` returns a single tuple as output, and so we call `f_vjp` with a
single tuple as its argument:

  x_bar, = f_vjp((2.0, 2.0))

If we instead call `f_vjp(2.0, 2.0)`, with the values 'splatted out' as
arguments rather than in a tuple, this error can arise.
"""


def _func_src_info(fun) -> str:
    """``name at file:line``, as JAX names a function in its messages."""
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(fun, "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name


def _long_type(aval) -> str:
    """``float32[3,4]``: a type as JAX's messages write it."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


# ----------------------------------------------------------------- grad

def _check_grad_input(x, holomorphic, allow_int, name):
    aval = get_aval(x)
    if holomorphic and not np.issubdtype(aval.dtype, np.complexfloating):
        raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {aval.dtype.name}.")
    if not is_differentiable(aval) and not allow_int:
        raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {aval.dtype.name}. If you want to use "
                        "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")


def _check_grad_output(lz, holomorphic, name):
    """JAX's rules (and texts): one real scalar, or a complex one with ``holomorphic``."""
    if lz.out_tree != tree_structure(0):
        raise TypeError("Gradient only defined for scalar-output functions. Output was a "
                        f"{'pytree of ' + str(lz.n_out) + ' arrays' if lz.n_out != 1 else 'container'}: "
                        f"{lz.out_tree}.")
    aval = lz.out_avals[0]
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{tuple(aval.shape)}.")
    _check_output_dtype(aval, holomorphic, name)


def _check_output_dtype(aval, holomorphic, name):
    """An output reverse mode differentiates: real, or complex with ``holomorphic`` (JAX's texts)."""
    is_complex = np.issubdtype(aval.dtype, np.complexfloating)
    if holomorphic and not is_complex:
        raise TypeError(f"{name} with holomorphic=True requires outputs with complex dtype, "
                        f"but got {aval.dtype.name}.")
    if not holomorphic and is_complex:
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                        f"np.floating), but got {aval.dtype.name}. For holomorphic differentiation, "
                        "pass holomorphic=True. For differentiation of non-holomorphic functions "
                        "involving complex outputs, use jax.vjp directly.")
    if not holomorphic and not is_differentiable(aval):
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                        f"np.floating), but got {aval.dtype.name}. For differentiation of functions "
                        "with integer outputs, use jax.vjp directly.")


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False, reduce_axes=()):
    """A function returning ``(fun(*args), gradient)`` (``((value, aux), gradient)`` with has_aux)."""
    return _grad_transform(fun, argnums, has_aux, holomorphic, allow_int, with_value=True,
                           name="value_and_grad")


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False, reduce_axes=()):
    """The gradient of a scalar-valued ``fun`` with respect to the ``argnums`` arguments
    (of a complex scalar one, holomorphic in its complex arguments, with ``holomorphic``).

    >>> print(jaxprc.grad(lambda x: x ** 3)(2.0))
    12.0
    >>> print(jaxprc.grad(lambda x, y: x * y, argnums=(0, 1))(2.0, 5.0))
    (Array(5., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))
    """
    return _grad_transform(fun, argnums, has_aux, holomorphic, allow_int, with_value=False,
                           name="grad")


def _grad_transform(fun, argnums, has_aux, holomorphic, allow_int, with_value, name, threaded_refs=None):
    """``threaded_refs``: refs whose final values are the last aux outputs of ``fun``
    (``_grad_threading_refs``), which may not depend on what is differentiated."""
    def transformed(*args, **kwargs):
        if threaded_refs is not None:
            return differentiate(*args, **kwargs)
        try:
            return differentiate(*args, **kwargs)
        except _ref.Unthreaded as e:      # a ref of the calling code: its value threaded through
            if e.ref._trace is not current_builder():
                raise
            return _grad_threading_refs(fun, argnums, has_aux, holomorphic, allow_int, with_value, name,
                                        args, kwargs)

    @without_gc
    def differentiate(*args, **kwargs):
        highest = argnums if isinstance(argnums, int) else max(argnums, default=0)
        if highest >= len(args):
            raise TypeError(f"differentiating with respect to {argnums=} requires at least {highest + 1} "
                            f"positional arguments to be passed by the caller, but got only {len(args)} "
                            "positional arguments.")
        nums = argnums_positions(argnums, len(args), name)
        fun_, args, nums = _close_over_objects(fun, args, nums)
        for n in nums:
            for leaf in tree_flatten(args[n])[0]:
                _check_grad_input(leaf, holomorphic, allow_int, name)
        leaves_per_arg = [len(tree_flatten(a)[0]) for a in args]
        diff_mask = [i in nums for i, n in enumerate(leaves_per_arg) for _ in range(n)]
        f = (lambda *a: fun_(*a, **kwargs)) if kwargs else fun_
        lz = _Linearized(f, args, has_aux, name, diff_mask)
        _check_grad_output(lz, holomorphic, name)
        if threaded_refs:
            depends = lz.aux_depends_on_inputs()
            _check_ref_writes(depends[len(depends) - len(threaded_refs):], threaded_refs)
        n_val = lz.n_primal_outs if (with_value or has_aux) else 0
        if lz.calls_python_bwd():
            lz.run_primal(name)
            one = np.ones((), lz.out_avals[0].dtype)
            outs = list(lz.primal_outs[:n_val]) + lz.concrete_cotangents([one])
        else:
            outs = evaluate(_grad_program(lz, with_value or has_aux), lz.args, name)
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
    return api_boundary(transformed)


def _grad_threading_refs(fun, argnums, has_aux, holomorphic, allow_int, with_value, name, args, kwargs):
    """grad of a function that uses refs of the calling code (closed over, or arguments not
    differentiated): their values go in as constants of the derivative, their final values
    come out as extra aux values and are written back, as JAX does. A ref differentiated
    with respect to is no array, as in JAX."""
    nums = argnums_positions(argnums, len(args), name)
    shifted = nums[0] + 1 if isinstance(argnums, int) else tuple(n + 1 for n in nums)
    closed: list = []

    def call():
        threaded = _ref.thread_refs(fun, tuple(closed))

        def with_values(values, *a, **k):
            outs, _, finals = threaded(*a, **k, **{_ref.CLOSED_VALUES: values})
            if has_aux:
                return outs[0], (outs[1], finals)
            return outs, finals
        with_values.__name__ = getattr(fun, "__name__", "fun")
        transformed = _grad_transform(with_values, shifted, True, holomorphic, allow_int, with_value, name,
                                      threaded_refs=list(closed))
        return transformed([r._value for r in closed], *args, **kwargs)
    result = _ref.discover_closed_refs(call, closed, (), getattr(fun, "__name__", "fun"))
    if with_value:
        (value, aux), g = result
    else:
        g, aux = result
    aux, finals = aux if has_aux else (None, aux)
    _ref.write_back(closed, finals)
    if with_value:
        return ((value, aux), g) if has_aux else (value, g)
    return (g, aux) if has_aux else g


def _check_ref_writes(nonzeros, refs) -> None:
    """A value that depends on what grad differentiates, written to a ref that is not: JAX's error."""
    for nz, r in zip(nonzeros, refs):
        if nz:
            raise _ref.RefEscapeError(
                "performing a set/swap operation with a differentiated value on a non-differentiated array "
                f"reference of type {r.aval!r}. Move the array reference to be an argument of the "
                "differentiated function?")


def _close_over_objects(fun, args, nums):
    """Arguments outside ``argnums`` that hold a leaf no array can be (a config object, a
    function, a string) are passed to ``fun`` as they are, not traced: JAX closes over the
    arguments it does not differentiate. Returns ``fun`` of the other arguments, those
    arguments, and ``argnums`` as positions among them."""
    closed = {i for i, a in enumerate(args) if i not in nums and not _all_array_leaves(a)}
    if not closed:
        return fun, args, nums
    kept = [i for i in range(len(args)) if i not in closed]

    def fun_of_kept(*kept_args, **kwargs):
        full = list(args)
        for i, a in zip(kept, kept_args):
            full[i] = a
        return fun(*full, **kwargs)
    return fun_of_kept, tuple(args[i] for i in kept), [kept.index(n) for n in nums]


def _all_array_leaves(tree) -> bool:
    try:
        for leaf in tree_flatten(tree)[0]:
            get_aval(leaf)
    except TypeError:
        return False
    return True


def _grad_program(lz: _Linearized, with_values: bool) -> ClosedJaxpr:
    """One program: primal pass, then the transposed linear map applied to a cotangent of 1.

    The two programs are joined as they are: the transposed map's residual inputs become the
    primal pass's residual outputs, its cotangent input the literal 1.
    """
    ct_cj = lz.transposed(simplify=False)
    ct, known = ct_cj.jaxpr, lz.known
    n_p = lz.n_primal_outs
    one = Literal(1, ct.invars[-1].aval)      # the cotangent input's type, weak or not
    env = dict(zip(ct.invars, known.jaxpr.outvars[n_p:] + [one]))
    read = lambda a: env.get(a, a) if type(a) is Var else a
    eqns = list(known.jaxpr.eqns)
    for eqn in ct.eqns:
        invars = [read(a) for a in eqn.invars]
        eqns.append(eqn if all(a is b for a, b in zip(invars, eqn.invars)) else eqn.replace(invars=invars))
    outvars = (known.jaxpr.outvars[:n_p] if with_values else []) + [read(a) for a in ct.outvars]
    program = Jaxpr(known.jaxpr.constvars + ct.constvars, known.jaxpr.invars, outvars, eqns)
    return simplified(ClosedJaxpr(program, list(known.consts) + list(ct_cj.consts)))


# -------------------------------------------------------- linear_transpose

@api_boundary
@without_gc
def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """The transpose of the linear ``fun`` at the types of ``primals``: ct -> tuple of input cts."""
    flat_primals, in_tree = tree_flatten(tuple(primals))
    in_avals = [shaped_abstractify(p).strip_weak_type() for p in flat_primals]
    for a in in_avals:
        if not is_differentiable(a):
            raise TypeError(f"linear_transpose only supports float and complex inputs, got {a.str_short()}")
    flat_fun, store = flatten_fun(fun, in_tree)
    cj = trace_to_jaxpr(flat_fun, in_avals, name="linear_transpose")
    cj, consts = close_over_consts(cj)
    ct_cj, _ = transpose_jaxpr(cj, [False] * len(consts) + [True] * len(in_avals))
    verify_pass_result("transpose", ct_cj)
    ct_cj = simplified(ct_cj)
    out_tree = store["out_tree"]

    @without_gc
    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        flat_ct, tree = tree_flatten(ct)
        if tree != out_tree:
            raise TypeError(f"linear_transpose: the cotangent must have the output's structure "
                            f"{out_tree}, got {tree}")
        return tree_unflatten(in_tree, evaluate(ct_cj, list(consts) + list(flat_ct), "linear_transpose"))
    return api_boundary(transposed)


# ---------------------------------------------------------------- jacobians

def _std_basis(leaves) -> list:
    """The standard basis of the space of ``leaves``, one ``(N, *leaf.shape)`` array per leaf
    (N = total size): row i is the i-th unit vector, laid out like the leaves."""
    sizes = [int(np.prod(np.shape(x), dtype=np.int64)) for x in leaves]
    eye, offsets = np.eye(sum(sizes)), np.cumsum([0] + sizes)
    return [eye[:, o:o + n].reshape(len(eye), *np.shape(x)).astype(get_aval(x).dtype)
            for x, o, n in zip(leaves, offsets, sizes)]


def _split_axis(x, leaves, axis: int) -> list:
    """``x``'s ``axis`` (of size N, the basis index) cut into one block per leaf, each block's
    piece of that axis reshaped to the leaf's shape (at the same position)."""
    blocks, start = [], 0
    shape = tuple(get_aval(x).shape)
    for leaf in leaves:
        leaf_shape = tuple(np.shape(leaf))
        n = int(np.prod(leaf_shape, dtype=np.int64))
        piece = x if n == shape[axis] else lax.slice_in_dim(x, start, start + n, axis=axis)
        blocks.append(lax.reshape(piece, shape[:axis] + leaf_shape + shape[axis + 1:]))
        start += n
    return blocks


def _partial_in(fun, args, nums):
    """``fun`` as a function of the arguments at positions ``nums`` only."""
    def partial(*xs):
        full = list(args)
        for n, x in zip(nums, xs):
            full[n] = x
        return fun(*full)
    return partial


def _check_jacfwd_input(x, holomorphic):
    dtype = get_aval(x).dtype
    if holomorphic and not np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"jacfwd with holomorphic=True requires inputs with complex dtype, but got {dtype.name}.")
    if not holomorphic and not np.issubdtype(dtype, np.floating):
        raise TypeError(f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of np.floating), "
                        f"but got {dtype.name}. For holomorphic differentiation, pass holomorphic=True. For "
                        "differentiation of non-holomorphic functions involving complex inputs or integer "
                        "inputs, use jax.jvp directly.")


def _check_jacfwd_output(x, holomorphic):
    dtype = get_aval(x).dtype
    if holomorphic and not np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"jacfwd with holomorphic=True requires outputs with complex dtype, but got {dtype.name}.")


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False):
    """The Jacobian by forward mode: ``jvp`` vmapped over the standard basis of the inputs."""
    from .vmap import vmap

    def jac_fun(*args):
        nums = argnums_positions(argnums, len(args), "jacfwd")
        wrt = tuple(args[n] for n in nums)
        partial = _partial_in(fun, args, nums)
        flat_wrt, wrt_tree = tree_flatten(wrt)
        for x in flat_wrt:
            _check_jacfwd_input(x, holomorphic)

        def pushfwd(*basis_leaves):
            return jvp(partial, wrt, tree_unflatten(wrt_tree, basis_leaves), has_aux=has_aux)
        out_axes = (None, -1, None) if has_aux else (None, -1)
        out, jac, *aux = vmap(pushfwd, out_axes=out_axes)(*_std_basis(flat_wrt))
        for x in tree_flatten(out)[0]:
            _check_jacfwd_output(x, holomorphic)
        flat_jac, out_tree = tree_flatten(jac)
        # per_leaf[j][k]: d out_k / d (wrt leaf j), of shape out_k.shape + wrt_j.shape
        per_out = [_split_axis(j, flat_wrt, get_aval(j).ndim - 1) for j in flat_jac]
        per_leaf = [[blocks[j] for blocks in per_out] for j in range(len(flat_wrt))]
        jac = _assemble(per_leaf, out_tree, wrt_tree, isinstance(argnums, int))
        return (jac, aux[0]) if has_aux else jac
    return api_boundary(jac_fun)


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False):
    """The Jacobian by reverse mode: the vjp vmapped over the standard basis of the outputs."""
    from .vmap import vmap

    def jac_fun(*args):
        nums = argnums_positions(argnums, len(args), "jacrev")
        wrt = tuple(args[n] for n in nums)
        for x in tree_flatten(wrt)[0]:
            _check_grad_input(x, holomorphic, allow_int, "jacrev")
        out, vjp_fun, *aux = vjp(_partial_in(fun, args, nums), *wrt, has_aux=has_aux)
        flat_wrt, wrt_tree = tree_flatten(wrt)
        flat_out, out_tree = tree_flatten(out)
        for x in flat_out:
            _check_output_dtype(get_aval(x), holomorphic, "jacrev")
        rows = vmap(lambda *cts: vjp_fun(tree_unflatten(out_tree, cts)))(*_std_basis(flat_out))
        # rows per wrt leaf j: (N_out, *wrt_j.shape); cut the leading axis per output leaf
        per_leaf = [_split_axis(r, flat_out, 0) for r in tree_flatten(rows)[0]]
        jac = _assemble(per_leaf, out_tree, wrt_tree, isinstance(argnums, int))
        return (jac, aux[0]) if has_aux else jac
    return api_boundary(jac_fun)


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
