"""Loop bounds and lengths against JAX: a bound or trip count outside the loop counter's dtype
raises OverflowError (it used to wrap around: fori_loop(0, 2**32 + 3) ran 3 iterations),
float bounds are accepted, and non-concrete scan lengths raise ConcretizationTypeError."""
import jax
import numpy as np
import pytest

import jaxprc


def outcome(lib, fun):
    """What calling ``fun(lib)`` gives: ('ok', value, dtype) or ('error', exception type name)."""
    try:
        out = fun(lib)
    except Exception as e:  # noqa: BLE001 -- the error's type is what is compared
        return ("error", type(e).__name__)
    leaves = jax.tree_util.tree_leaves(out)
    return ("ok", [np.asarray(x).tolist() for x in leaves], [np.asarray(x).dtype.name for x in leaves])


def counting(lower, upper, init=0):
    return lambda lib: lib.lax.fori_loop(lower, upper, lambda i, c: c + 1, init)


def summing(lower, upper):
    return lambda lib: lib.lax.fori_loop(lower, upper, lambda i, c: c + i, 0.0)


def scan_length(length, unroll=1):
    return lambda lib: lib.lax.scan(lambda c, _: (c + 1, None), 0, None, length=length, unroll=unroll)


def jitted(make, *args):
    return lambda lib: lib.jit(lambda *a: make(*a)(lib))(*args)


CASES = {
    "fori_past_int32": counting(0, 2 ** 32 + 3),
    "fori_below_int32": counting(-2 ** 40, 3),
    "fori_float_bounds": summing(0.0, 3.0),
    "fori_float_truncated": summing(0.5, 2.5),
    "fori_float_empty": summing(2.5, 0.0),
    "fori_traced_float_bounds": jitted(summing, 0.5, 3.0),
    "fori_bool_bounds": counting(False, True),
    "fori_nan_bound": counting(0.0, float("nan")),
    "fori_inf_bound": counting(0.0, float("inf")),
    "fori_int_and_float": counting(0, 3.0),
    "fori_complex_bounds": counting(0j, 3j),
    "scan_past_int32": scan_length(2 ** 31 + 5),
    "scan_float_length": scan_length(3.0),
    "scan_traced_length": jitted(lambda n: scan_length(n), 3),
    "scan_traced_unroll": jitted(lambda u: scan_length(3, u), 3),
    "scan_negative_unroll": scan_length(3, -1),
    "scan_float_unroll": scan_length(3, 2.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loop_bounds_match_jax(case):
    assert outcome(jaxprc, CASES[case]) == outcome(jax, CASES[case])


@pytest.mark.x64
@pytest.mark.parametrize("case", ["fori_past_int32", "fori_below_int32", "scan_past_int32",
                                  "fori_float_bounds", "fori_traced_float_bounds"])
def test_loop_bounds_match_jax_x64(case):
    """With x64 the counter is int64: trip counts past int32 run in full (no wraparound)."""
    assert outcome(jaxprc, CASES[case]) == outcome(jax, CASES[case])


@pytest.mark.parametrize("which", ["length", "unroll"])
def test_non_concrete_scan_argument_is_a_concretization_error(which):
    make = (lambda n: scan_length(n)) if which == "length" else (lambda u: scan_length(3, u))
    with pytest.raises(jaxprc.errors.ConcretizationTypeError, match=f"`{which}` argument to `scan`"):
        jitted(make, 3)(jaxprc)
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jitted(make, 3)(jax)
