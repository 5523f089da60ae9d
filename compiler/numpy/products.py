"""Products: dot, matmul, vdot, tensordot, einsum, outer, inner, kron — all ``dot_general``."""
from __future__ import annotations

import string

import numpy as np

from jaxprc import lax
from jaxprc.ir import dtypes as dt
from jaxprc.lax.contractions import dot_general_unchecked
from jaxprc.lax.sharding_constraint import out_sharding_of

from .creation import asarray
from ._util import aval_of, broadcast_shapes, broadcast_to_shape, canonical_axis, convert, located


def _promote_pair(fn, a, b):
    """Both operands as arrays of their promoted dtype; also returns the result's (dtype, weak).
    Operands that are not arrays are a TypeError naming ``fn``."""
    from ._dtypes import result_type
    aval_of(a, fn), aval_of(b, fn)
    dtype, weak = result_type(a, b, return_weak_type_flag=True)
    return asarray(convert(a, dtype, weak)), asarray(convert(b, dtype, weak)), dtype, weak


def _dot_general(a, b, dims, dtype, weak, precision=None, out_sharding=None):
    out = lax.dot_general(a, b, dims, precision=precision, preferred_element_type=dtype, out_sharding=out_sharding)
    return convert(out, dtype, weak)


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """numpy's dot: products of scalars, vector inner products, matrix products, and for N-D
    arrays a sum over the last axis of ``a`` and the second-to-last of ``b``."""
    a, b, dtype, weak = _promote_pair("dot", a, b)
    if preferred_element_type is not None:
        dtype, weak = np.dtype(preferred_element_type), False
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    if na == 0 or nb == 0:
        from .ufuncs import multiply
        return out_sharding_of(convert(multiply(a, b), dtype, weak), out_sharding, "dot")
    contract = ((na - 1,), (max(nb - 2, 0),))
    _check_contract("dot", a, b, contract)
    return _dot_general(a, b, (contract, ((), ())), dtype, weak, precision, out_sharding)


def _check_contract(fn, a, b, contract):
    sa, sb = aval_of(a).shape, aval_of(b).shape
    for i, j in zip(*contract):
        if sa[i] != sb[j]:
            raise TypeError(f"{located(fn)}: shapes {sa} and {sb} are not aligned: dimension {i} of the "
                            f"first ({sa[i]}) != dimension {j} of the second ({sb[j]})")


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """``a @ b``: matrix products over the last two axes, broadcasting the leading (batch) axes;
    a 1-D operand contributes its only axis to the contraction and no axis to the result."""
    a, b, dtype, weak = _promote_pair("matmul", a, b)
    if preferred_element_type is not None:
        dtype, weak = np.dtype(preferred_element_type), False
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if not sa or not sb:
        raise TypeError(f"{located('matmul')}: operands must not be scalars, got shapes {sa} and {sb}; use * "
                        "for scalar multiplication")
    ka, kb = len(sa) - 1, max(len(sb) - 2, 0)
    if sa[ka] != sb[kb]:
        raise TypeError(f"{located('matmul')}: contracting dimensions do not match: operand shapes {sa} and {sb} "
                        f"(last axis of a is {sa[ka]}, {'only' if len(sb) == 1 else 'second-to-last'} "
                        f"axis of b is {sb[kb]})")
    if len(sa) == 1 or len(sb) <= 2:
        # No batch axes to line up: dot_general's (a's free axes, b's free axes) order is matmul's.
        return _dot_general(a, b, (((ka,), (kb,)), ((), ())), dtype, weak, precision, out_sharding)
    batch = broadcast_shapes(sa[:-2], sb[:-2], fn="matmul")
    a = broadcast_to_shape(a, batch + sa[-2:])
    b = broadcast_to_shape(b, batch + sb[-2:])
    nb = len(batch)
    return _dot_general(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))), dtype, weak, precision,
                        out_sharding)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    from .shape_ops import ravel
    from .ufuncs import conj
    a = ravel(a)
    return dot(conj(a) if dt.is_complex(aval_of(a).dtype) else a, ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """numpy's vecdot: the conjugated ``x1`` times ``x2``, summed over ``axis`` of each operand
    (counted in its own rank, as numpy's gufunc axes); the remaining axes broadcast."""
    from ._util import _check_promotions
    from .shape_ops import moveaxis
    from .ufuncs import conj
    a1, a2 = aval_of(x1, "vecdot"), aval_of(x2, "vecdot")
    n1, n2 = canonical_axis(axis, a1.ndim, "vecdot"), canonical_axis(axis, a2.ndim, "vecdot")
    if a1.shape[n1] != a2.shape[n2]:
        raise ValueError(f"{located('vecdot')}: axes must match; got shapes {a1.shape} and {a2.shape} "
                         f"with axis={axis}")
    _check_promotions("vecdot", (a1, a2))
    rows = lax.expand_dims(moveaxis(conj(x1), n1, -1), (a1.ndim - 1,))
    columns = lax.expand_dims(moveaxis(asarray(x2), n2, -1), (a2.ndim,))
    out = matmul(rows, columns, precision=precision, preferred_element_type=preferred_element_type)
    return lax.squeeze(out, (-2, -1))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sum over the last ``axes`` axes of ``a`` and the first of ``b``, or over given axis pairs."""
    a, b, dtype, weak = _promote_pair("tensordot", a, b)
    if preferred_element_type is not None:
        dtype, weak = np.dtype(preferred_element_type), False
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n > min(na, nb) or n < 0:
            raise TypeError(f"{located('tensordot')}: axes={n} is out of range for operands of rank {na} and {nb}")
        contract = (tuple(range(na - n, na)), tuple(range(n)))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        if len(ax_a) != len(ax_b):
            raise TypeError(f"{located('tensordot')}: axes {axes} must have equal lengths")
        contract = (tuple(canonical_axis(i, na, "tensordot") for i in ax_a),
                    tuple(canonical_axis(i, nb, "tensordot") for i in ax_b))
    _check_contract("tensordot", a, b, contract)
    return _dot_general(a, b, (contract, ((), ())), dtype, weak, precision)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """Sum over the last axes of ``a`` and ``b`` (a product when either is a scalar)."""
    a, b, dtype, weak = _promote_pair("inner", a, b)
    if aval_of(a).ndim == 0 or aval_of(b).ndim == 0:
        from .ufuncs import multiply
        return multiply(a, b)
    return tensordot(a, b, ((-1,), (-1,)), precision=precision, preferred_element_type=preferred_element_type)


def outer(a, b):
    from .shape_ops import ravel
    from .ufuncs import multiply
    return multiply(lax.expand_dims(ravel(a), (1,)), lax.expand_dims(ravel(b), (0,)))


def kron(a, b):
    from .shape_ops import reshape
    from .ufuncs import multiply
    a, b = asarray(a), asarray(b)
    if aval_of(a).dtype == aval_of(b).dtype == np.bool_:
        raise TypeError("kron: mul does not accept dtype bool (JAX multiplies with lax.mul, which refuses "
                        "booleans); convert the operands first")
    sa, sb = aval_of(a).shape, aval_of(b).shape
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    a = lax.reshape(a, tuple(x for d in sa for x in (d, 1)))
    b = lax.reshape(b, tuple(x for d in sb for x in (1, d)))
    return reshape(multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


# -------------------------------------------------------------------- einsum

def _parse_einsum(subscripts: str, ndims):
    subscripts = subscripts.replace(" ", "")
    inputs, _, output = subscripts.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"{located('einsum')}: {len(terms)} operand subscripts in {subscripts!r} but {len(ndims)} operands")
    unused = [c for c in string.ascii_letters if c not in subscripts]
    ell_len = max([n - len(t.replace("...", "")) for t, n in zip(terms, ndims) if "..." in t] or [0])
    ellipsis = "".join(unused[:ell_len])
    expanded = []
    for t, n in zip(terms, ndims):
        if "..." in t:
            k = n - len(t.replace("...", ""))
            t = t.replace("...", ellipsis[ell_len - k:])
        if len(t) != n:
            raise ValueError(f"{located('einsum')}: subscripts {t!r} do not match an operand of rank {n}")
        expanded.append(t)
    if "->" in subscripts:
        output = output.replace("...", ellipsis)
    else:
        counts = {c: "".join(expanded).count(c) for c in "".join(expanded)}
        output = ellipsis + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ellipsis))
    return expanded, output


def _sum_out(x, term, keep):
    """Sum the labels of ``x`` not in ``keep``; diagonals (repeated labels) are taken first."""
    from .reductions import sum
    from .selection import diagonal
    while len(set(term)) < len(term):
        c = next(c for c in term if term.count(c) > 1)
        i = term.index(c)
        j = term.index(c, i + 1)
        x = diagonal(x, 0, i, j)
        term = term[:i] + term[i + 1:j] + term[j + 1:] + c
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if axes:
        x = sum(x, axis=axes)
        term = "".join(c for c in term if c in keep)
    return x, term


def einsum(subscripts, *operands, optimize=None, precision=None, preferred_element_type=None, out_sharding=None):
    """Einstein summation, contracted left to right with ``dot_general`` (batch dimensions for
    labels shared and kept, contracting dimensions for labels shared and summed); ``out_sharding``:
    the result's layout (its steps then contract split dimensions without asking for one)."""
    from ._dtypes import result_type
    from .shape_ops import transpose
    from .ufuncs import multiply
    dtype, weak = result_type(*operands, return_weak_type_flag=True)
    if preferred_element_type is not None:
        dtype, weak = np.dtype(preferred_element_type), False
    ops = [asarray(convert(o, dtype, weak)) for o in operands]
    terms, output = _parse_einsum(subscripts, [aval_of(o).ndim for o in ops])

    def needed_after(k):
        return set(output).union(*terms[k + 1:]) if k + 1 < len(terms) else set(output)

    x, term = _sum_out(ops[0], terms[0], needed_after(0) | set("".join(terms[1:])))
    for k in range(1, len(ops)):
        keep = needed_after(k)
        y, yterm = _sum_out(ops[k], terms[k], keep | set(term))
        x, term = _sum_out(x, term, keep | set(yterm))
        shared = [c for c in term if c in yterm]
        batch = [c for c in shared if c in keep]
        contract = [c for c in shared if c not in keep]
        if not shared:
            out = multiply(lax.expand_dims(x, tuple(range(len(term), len(term) + len(yterm)))),
                           lax.broadcast_to_rank(y, len(term) + len(yterm)))
            x, term = out, term + yterm
            continue
        dims = ((tuple(term.index(c) for c in contract), tuple(yterm.index(c) for c in contract)),
                (tuple(term.index(c) for c in batch), tuple(yterm.index(c) for c in batch)))
        if out_sharding is None:
            x = _dot_general(x, y, dims, dtype, weak, precision)
        else:
            x = convert(dot_general_unchecked(x, y, dims, precision, dtype), dtype, weak)
        term = "".join(batch) + "".join(c for c in term if c not in shared) + \
            "".join(c for c in yterm if c not in shared)
    x, term = _sum_out(x, term, set(output))
    x = transpose(x, [term.index(c) for c in output]) if term != output else x
    return out_sharding_of(x, out_sharding, "einsum")
