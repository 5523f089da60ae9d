"""The PRNG options against JAX: ``jax_threefry_partitionable=False`` (the original threefry
scheme: bits, splits and samplers equal bit for bit, and a jit function traced under one setting is
traced again under the other), ``jax_legacy_prng_key`` ('allow', 'warn', 'error' for raw uint32
keys) and the options' validation."""
import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp


@contextlib.contextmanager
def option(name, value):
    before = (getattr(jax.config, name), getattr(jaxprc.config, name))
    for lib in (jax, jaxprc):
        lib.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, before[0])
        jaxprc.config.update(name, before[1])


def _draws(lib, np_):
    k = lib.random.key(7)
    out = {f"bits{shape}_{dt.__name__}": lib.random.bits(k, shape, dt)
           for shape, dt in [((), np_.uint32), ((5,), np_.uint32), ((5,), np_.uint8), ((2, 3), np_.uint16)]}
    out["split"] = lib.random.key_data(lib.random.split(k, 3))
    out["split_shape"] = lib.random.key_data(lib.random.split(k, (2, 2)))
    out["fold_in"] = lib.random.key_data(lib.random.fold_in(k, 5))
    out["normal"] = lib.random.normal(lib.random.key(1), (3,))
    out["rbg_split"] = lib.random.key_data(lib.random.split(lib.random.key(2, impl="rbg"), 3))
    return out


def test_original_threefry_matches_jax():
    with option("jax_threefry_partitionable", False):
        theirs, ours = _draws(jax, jnp), _draws(jaxprc, xnp)
    for name in theirs:
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]), err_msg=name)
    # the two schemes differ (on an odd count and on 8-bit draws), so the check above means something
    assert not np.array_equal(ours["bits(5,)_uint32"], jaxprc.random.bits(jaxprc.random.key(7), (5,)))


@pytest.mark.x64
def test_original_threefry_64_bit_matches_jax():
    with option("jax_threefry_partitionable", False):
        for lib, np_ in ((jax, jnp), (jaxprc, xnp)):
            k = lib.random.key(3)
            draws = [lib.random.bits(k, (3,), np_.uint64), lib.random.bits(k, (), np_.uint64),
                     lib.random.normal(k, (3,), np_.float64)]
            if lib is jax:
                theirs = draws
        for o, t in zip(draws, theirs):
            np.testing.assert_array_equal(np.asarray(o), np.asarray(t))


def test_partitionable_is_part_of_jit_trace_context():
    f = jaxprc.jit(lambda k: jaxprc.random.uniform(k, (3,)))
    g = jax.jit(lambda k: jax.random.uniform(k, (3,)))
    for setting in (True, False, True):
        with option("jax_threefry_partitionable", setting):
            np.testing.assert_array_equal(f(jaxprc.random.key(1)), g(jax.random.key(1)))


def _use_raw_key(lib):
    return lib.random.normal(np.zeros(2, np.uint32))


@pytest.mark.parametrize("mode", ["allow", "warn", "error"])
def test_legacy_prng_key_modes_match_jax(mode):
    with option("jax_legacy_prng_key", mode):
        for lib in (jax, jaxprc):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    _use_raw_key(lib)
                    outcome = "ok"
                except ValueError as e:
                    outcome = "ValueError: " + str(e).split(".")[0]
                lib.random.normal(lib.random.key(0))      # typed keys are always fine
                lib.random.PRNGKey(0)                     # making raw keys is too
            seen = (outcome, [str(w.message).split(".")[0] for w in caught if "Legacy" in str(w.message)])
            if lib is jax:
                theirs = seen
        assert seen == theirs


def test_prng_option_values_are_validated_as_jax():
    for lib in (jax, jaxprc):
        with pytest.raises(ValueError, match="is not a valid LegacyPrngKeyState"):
            lib.config.update("jax_legacy_prng_key", "sometimes")
    assert jaxprc.config.jax_threefry_partitionable is jax.config.jax_threefry_partitionable is True
    assert jaxprc.config.jax_debug_key_reuse is jax.config.jax_debug_key_reuse is False
    with pytest.raises(NotImplementedError, match="key reuse checking"):     # not silently ignored
        jaxprc.config.update("jax_debug_key_reuse", True)
    assert jaxprc.config.jax_debug_key_reuse is False
