"""Systematic edge sweep: every public array function of jaxprc.numpy, jaxprc.nn,
jaxprc.scipy.special and jaxprc.lax against its JAX namesake, at the special points.

The functions are enumerated from the modules, so a new function joins the sweep by default: its
arity (one or two arrays) is found by asking JAX's namesake to trace on scalars. A function that
does not take one or two plain arrays must be named in ``SKIP`` with the reason; a name without a
JAX counterpart in ``NO_COUNTERPART``. Each function is applied point by point (``vmap`` over a
batch of scalar points; a few at a time for the functions in ``CHUNKED``) under ``jit`` in both
libraries, one compilation per function and library:

* float32 values at ±0, ±1, kinks (±1, 6, ±3 ...), tiny/huge magnitudes, ±inf, NaN; for binary
  functions the pairs of a smaller set (ties x == y included) and the ties of the full set;
* float16, bfloat16 and int32 values (the same points cast), and an empty array;
* first and second derivatives (``grad``, ``grad(grad)``; for binary functions both partials and
  the three second partials) at every float32 point;
* dtype and weak type of the result for weakly typed scalar arguments (``eval_shape``).

Tolerance policy: values and derivatives must agree BIT FOR BIT (sign of zero and NaN positions
included), both libraries lowering to the same XLA operations; the only exceptions are named in
``ULPS`` (a per-function ulp budget where the expression legitimately differs) and in
``KNOWN_DIFFERENCES`` (a listed difference with its reason). That both libraries reject an input
(an exception while tracing) counts as agreement; one rejecting and the other not is a difference.
A ``KNOWN_DIFFERENCES`` entry that no longer differs fails the test, so the table stays true.
"""
from __future__ import annotations

import jax
import jax.lax
import jax.nn
import jax.numpy as jnp
import jax.scipy.special
import types

import ml_dtypes
import numpy as np
import pytest

import jaxprc
import jaxprc.lax
import jaxprc.nn
import jaxprc.numpy
import jaxprc.scipy.special

MODULES = {"numpy": (jax.numpy, jaxprc.numpy), "nn": (jax.nn, jaxprc.nn),
           "scipy.special": (jax.scipy.special, jaxprc.scipy.special), "lax": (jax.lax, jaxprc.lax)}

# ---------------------------------------------------------------------------------- the points
_P = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 6.0, -6.0, 1.5, -1.5, 2.5, -2.5,
      0.25, 0.75, -0.75, 1 / 3, 0.1, 1e-3, -1e-3, 1e-7, -1e-7, 1e-30, -1e-30, 1e-40, -1e-40,
      10.0, -10.0, 20.0, -20.0, 50.0, -50.0, 88.5, 89.0, -88.5, -104.0, 100.0, 1e4, -1e4,
      1e10, -1e10, 1e30, -1e30, 3.4e38, -3.4e38, np.pi / 2, -np.pi / 2, np.pi,
      0.99999994, 1.0000001, np.inf, -np.inf, np.nan]
POINTS = np.array(_P, np.float32)
_S = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, 1e-40, 1e30, -1e30,
               np.inf, -np.inf, np.nan], np.float32)
PAIRS = (np.concatenate([np.repeat(_S, len(_S)), POINTS]),
         np.concatenate([np.tile(_S, len(_S)), POINTS]))
_I = np.array([0, 1, -1, 2, -2, 3, -3, 5, -7, 31, 32, 100, -100, 2**31 - 1, -2**31], np.int32)
IPOINTS = _I
IPAIRS = (np.repeat(_I, len(_I)), np.tile(_I, len(_I)))
LOW = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}

# ---------------------------------------------------------------------------------- the tables
_NEEDS_FN = "takes a function"
_STATIC = "needs a static (shape, axis, index, dtype or count) argument"
_META = "dtype or shape utility, not an array function"
_STRUCT = "needs index / dimension-number structures"
_SHAPE = "needs a shape or size argument"
_RANK = "needs an operand of rank >= 1 (or 2): swept in test_numpy_oracle / test_edges_oracle"
_SEQ = "takes a sequence of arrays"
_THREE = "takes three or more arrays"


def _table(**groups):
    return {name: reason for reason, names in groups.values() for name in names.split()}


SKIP = {
    "lax": _table(
        shape=(_SHAPE, "broadcast broadcast_in_dim broadcast_to_rank broadcasted_iota full iota "
                       "reshape pad expand_dims collapse squeeze transpose"),
        static=(_STATIC, "argmax argmin bitcast_convert_type convert_element_type cumlogsumexp "
                         "cummax cummin cumprod cumsum dynamic_index_in_dim dynamic_slice "
                         "dynamic_slice_in_dim dynamic_update_index_in_dim dynamic_update_slice "
                         "dynamic_update_slice_in_dim index_in_dim integer_pow reduce_and reduce_max "
                         "reduce_min reduce_or reduce_prod reduce_sum reduce_xor rev slice "
                         "slice_in_dim"),
        rank=(_RANK, "dot dot_general sort sort_key_val"),
        seq=(_SEQ, "concatenate"), three=(_THREE, "clamp select"),
        complex=("complex operands only (not swept: no complex points)", "real imag")) | {
        "cond": _NEEDS_FN, "fori_loop": _NEEDS_FN, "map": _NEEDS_FN, "scan": _NEEDS_FN,
        "switch": _NEEDS_FN, "while_loop": _NEEDS_FN,
        "GatherDimensionNumbers": _STRUCT, "ScatterDimensionNumbers": _STRUCT, "gather": _STRUCT,
        "scatter": _STRUCT, "scatter_add": _STRUCT, "scatter_max": _STRUCT, "scatter_min": _STRUCT,
        "scatter_mul": _STRUCT, "GatherScatterMode": _META, "Precision": _META,
        "RoundingMethod": _META,
    },
    "numpy": {n: _META for n in ("broadcast_shapes", "can_cast", "finfo", "iinfo", "isdtype",
                                 "isscalar", "issubdtype", "ndim", "promote_types", "result_type",
                                 "shape", "size")} | _table(
        shape=(_SHAPE, "arange empty eye full identity ones tri zeros broadcast_to reshape "
                       "expand_dims moveaxis permute_dims swapaxes matrix_transpose pad repeat "
                       "tile"),
        static=(_STATIC, "array_split astype hsplit split vsplit take_along_axis tensordot einsum "
                         "searchsorted"),
        rank=(_RANK, "argsort argwhere cumulative_prod cumulative_sum diag diagonal diff fliplr "
                     "flipud flatnonzero matmul nonzero sort trace tril triu unstack vecdot "
                     "meshgrid"),
        seq=(_SEQ, "column_stack concat concatenate dstack hstack stack vstack"),
        three=(_THREE, "select where"),
        host=("a host printing or file helper (and JAX's eval_shape of it crashes the process)",
              "array_repr array_str save savez"),
        hangs=("JAX's loop never ends at iinfo.min (compared in test_numpy_more_oracle away from it)",
               "gcd lcm")),
    "nn": _table(rank=(_RANK, "log_softmax softmax standardize"), static=(_STATIC, "one_hot")),
    # expit and logit are swept here; the rest of jax.scipy.special is compared with JAX at
    # ordinary points and tails in test_special_oracle.py: several of JAX's series loops (expn,
    # exp1, expi, ...) never end at this sweep's points (inf, NaN, +-3.4e38).
    "scipy.special": {n: "swept in test_special_oracle.py (JAX's series loops hang at these points)"
                      for n in dir(jaxprc.scipy.special)
                      if not n.startswith("_") and n not in ("expit", "logit")
                      and not isinstance(getattr(jaxprc.scipy.special, n), types.ModuleType)},
}
# Functions of the families added later that take functions, shapes, sizes, index or dimension
# structures, several arrays or static arguments: each family's own oracle file compares them.
_OWN_ORACLE = "takes functions, shapes, sizes or structures: compared in its family's oracle file"
SKIP["numpy"] |= dict.fromkeys((
    "apply_along_axis apply_over_axes argpartition bartlett bincount blackman choose compress "
    "convolve correlate cross delete diag_indices diag_indices_from digitize dsplit "
    "einsum_path extract fill_diagonal from_dlpack frombuffer fromfile fromfunction fromiter "
    "frompyfunc fromstring get_printoptions gradient hamming hanning histogram2d histogramdd "
    "indices insert interp intersect1d ix_ kaiser lexsort load mask_indices matvec partition "
    "piecewise place polyadd polyder polydiv polyfit polyint polymul polysub polyval "
    "printoptions put put_along_axis ravel_multi_index resize rollaxis rot90 set_printoptions "
    "setdiff1d setxor1d sort_complex trapezoid tril_indices tril_indices_from trim_zeros "
    "triu_indices triu_indices_from union1d unique unique_all unique_counts unique_inverse "
    "unique_values unpackbits unwrap vander vecmat").split(), _OWN_ORACLE)
SKIP["numpy"] |= dict.fromkeys(("float6_e2m3fn", "float6_e3m2fn"),
                                "JAX aborts the process converting to it (XLA holds no float6 arrays); "
                                "jaxprc raises a TypeError (tests/test_narrow_dtypes.py)")
SKIP["lax"] |= {"after_all": "takes tokens", "create_token": "takes no array (makes a token)",
                "dim_as_value": "takes a dimension, not an array (compared in test_shape_poly_oracle.py)",
                "pbroadcast": "needs a mesh axis name (compared in test_pmap_oracle.py)",
                "pcast": "needs a mesh axis name (compared in test_pmap_oracle.py)",
                **dict.fromkeys(["pshuffle", "pswapaxes", "ragged_all_to_all"],
                                "needs a mesh axis name (compared in test_collectives2_oracle.py)"),
                "shape_as_value": "takes a shape, not an array (compared in test_narrow_dtypes_oracle.py)"}
SKIP["nn"] |= dict.fromkeys((
    "dot_product_attention get_scaled_dot_general_config glu scaled_dot_general scaled_matmul").split(), _OWN_ORACLE)
SKIP["lax"] |= dict.fromkeys((
    "ConvGeneralDilatedDimensionNumbers DotDimensionNumbers PrecisionLike all_gather "
    "all_to_all approx_max_k approx_min_k associative_scan axis_index axis_size batch_matmul "
    "betainc broadcast_shapes composite conv conv_dimension_numbers conv_general_dilated "
    "conv_general_dilated_local conv_general_dilated_patches conv_general_permutations "
    "conv_general_shape_tuple conv_shape_tuple conv_transpose conv_transpose_shape_tuple "
    "conv_with_general_padding custom_linear_solve custom_root dtype empty fft index_take "
    "padtype_to_pads platform_dependent pmax pmean pmin ppermute psum psum_scatter ragged_dot "
    "ragged_dot_general reduce reduce_precision reduce_window reduce_window_shape_tuple "
    "rng_bit_generator rng_uniform scaled_dot scatter_apply scatter_sub split stack tile "
    "top_k unstack with_sharding_constraint").split(), _OWN_ORACLE)
# Names exported by jaxprc modules that are not JAX API (module aliases kept for the front ends).
NO_COUNTERPART = {
    "numpy": {"fix", "float0"},
    "lax": {"CheckpointPolicy", "checkpoint_p", "custom_jvp_call_jaxpr_p", "custom_lin_p",
            "custom_vjp_call_jaxpr_p", "jit_p", "name_p", "zeros_like_array"},
    "nn": set(),
    "scipy.special": set(),
}
# Functions whose XLA expansion iterates a series until every element of the batch has converged:
# at a few points (ties a == x with a + 1 == a, e.g. 1e30) that takes ~2**23 iterations, each over
# the whole batch (a minute per check). Their points go through ``vmap`` a few at a time (chunks
# of at most CHUNK under ``lax.map``), so only the chunk holding such a point pays for it.
CHUNKED = {"lax.igamma", "lax.igamma_grad_a", "lax.random_gamma_grad"}
CHUNK = 8
# Per-function ulp budgets (float32 values and derivatives), where the two expressions differ.
ULPS: dict[str, int] = {}
# (qualified name, check) -> reason. Checks: f32, f16, bf16, i32, empty, d1, d2, weak.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ('numpy.int1', 'all'):
        'StableHLO has no 1-bit integers (only the boolean i1): jaxprc refuses int1 arithmetic with a '
        'clear TypeError in lowering; JAX computes in it on CPU',
    ('numpy.uint1', 'all'):
        'both refuse it under jit, with other messages (JAX: an MLIR verifier error on ui1; jaxprc: '
        'no StableHLO element type for uint1)',
    ('numpy.frexp', 'bf16'):
        "JAX is wrong on subnormals: it returns (x, 0) for 1e-40, so m is outside [0.5, 1); jaxprc "
        "gives numpy's exact (0.5, -132) with m * 2**e == x (tests/test_numpy_more.py frexp_exact)",
    ('numpy.frexp', 'f32'):
        "JAX is wrong on subnormals: it returns (0.5, -149) for every one (m * 2**e is 2**-150, not "
        "x); jaxprc gives numpy's exact decomposition, m * 2**e == x (tests/test_numpy_more.py frexp_exact)",
    ('numpy.pow', 'i32'):
        'jnp.pow is jnp.power (the same function): integer x ** negative integer: JAX returns wrapped garbage (2**-100 = 268435456, 3**-1 = 2111105451), jaxprc 1 / x**n truncated toward zero (0 unless |x| == 1)',
    ('numpy.spacing', 'd1'):
        'JAX has no derivative rule for spacing (NotImplementedError); spacing is constant on each binade, jaxprc gives its derivative 0',
    ('numpy.spacing', 'd2'):
        'JAX has no derivative rule for spacing (NotImplementedError); spacing is constant on each binade, jaxprc gives its derivative 0',
    ('lax.asinh', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('lax.atan', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('lax.erf', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('lax.erfc', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('lax.nextafter', 'd1'):
        'JAX has no derivative rule for nextafter (NotImplementedError); jaxprc gives one',
    ('lax.nextafter', 'd2'):
        'JAX has no derivative rule for nextafter (NotImplementedError); jaxprc gives one',
    ('numpy.arcsinh', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('numpy.arctan', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('numpy.asinh', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('numpy.atan', 'd2'):
        'JAX NaN at ±3.4e38 (x*x overflows), jaxprc the mathematically correct ±0',
    ('numpy.nextafter', 'd1'):
        'JAX has no derivative rule for nextafter (NotImplementedError); jaxprc gives one',
    ('numpy.nextafter', 'd2'):
        'JAX has no derivative rule for nextafter (NotImplementedError); jaxprc gives one',
    ('numpy.power', 'i32'):
        'integer x ** negative integer: JAX returns wrapped garbage (2**-100 = 268435456, 3**-1 = 2111105451), jaxprc 1 / x**n truncated toward zero (0 unless |x| == 1)',
}


# ---------------------------------------------------------------------------------- enumeration
def _public(module):
    """Public names other than submodules (jaxprc's family modules have no namesakes in JAX)."""
    return sorted(n for n in dir(module)
                  if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType))


def _arity(jfn):
    """1 or 2 if JAX's function traces on that many scalar arrays (float32, else int32)."""
    for dtype in (np.float32, np.int32):
        for n in (1, 2):
            try:
                out = jax.eval_shape(jfn, *[jax.ShapeDtypeStruct((), dtype)] * n)
            except Exception:
                continue
            leaves = jax.tree_util.tree_leaves(out)
            if leaves and all(isinstance(o, jax.ShapeDtypeStruct) for o in leaves):
                return n
    return None


def _enumerate():
    swept, unswept = [], []
    for mod_name, (jmod, xmod) in MODULES.items():
        for name in _public(xmod):
            obj = getattr(xmod, name)
            if name in NO_COUNTERPART[mod_name] or name in SKIP[mod_name]:
                continue
            if not callable(obj) or isinstance(obj, type):      # dtypes and classes: no functions
                continue
            arity = _arity(getattr(jmod, name)) if hasattr(jmod, name) else None
            (swept if arity else unswept).append((f"{mod_name}.{name}", arity))
    return swept, unswept


SWEPT, UNSWEPT = _enumerate()


# ---------------------------------------------------------------------------------- evaluation
def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception as e:       # noqa: BLE001  (a rejection is a result to compare)
        return f"rejected: {type(e).__name__}"


def _chunked_vmap(lib, f):
    """``vmap(f)`` applied CHUNK points at a time (at most; a divisor of the batch) under ``lax.map``."""
    tree = jax.tree_util if lib is jax else jaxprc.tree_util

    def run(*xs):
        n = xs[0].shape[0]
        k = max(d for d in range(1, CHUNK + 1) if n % d == 0)
        ys = lib.lax.map(lambda c: lib.vmap(f)(*c), tuple(lib.numpy.reshape(x, (n // k, k)) for x in xs))
        return tree.tree_map(lambda y: lib.numpy.reshape(y, (n,) + y.shape[2:]), ys)
    return run


def _runner(lib, fn, arity, chunked=False):
    """One jitted function computing every check of the sweep for ``fn`` in ``lib``."""
    grad = lib.grad
    vmap = (lambda f: _chunked_vmap(lib, f)) if chunked else lib.vmap
    argnums = tuple(range(arity))

    def second(x, *rest):
        g = grad(fn, argnums)
        if arity == 1:
            return vmap(grad(lambda *a: g(*a)[0]))(x)
        return (vmap(grad(lambda *a: g(*a)[0], (0, 1)))(x, *rest),
                vmap(grad(lambda *a: g(*a)[1], 1))(x, *rest))

    def run(f32, f16, bf16, i32, empty):
        out, rejected = {}, {}
        for key, args in (("f32", f32), ("f16", f16), ("bf16", bf16), ("i32", i32)):
            out[key] = _safe(vmap(fn), *args)
        out["empty"] = _safe(fn, *empty)
        out["d1"] = _safe(vmap(grad(fn, argnums)), *f32)
        out["d2"] = _safe(second, *f32)
        for key in list(out):
            if isinstance(out[key], str):
                rejected[key] = out.pop(key)
        run.rejected = rejected
        return out
    return run


def _inputs(arity):
    f32 = PAIRS if arity == 2 else (POINTS,)
    i32 = IPAIRS if arity == 2 else (IPOINTS,)
    return (f32, tuple(a.astype(LOW["f16"]) for a in f32), tuple(a.astype(LOW["bf16"]) for a in f32),
            i32, (np.zeros((0,), np.float32),) * arity)


def _evaluate(lib, fn, arity, chunked=False):
    run = _runner(lib, fn, arity, chunked)
    args = _inputs(arity)
    try:
        out = lib.jit(run)(*args)
    except Exception as e:       # noqa: BLE001
        return {}, {"all": f"rejected under jit: {type(e).__name__}: {e}"}
    tree = jax.tree_util if lib is jax else jaxprc.tree_util
    leaves = {k: [np.asarray(v) for v in tree.tree_leaves(val)] for k, val in out.items()}
    return leaves, run.rejected


def _weak(lib, fn, arity):
    tree = jax.tree_util if lib is jax else jaxprc.tree_util
    res = []
    for scalar in (0.5, 3):
        try:
            out = lib.eval_shape(fn, *[scalar] * arity)
            res.append([(np.dtype(o.dtype).name, bool(o.weak_type)) for o in tree.tree_leaves(out)])
        except Exception as e:       # noqa: BLE001
            res.append("rejected")      # (the exception classes differ between the libraries)
    return res


def _ulps(a, b):
    """Distance in float32/16 ulps (as integers ordered like the floats)."""
    bits = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    ia, ib = a.view(bits).astype(np.int64), b.view(bits).astype(np.int64)
    ia = np.where(ia < 0, np.iinfo(bits).min - ia, ia)
    ib = np.where(ib < 0, np.iinfo(bits).min - ib, ib)
    return np.abs(ia - ib)


def _floating(dtype) -> bool:
    """numpy's floats and ml_dtypes' (bfloat16, float8_*, float4_*: numpy kind 'V')."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(("bfloat", "float")))


def _differs(expected, actual, ulps):
    """A description of how ``actual`` differs from ``expected``, or None."""
    if len(expected) != len(actual):
        return f"{len(expected)} vs {len(actual)} outputs"
    for e, a in zip(expected, actual):
        if e.dtype != a.dtype or e.shape != a.shape:
            return f"{e.dtype}{list(e.shape)} vs {a.dtype}{list(a.shape)}"
        if e.dtype.kind == "c":         # complex: compare the (real, imag) float pairs
            e, a = e.view(np.float32 if e.dtype == np.complex64 else np.float64), \
                a.view(np.float32 if a.dtype == np.complex64 else np.float64)
        if not _floating(e.dtype) and not _floating(a.dtype):
            bad = e != a
        else:
            ef, af = e.astype(np.float32), a.astype(np.float32)
            bad = (np.isnan(ef) != np.isnan(af)) | (np.signbit(ef) != np.signbit(af)) & ~np.isnan(ef)
            same_nan = np.isnan(ef) & np.isnan(af)
            if ulps and e.dtype == np.float32:
                bad |= (_ulps(ef, af) > ulps) & ~same_nan & ~(np.isinf(ef) & (ef == af))
            else:
                bad |= (ef != af) & ~same_nan
        if np.any(bad):
            idx = np.flatnonzero(bad.reshape(-1))[:3]
            return "at flat %s: jax %s, jaxprc %s" % (idx.tolist(), e.reshape(-1)[idx].tolist(),
                                                     a.reshape(-1)[idx].tolist())
    return None


def _differences(qualname, arity):
    mod_name, name = qualname.rsplit(".", 1)
    jmod, xmod = MODULES[mod_name]
    jfn, xfn = getattr(jmod, name), getattr(xmod, name)
    chunked = qualname in CHUNKED
    (jout, jrej), (xout, xrej) = _evaluate(jax, jfn, arity, chunked), _evaluate(jaxprc, xfn, arity, chunked)
    found = {}
    if "all" in jrej or "all" in xrej:
        if jrej.get("all") != xrej.get("all"):
            found["all"] = f"jax {jrej.get('all', 'ok')}, jaxprc {xrej.get('all', 'ok')}"
        return found
    for check in ("f32", "f16", "bf16", "i32", "empty", "d1", "d2"):
        if (check in jrej) != (check in xrej):
            found[check] = f"jax {jrej.get(check, 'accepts')}, jaxprc {xrej.get(check, 'accepts')}"
        elif check in jout:
            why = _differs(jout[check], xout[check], ULPS.get(qualname, 0))
            if why:
                found[check] = why
    jweak, xweak = _weak(jax, jfn, arity), _weak(jaxprc, xfn, arity)
    if jweak != xweak:
        found["weak"] = f"jax {jweak}, jaxprc {xweak}"
    return found


# ---------------------------------------------------------------------------------- the tests
def test_every_public_function_is_swept_or_skipped_with_a_reason():
    assert not UNSWEPT, f"neither swept (JAX's namesake takes no 1 or 2 arrays) nor in SKIP: {UNSWEPT}"
    for mod_name, (jmod, xmod) in MODULES.items():
        public = set(_public(xmod))
        assert set(SKIP[mod_name]) <= public and NO_COUNTERPART[mod_name] <= public   # no stale names
        assert {n for n in NO_COUNTERPART[mod_name] if hasattr(jmod, n)} == set(), mod_name
    assert CHUNKED <= {q for q, _ in SWEPT}


@pytest.mark.sample(3)   # CI runs a fixed subset, JAXPRC_LONG_TESTS=1 all (conftest.py)
@pytest.mark.parametrize("qualname,arity", SWEPT, ids=[q for q, _ in SWEPT])
def test_edge_sweep(qualname, arity):
    found = _differences(qualname, arity)
    known = {check: why for (q, check), why in KNOWN_DIFFERENCES.items() if q == qualname}
    unexpected = {c: w for c, w in found.items() if c not in known}
    stale = sorted(set(known) - set(found))
    assert not unexpected, f"{qualname}: {unexpected}"
    assert not stale, f"{qualname}: listed in KNOWN_DIFFERENCES but agrees now: {stale}"
