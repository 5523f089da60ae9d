r"""Taylor-mode higher-order differentiation (``jax.experimental.jet``).

``jet(f, (x,), ((h1, ..., hK),))`` pushes the truncated Taylor polynomial of a curve through
``x`` (its derivatives ``h1 .. hK`` along the curve) through ``f``, giving ``f(x)`` and the
derivatives of ``f`` along the curve, ``(f1, ..., fK)``, in one pass instead of K nested jvps.

``fun`` is traced to a jaxpr and transformed by the ``jet`` pass (``jaxprc.passes.jet``), which
propagates the series through each equation with the rule of its primitive in ``jet_rules``
(the pass's table, where each primitive family registers its rules); a user primitive gets one by
adding an entry there (``defzero``, ``deflinear``, ``def_deriv`` and ``def_comp`` build the
common ones; ``jaxprc.passes.jet`` has all the helpers).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.ir.tracing import get_aval
from jaxprc.ir.tree_util import tree_structure, tree_unflatten, treedef_is_leaf
from jaxprc.transformations.nested_tracing import flatten_fun, trace_hoisting_consts
from jaxprc.transformations import running
from jaxprc.passes.jet import (ZeroSeries, ZeroTerm, def_comp, def_deriv, deflinear,  # noqa: F401
                               defzero, deriv_prop, jet_jaxpr, jet_rules, linear_prop, zero_prop,
                               zero_series, zero_term)
from jaxprc.passes.registry import verify_pass_result

__all__ = ["jet", "jet2", "fact", "jet_rules", "zero_series", "zero_term", "ZeroSeries",
           "ZeroTerm", "defzero", "zero_prop", "deflinear", "linear_prop", "def_deriv",
           "deriv_prop", "def_comp"]


def fact(n):
    """``n!`` as JAX's jet computes it, ``exp(lgamma(n + 1))`` (so not exact beyond 1)."""
    return lax.exp(lax.lgamma(n + 1.))


def _check_inputs(primals, series) -> int:
    """The order of the series; the checks and messages of JAX's jet."""
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise TypeError("jet: primals and series must be tuples or lists with one entry per "
                        f"positional argument, got {type(primals).__name__} and {type(series).__name__}")
    if any(not isinstance(s, (tuple, list)) for s in series):
        raise TypeError("jet: each entry of series must be a tuple or list of Taylor terms")
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments") from None
    if len(primals) != len(series):
        raise ValueError(f"jet: {len(primals)} primal arguments but {len(series)} series")
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not treedef_is_leaf(tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not treedef_is_leaf(tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    return order


def _check_term(i: int, j: int, x, t):
    """A term has its primal's shape and dtype (a weakly typed term takes the primal's dtype).
    None for a term of another dtype given to a boolean or integer argument: such an argument
    cannot move along the curve, so JAX's rules never read its terms and they are dropped."""
    pa, ta = get_aval(x), get_aval(t)
    if tuple(ta.shape) != tuple(pa.shape):
        raise TypeError(f"jet: term {j} for argument {i} has shape {tuple(ta.shape)}, "
                        f"but the primal has shape {tuple(pa.shape)}")
    if ta.dtype != pa.dtype and not dt.is_inexact(pa.dtype):
        return None
    if ta.dtype != pa.dtype:
        if not ta.weak_type:
            raise TypeError(f"jet: term {j} for argument {i} has dtype {ta.dtype}, "
                            f"but the primal has dtype {pa.dtype}")
        t = lax.convert_element_type_p.bind(t, new_dtype=pa.dtype, weak_type=True)
    return t


@running.without_gc
def jet(fun: Callable, primals, series, factorial_scaled: bool = True, **_):
    r"""Taylor-mode higher-order automatic differentiation.

    ``primals`` holds one array per positional argument of ``fun``; ``series`` one tuple or list
    of K terms per argument, the derivatives of the argument along a curve (``h1 .. hK``; with
    ``factorial_scaled=False``, the Taylor coefficients ``hk / k!``). Returns
    ``(fun(*primals), series_out)``: ``series_out`` has the structure of ``fun``'s output, each
    leaf a list of its K derivatives along the curve (Taylor coefficients when not
    ``factorial_scaled``).
    """
    order = _check_inputs(primals, series)
    if factorial_scaled:
        series = [[t / fact(k + 1) for k, t in enumerate(terms)] for terms in series]
    series = [[_check_term(i, j, x, t) for j, t in enumerate(terms)]
              for i, (x, terms) in enumerate(zip(primals, series))]
    flat_fun, store = flatten_fun(fun, tree_structure(tuple(primals)))
    cj, consts = trace_hoisting_consts(flat_fun, list(primals), "jet")
    moving = [all(t is not None for t in terms) for terms in series]
    nonzeros = [False] * len(consts) + moving
    flat_series = [t for terms, m in zip(series, moving) if m for t in terms]
    jet_cj, _ = jet_jaxpr(cj, order, nonzeros, instantiate=True,
                          series_avals=tuple(map(get_aval, flat_series)))
    jet_cj = running.simplified(verify_pass_result("jet", jet_cj))
    outs = running.evaluate(jet_cj, [*consts, *primals, *flat_series], "jet")
    n_out = len(cj.out_avals)
    primals_out, flat_terms = outs[:n_out], outs[n_out:]
    terms_out = [flat_terms[i * order:(i + 1) * order] for i in range(n_out)]
    if factorial_scaled:
        terms_out = [[t * fact(k + 1) for k, t in enumerate(terms)] for terms in terms_out]
    out_tree = store["out_tree"]
    return tree_unflatten(out_tree, primals_out), tree_unflatten(out_tree, terms_out)


jet2 = partial(jet, factorial_scaled=False)
