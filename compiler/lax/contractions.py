"""Contractions: dot_general (batched tensor contraction), with ``dot`` (vector/matrix products) on top.

Result dimensions are, in order: the batch dimensions, the free (neither
batch nor contracting) dimensions of lhs, then those of rhs.
"""
from __future__ import annotations

import enum
import typing

import numpy as np

from jaxprc import lax
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.passes import jet
from jaxprc.interpreters.mlir import hlo, ir
from jaxprc.ir import dtypes as dt
from jaxprc.ir.core import Primitive, ShapedArray, param_type
from jaxprc.ir.params import Bool, DType, Enum, Int, OneOf, Record, Tuple
from jaxprc.ir import sharding_type as st
from .elementwise import ANY
from jaxprc.engine.lowering import param_name
from jaxprc.passes.jvp import aval_of
from jaxprc.passes.vmap import shift

from .support.operands import aval, ints
from .sharding_constraint import match_type_sharding, out_sharding_of
from .shapes import DIMS, type_error as _type_error

__all__ = ["dot_general", "dot", "Precision", "PrecisionLike", "DotDimensionNumbers", "DotAlgorithm",
           "DotAlgorithmPreset", "dot_general_p"]


# -------------------------------------------------------------- primitive


dot_general_p = Primitive("dot_general")


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    avals = [lhs, rhs]
    params = dict(dimension_numbers=dimension_numbers)
    if lhs.dtype != rhs.dtype or not ANY(lhs.dtype):
        raise _type_error("dot_general", avals, "operands of equal dtypes (promotion is explicit)", **params)
    for side, aval, contract, batch in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        dims = tuple(contract) + tuple(batch)
        if len(set(dims)) != len(dims) or any(not 0 <= d < aval.ndim for d in dims):
            raise _type_error("dot_general", avals, f"distinct {side} contracting and batch dimensions "
                              f"in [0, {aval.ndim})", **params)
    if len(lc) != len(rc) or any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lc, rc)):
        raise _type_error("dot_general", avals, "contracting dimensions of equal number and sizes", **params)
    if len(lb) != len(rb) or any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lb, rb)):
        raise _type_error("dot_general", avals, "batch dimensions of equal number and sizes", **params)
    free = lambda aval, used: [s for i, s in enumerate(aval.shape) if i not in used]
    shape = [lhs.shape[d] for d in lb] + free(lhs, set(lc) | set(lb)) + free(rhs, set(rc) | set(rb))
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)   # JAX's weak-type rule


@dot_general_p.def_sharding_rule
def _dot_general_sharding(outs, lhs, rhs, *, dimension_numbers, **_):
    """Batch dimensions keep the axes either operand splits them over, free dimensions their own;
    contracting dimensions' axes are summed over (XLA adds up the partial products)."""
    (lc, rc), (lb, rb) = dimension_numbers
    mesh = st.common_mesh("dot_general", [lhs, rhs])
    ld, rd = st.dims(lhs), st.dims(rhs)
    batch = []
    for a, b in zip(lb, rb):
        if ld[a] and rd[b] and ld[a] != rd[b]:
            raise st.ShardingTypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions "
                                       f"to have the consistent sharding, got {ld[a]} and {rd[b]}")
        batch.append(ld[a] or rd[b])
    free = lambda d, used: [x for i, x in enumerate(d) if i not in used]
    out = batch + free(ld, set(lc) | set(lb)) + free(rd, set(rc) | set(rb))
    used = [x for axes in out for x in axes]
    if len(set(used)) != len(used):
        raise st.illegal_result("dot_general", [lhs, rhs], outs[0], out)
    return st.typed(mesh, out)


@param_type
class Precision(enum.Enum):
    """XLA's operand precision for a dot (passed to the compiler as its precision_config); the
    names JAX accepts as strings map onto the three levels."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        level = _PRECISION_STRINGS.get(value) if isinstance(value, str) else None
        return None if level is None else cls[level]

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Precision.{self.name}"


@param_type
class DotAlgorithmPreset(enum.Enum):
    """A named dot algorithm (storage types of the operands, accumulation type, passes), given as
    ``precision=``: the operands are converted to the algorithm's types, the product accumulates
    in its type and is converted to the result dtype, as JAX lowers it."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"DotAlgorithmPreset.{self.name}"

    def _parts(self):
        """(lhs storage type name, accumulation type name, passes) from the preset's name."""
        lhs, _, acc, *passes = self.name.split("_")
        return lhs, acc, int(passes[0][1:]) if passes else 1

    @property
    def supported_lhs_types(self):
        if self in (DotAlgorithmPreset.DEFAULT,) or self.name.startswith("ANY_F8"):
            return None
        lhs = self._parts()[0]
        return {"F16": (dt.float16,), "BF16": (dt.bfloat16, dt.float32), "F64": (dt.float64,)}.get(lhs, (dt.float32,))

    supported_rhs_types = supported_lhs_types

    @property
    def accumulation_type(self):
        if self is DotAlgorithmPreset.DEFAULT or self.name.startswith("ANY_F8"):
            return None
        return {"F16": dt.float16, "BF16": dt.bfloat16, "F64": dt.float64}.get(self._parts()[1], dt.float32)


@param_type
class DotAlgorithm(typing.NamedTuple):
    """An explicit dot algorithm, given as ``precision=``: the types the operands are rounded to,
    the accumulation type, how many components each operand is split into and how many products
    are taken (1, 1, 1 without decomposition), and whether accumulation may be less precise.
    XLA's CPU backend implements none beyond the presets, so lowering one for CPU raises."""
    lhs_precision_type: typing.Any
    rhs_precision_type: typing.Any
    accumulation_type: typing.Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False

    def _canonical(self) -> "DotAlgorithm":
        """The same algorithm with numpy dtypes (as the IR prints and parses them)."""
        return self._replace(lhs_precision_type=np.dtype(self.lhs_precision_type),
                             rhs_precision_type=np.dtype(self.rhs_precision_type),
                             accumulation_type=np.dtype(self.accumulation_type))


# The presets XLA's CPU backend implements (it would silently ignore the others, so they are refused).
_CPU_PRESETS = {DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.F16_F16_F16, DotAlgorithmPreset.F32_F32_F32,
                DotAlgorithmPreset.F64_F64_F64, DotAlgorithmPreset.BF16_BF16_F32,
                DotAlgorithmPreset.BF16_BF16_F32_X3, DotAlgorithmPreset.BF16_BF16_F32_X6}


# Type aliases, as JAX names them.
PrecisionLike = typing.Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision]]
DotDimensionNumbers = tuple[tuple[typing.Sequence[int], typing.Sequence[int]],
                            tuple[typing.Sequence[int], typing.Sequence[int]]]

_PRECISION_STRINGS = {"highest": "HIGHEST", "float32": "HIGHEST", "high": "HIGH", "bfloat16_3x": "HIGH",
                      "tensorfloat32": "HIGH", "default": "DEFAULT", "bfloat16": "DEFAULT",
                      "fastest": "DEFAULT"}


def canonicalize_precision(precision):
    """None, a DotAlgorithmPreset (or its name), a DotAlgorithm, or one Precision per operand: a
    single value (enum or string) applies to both."""
    if precision is None or isinstance(precision, DotAlgorithmPreset):
        return precision
    if isinstance(precision, DotAlgorithm):
        return precision._canonical()
    if isinstance(precision, str) and precision in _PRECISION_STRINGS:
        return Precision(precision), Precision(precision)
    if isinstance(precision, str) and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    if isinstance(precision, Precision):
        return precision, precision
    if isinstance(precision, (list, tuple)) and len(precision) == 2:
        if all(isinstance(p, Precision) for p in precision):
            return tuple(precision)
        if all(isinstance(p, str) and p in _PRECISION_STRINGS for p in precision):
            return tuple(Precision(p) for p in precision)
    raise ValueError("Precision argument must be one of:\n- None,\n"
                     f"- a string in {list(_PRECISION_STRINGS)},\n- a lax.Precision value,\n"
                     "- a tuple of two lax.Precision values or strings,\n"
                     "- a lax.DotAlgorithmPreset or the name of one of these presets, or\n"
                     f"- a lax.DotAlgorithm value;\nbut got {precision}.")


dot_general_p.def_params(
    dimension_numbers=Tuple(Tuple(DIMS, length=2), length=2),   # ((lhs, rhs) contract, (lhs, rhs) batch)
    precision=OneOf(None, Enum(Precision), Tuple(Enum(Precision), length=2), Enum(DotAlgorithmPreset),
                    Record(DotAlgorithm, lhs_precision_type=DType(), rhs_precision_type=DType(),
                           accumulation_type=DType(), lhs_component_count=Int(1), rhs_component_count=Int(1),
                           num_primitive_operations=Int(1), allow_imprecise_accumulation=Bool())),
    preferred_element_type=OneOf(None, DType()))


# --------------------------------------------------------------- builders


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, out_sharding=None):
    """Contract ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    Result dimensions: batch, lhs free, rhs free. ``precision`` is kept as a pair (one per
    operand) and reaches XLA's precision_config, and the transposes carry it, as in JAX.
    ``out_sharding``: the result's layout; needed, as in JAX, when both operands split their
    contracting dimensions alike (the result could be summed whole or left split).
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((ints(lc), ints(rc)), (ints(lb), ints(rb)))
    if out_sharding is None:
        _check_unambiguous(aval(lhs), aval(rhs), dn[0])
    return out_sharding_of(dot_general_unchecked(lhs, rhs, dn, precision, preferred_element_type), out_sharding,
                           "dot_general")


def dot_general_unchecked(lhs, rhs, dn, precision, preferred_element_type):
    """``dot_general`` without the check that a split contraction names its ``out_sharding``
    (transposes, and einsum's steps when its own ``out_sharding`` is given)."""
    pet = None if preferred_element_type is None else dt.canonicalize_dtype(preferred_element_type)
    if precision is None:          # jaxprc.default_matmul_precision, if set
        precision = dt.config.jax_default_matmul_precision
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=canonicalize_precision(precision),
                              preferred_element_type=pet)


def _check_unambiguous(lhs, rhs, contracting) -> None:
    ls = [st.dims(lhs)[d] for d in contracting[0]]
    rs = [st.dims(rhs)[d] for d in contracting[1]]
    if ls == rs and any(ls):
        spec = lambda d: tuple(None if not a else a[0] if len(a) == 1 else a for a in d)
        raise st.ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please "
            f"specify the output sharding via the `out_sharding` parameter. Got lhs_contracting_spec={spec(ls)} "
            f"and rhs_contracting_spec={spec(rs)}")


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None, out_sharding=None):
    """Vector/matrix products: contracts lhs's last dimension with rhs's first (ranks 1 or 2),
    or ``dot_general`` when ``dimension_numbers`` is given. Options are keyword-only, as in JAX 0.10."""
    if dimension_numbers is None:
        ls, rs = aval(lhs).shape, aval(rhs).shape
        ln, rn = len(ls), len(rs)
        sizes_differ = ln and rn and isinstance(ls[-1], int) and isinstance(rs[0], int) and ls[-1] != rs[0]
        if ln not in (1, 2) or rn not in (1, 2) or sizes_differ:      # JAX's error
            raise ValueError("jax.lax.dot: dimension_numbers must be specified when not performing simple "
                             "un-batched matrix-matrix, matrix-vector, or vector-vector products; got "
                             f"lhs_shape={tuple(ls)} rhs_shape={tuple(rs)}")
        dimension_numbers = (((ln - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, out_sharding)


# -------------------------------------------------------------------- jvp

ad.defjvp_bilinear(dot_general_p)


# -------------------------------------------------------------- transpose

def _dot_general_transpose(ct, x, y, *, dimension_numbers, precision, preferred_element_type):
    if isinstance(ct, ad.Zero):
        return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None,
                ad.Zero(y.aval) if ad.is_undefined_primal(y) else None]
    if ad.is_undefined_primal(x) and ad.is_undefined_primal(y):
        raise ValueError("transpose of dot_general: both operands are linear")
    (xc, yc), (xb, yb) = dimension_numbers
    if ad.is_undefined_primal(x):
        return [_dot_transpose_lhs(ct, x.aval, y, xc, yc, xb, yb, False, precision, preferred_element_type), None]
    return [None, _dot_transpose_lhs(ct, y.aval, x, yc, xc, yb, xb, True, precision, preferred_element_type)]


def _dot_transpose_lhs(ct, x_aval, y, xc, yc, xb, yb, swapped, precision, preferred_element_type):
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
    # no ambiguity check: the cotangent takes the primal's sharding, as in JAX
    out = dot_general_unchecked(ct, y, dims, precision, preferred_element_type)
    x_contract_by_y = [xc[i] for i in np.argsort(yc)]
    perm = tuple(int(i) for i in np.argsort(list(xb) + x_free + x_contract_by_y))
    out = lax.transpose(out, perm)
    if out.dtype != x_aval.dtype:
        out = lax.convert_element_type(out, x_aval.dtype)
    return match_type_sharding(out, x_aval)


ad.primitive_transposes[dot_general_p] = _dot_general_transpose


# --------------------------------------------------------------- batching

def _dot_general_batch_rule(args, dims, *, dimension_numbers, **params):
    (lhs, rhs), (ld, rd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if ld is not None and rd is not None:     # a new batch dimension, first in the result
        lc, lb, rc, rb = shift(lc, ld), (ld, *shift(lb, ld)), shift(rc, rd), (rd, *shift(rb, rd))
        out_dim = 0
    elif ld is not None:                      # a free lhs dimension
        lc, lb = shift(lc, ld), shift(lb, ld)
        free = [i for i in range(aval_of(lhs).ndim) if i not in lc and i not in lb]
        out_dim = len(lb) + free.index(ld)
    else:                                     # a free rhs dimension, after the lhs ones
        rc, rb = shift(rc, rd), shift(rb, rd)
        free = [i for i in range(aval_of(rhs).ndim) if i not in rc and i not in rb]
        lhs_free = aval_of(lhs).ndim - len(lc) - len(lb)
        out_dim = len(lb) + lhs_free + free.index(rd)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)), **params)
    return out, out_dim


batching.primitive_batchers[dot_general_p] = _dot_general_batch_rule


# --------------------------------------------------------------- lowering

def _precision_attr(precision):
    if precision is None:
        return None
    if isinstance(precision, (DotAlgorithmPreset, DotAlgorithm)):
        precision = Precision.DEFAULT
    pair = precision if isinstance(precision, tuple) else (precision, precision)
    return ir.ArrayAttr.get([hlo.PrecisionAttr.get(param_name(p).split(".")[-1]) for p in pair])


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None,
                          **_):
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    dnums = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contract), rhs_contracting_dimensions=list(rhs_contract))
    out_aval = ctx.avals_out[0]
    lhs_aval, rhs_aval = ctx.avals_in
    if out_aval.dtype == dt.bool_:         # XLA has no boolean dot: compute in int32, then test nonzero
        i32 = lambda v, a: hlo.convert(mlir.aval_to_ir_type(a.update(dtype=dt.int32)), v)
        prod = hlo.dot_general(mlir.aval_to_ir_type(out_aval.update(dtype=dt.int32)), i32(lhs, lhs_aval),
                               i32(rhs, rhs_aval), dnums)
        return mlir.compare(prod, mlir.full(out_aval.shape, 0, dt.int32), "NE", dt.int32)
    if isinstance(precision, (DotAlgorithmPreset, DotAlgorithm)):
        return _preset_dot(ctx, lhs, rhs, dnums, precision)
    return hlo.dot_general(mlir.aval_to_ir_type(out_aval), lhs, rhs, dnums,
                           precision_config=_precision_attr(precision))


def _compute_type(dtype, supported):
    return dtype if supported is None or dtype in supported else supported[0]


def _preset_dot(ctx, lhs, rhs, dnums, preset):
    """A dot with an algorithm (a preset or a DotAlgorithm): operands converted to its storage
    types, accumulated in its accumulation type (or the output's, when that is one the preset
    allows), converted back."""
    if ctx.platform == "cpu" and preset not in _CPU_PRESETS:
        raise ValueError(f"The precision '{preset}' is not supported by dot_general on CPU")
    if isinstance(preset, DotAlgorithm):
        return _algorithm_dot(ctx, lhs, rhs, dnums, preset)
    (lhs_aval, rhs_aval), out_aval = ctx.avals_in, ctx.avals_out[0]
    lt = _compute_type(lhs_aval.dtype, preset.supported_lhs_types)
    rt = _compute_type(rhs_aval.dtype, preset.supported_rhs_types)
    if preset is DotAlgorithmPreset.BF16_BF16_F32 and lt == rt == dt.bfloat16:
        acc = _compute_type(out_aval.dtype, (dt.float32, dt.bfloat16))
    else:
        acc = out_aval.dtype if preset.accumulation_type is None else preset.accumulation_type
    lhs, rhs = _convert(lhs, lhs_aval, lt), _convert(rhs, rhs_aval, rt)
    algorithm = None
    if preset is not DotAlgorithmPreset.DEFAULT:
        lhs_acc, _, passes = preset._parts()
        ir_type = {"F16": ir.F16Type, "BF16": ir.BF16Type, "F32": ir.F32Type, "F64": ir.F64Type,
                   "TF32": ir.FloatTF32Type}
        acc_ir = ir_type[preset._parts()[1]].get()
        algorithm = hlo.DotAlgorithm.get(ir_type[lhs_acc].get(), ir_type[lhs_acc].get(), acc_ir, 1, 1, passes, False)
    out = hlo.dot_general(mlir.aval_to_ir_type(out_aval.update(dtype=acc)), lhs, rhs, dnums,
                          precision_config=_precision_attr(preset), algorithm=algorithm)
    return _convert(out, out_aval.update(dtype=acc), out_aval.dtype)


def _convert(value, aval, dtype):
    return value if aval.dtype == dtype else hlo.convert(mlir.aval_to_ir_type(aval.update(dtype=dtype)), value)


def _algorithm_dot(ctx, lhs, rhs, dnums, algorithm):
    (lhs_aval, rhs_aval), out_aval = ctx.avals_in, ctx.avals_out[0]
    lt, rt, acc = algorithm.lhs_precision_type, algorithm.rhs_precision_type, algorithm.accumulation_type
    attr = hlo.DotAlgorithm.get(mlir.dtype_to_ir_type(lt), mlir.dtype_to_ir_type(rt), mlir.dtype_to_ir_type(acc),
                                algorithm.lhs_component_count, algorithm.rhs_component_count,
                                algorithm.num_primitive_operations, algorithm.allow_imprecise_accumulation)
    out = hlo.dot_general(mlir.aval_to_ir_type(out_aval.update(dtype=acc)), _convert(lhs, lhs_aval, lt),
                          _convert(rhs, rhs_aval, rt), dnums, precision_config=_precision_attr(algorithm),
                          algorithm=attr)
    return _convert(out, out_aval.update(dtype=acc), out_aval.dtype)


mlir.register_lowering(dot_general_p, _dot_general_lowering)


# ---------------------------------------------------------- jet (Taylor series)
jet.defbilinear(dot_general_p)
