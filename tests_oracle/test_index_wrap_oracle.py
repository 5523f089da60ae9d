"""``x.at[idx].<method>(..., wrap_negative_indices=False)`` against JAX: negative indices are out
of bounds instead of counting from the end (clamped to 0 in "clip" mode, dropped by updates and
filled by ``get(mode="fill")``), for static integers, integer arrays and traced indices."""
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp

INDICES = {
    "ints": (1, -1),
    "two_negative_ints": (-1, -2),
    "array": (slice(None), np.array([-1, 2, -5, -6])),
    "traced_array": (0, "traced"),
    "ellipsis": (..., -2),
    "new_axis": (None, -1, 1),
}
METHODS = ["get", "set", "add", "multiply", "min", "max", "subtract", "divide", "power", "apply"]


def _call(np_, idx_name, method, mode, wrap):
    x = np_.arange(10.0).reshape(2, 5)
    idx = INDICES[idx_name]
    if idx_name == "traced_array":
        idx = (idx[0], np_.array([-1, 3, -2]))
    ref = x.at[idx]
    if method == "get":
        return ref.get(mode=mode, wrap_negative_indices=wrap)
    if method == "apply":
        return ref.apply(np_.sin, mode=mode, wrap_negative_indices=wrap)
    return getattr(ref, method)(3.0, mode=mode, wrap_negative_indices=wrap)


@pytest.mark.parametrize("method", METHODS)
def test_wrap_negative_indices_matches_jax(method):
    modes = [None, "clip", "fill"] if method == "get" else [None, "clip", "drop"]
    for idx_name in INDICES:
        for mode in modes:
            theirs = _call(jnp, idx_name, method, mode, False)
            ours = _call(xnp, idx_name, method, mode, False)
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6,
                                       err_msg=f"{method} {idx_name} mode={mode}")


def test_wrap_negative_indices_under_jit_matches_numpy():
    """Independent of JAX: with wrap_negative_indices=False a traced -1 is dropped by .set and
    clamped to index 0 by a clipping .get."""
    f = jaxprc.jit(lambda x, i: (x.at[i].set(9.0, wrap_negative_indices=False),
                                 x.at[i].get(mode="clip", wrap_negative_indices=False)))
    x = np.arange(4.0, dtype=np.float32)
    updated, got = f(x, np.array([-1, 2]))
    np.testing.assert_array_equal(updated, [0.0, 1.0, 9.0, 3.0])
    np.testing.assert_array_equal(got, [0.0, 2.0])
