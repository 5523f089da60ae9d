"""jaxprc.ffi vs jax.ffi: the lowered custom call (attributes, layouts, aliases, side effects,
batched calls) is the same text. Lowering only: the target is registered but never run."""
import jax
import numpy as np
import pytest

import jaxprc

TARGET = "jaxprc_oracle_ffi_target"


@pytest.fixture(scope="module", autouse=True)
def _registered():
    from jaxlib import lapack
    _, capsule, _ = lapack.registrations()["cpu"][0]     # any handler: the programs are not run
    jaxprc.ffi.register_ffi_target(TARGET, capsule, platform="cpu")


X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _cases(lib):
    S = lib.ShapeDtypeStruct
    one = lib.ffi.ffi_call(TARGET, S((2, 3), np.float32))
    two = lib.ffi.ffi_call(TARGET, (S((2, 3), np.float32), S((), np.int32)), has_side_effect=True,
                           input_output_aliases={0: 0})
    laid = lib.ffi.ffi_call(TARGET, S((2, 3), np.float32), input_layouts=[(1, 0)], output_layouts=(1, 0))

    def batched(method):
        f = lib.ffi.ffi_call(TARGET, S((3,), np.float32), vmap_method=method)
        return lambda x: lib.vmap(lambda r: f(r, r[0:1]))(x)
    return {
        "attributes": lambda x: one(x, a=1, b=2.5, c=np.float32(3), d="text", e=np.arange(3, dtype=np.int32),
                                    t=True, u=np.uint8(4), z=np.zeros((2, 2), np.float64)),
        "two_results_side_effect_alias": lambda x: two(x)[1],
        "layouts": lambda x: laid(x),
        "broadcast_all": batched("broadcast_all"),
        "expand_dims": batched("expand_dims"),
        "legacy_vectorized": batched("legacy_vectorized"),
        "legacy_vectorized_unbatched_operand": lambda x: lib.vmap(
            lambda r: lib.ffi.ffi_call(TARGET, S((3,), np.float32), vmap_method="legacy_vectorized")(r, X[0]))(x),
    }


def _custom_calls(text):
    return [line.strip() for line in text.splitlines() if "custom_call" in line]


@pytest.mark.parametrize("name", list(_cases(jax)))
def test_lowered_custom_call_matches_jax(name):
    ours = _custom_calls(jaxprc.jit(_cases(jaxprc)[name]).lower(X).as_text())
    theirs = _custom_calls(jax.jit(_cases(jax)[name]).lower(X).as_text())
    assert ours and ours == theirs
