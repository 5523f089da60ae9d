"""Array refs against JAX: the same programs (eager, jit with refs as arguments, refs of typed
keys) give the same values, types and reprs, and the same errors for ill-shaped or ill-typed
writes."""
import jax
import numpy as np
import pytest

import jaxprc


def _program(lib):
    """Runs eagerly and under jit with a ref argument; returns every value it saw."""
    jnp = lib.numpy
    r = lib.new_ref(jnp.arange(4.0))
    seen = [r[...], r[1:3]]
    r[...] += jnp.ones(4)
    r[2] = jnp.float32(9)
    lib.ref.addupdate(r, 0, jnp.float32(0.5))
    seen.append(lib.ref.swap(r, slice(0, 2), jnp.zeros(2)))

    @lib.jit
    def step(ref, x):
        ref[...] = ref[...] * x
        ref[1:] = ref[1:] + 1.0
        return jnp.sum(ref[...])

    seen += [step(r, jnp.float32(2)), step(r, jnp.float32(3)), r[...]]
    return [np.asarray(v) for v in seen]


def test_values_match_jax():
    for got, want in zip(_program(jaxprc), _program(jax), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def _loops(lib, x):
    """Loop and branch bodies writing a ref of the enclosing code."""
    jnp, lax = lib.numpy, lib.lax
    r = lib.new_ref(x)

    def body(i, c):
        r[i] = r[i] * c
        return c + 0.5
    c = lax.fori_loop(0, 3, body, 1.5)
    s, ys = lax.scan(lambda t, v: (r.__setitem__(0, r[0] + v * t), (t + v, r[1]))[1], 0.0, jnp.arange(3.0))
    lax.switch(1, [lambda: None, lambda: r.__setitem__(slice(2, 4), r[0:2])])
    return [r[...], c, s, ys]


def test_loops_writing_refs_match_jax():
    x = np.linspace(1, 2, 4, dtype=np.float32)
    for run in (lambda lib: _loops(lib, x), lambda lib: lib.jit(lambda v: _loops(lib, v))(x)):
        for got, want in zip(run(jaxprc), run(jax), strict=True):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_types_and_reprs_match_jax():
    for make in (lambda lib: lib.new_ref(lib.numpy.zeros((2, 3), lib.numpy.int32)),
                 lambda lib: lib.new_ref(1.0),
                 lambda lib: lib.new_ref(lib.random.key(0))):
        ours, theirs = make(jaxprc), make(jax)
        assert repr(jaxprc.typeof(ours)) == repr(jax.typeof(theirs))
        assert (ours.shape, ours.ndim) == (theirs.shape, theirs.ndim)
    assert repr(jaxprc.new_ref(jaxprc.numpy.zeros(3))) == repr(jax.new_ref(jax.numpy.zeros(3)))


@pytest.mark.parametrize("write", [
    lambda lib, r: r.__setitem__(Ellipsis, lib.numpy.ones(2)),          # wrong shape
    lambda lib, r: r.__setitem__(1, 5),                                 # int into float32
    lambda lib, r: r.__setitem__(slice(None), lib.numpy.ones(3, lib.numpy.float16)),
])
def test_bad_writes_raise_as_in_jax(write):
    messages = []
    for lib in (jaxprc, jax):
        r = lib.new_ref(lib.numpy.zeros(3))
        with pytest.raises(ValueError) as info:
            write(lib, r)
        messages.append(str(info.value).split(" Transforms:")[0].strip())
    assert messages[0] == messages[1]


def _threaded(lib):
    """Refs closed over by jit (also through a nested jit and a scan), refs as vmap arguments,
    refs closed over or passed (not differentiated) under grad, closed-over refs read by jvp and
    vjp: every value seen, as JAX 0.10.2."""
    jnp, lax = lib.numpy, lib.lax
    total, steps = lib.new_ref(jnp.zeros(3)), lib.new_ref(0)

    @lib.jit
    def accumulate(x):
        lib.jit(lambda y: total.__setitem__(..., total[...] + y))(x)
        steps[...] += 1
        lax.scan(lambda c, v: (total.__setitem__(0, total[0] + v), (c, None))[1], None, jnp.arange(2.0))
        return total[...] * 2

    seen = [accumulate(jnp.arange(3.0)), accumulate(jnp.ones(3)), total[...], steps[...]]
    rows = lib.new_ref(jnp.zeros((4, 3)))

    def add(r, x):
        r[...] = r[...] + x
        return jnp.sum(x)
    seen += [lib.vmap(add)(rows, jnp.arange(12.0).reshape(4, 3)), rows[...]]
    seen.append(lib.jit(lib.vmap(add))(rows, jnp.ones((4, 3))))
    seen += [rows[...], lib.vmap(lambda x: total[...] * x)(jnp.arange(2.0))]
    calls = lib.new_ref(jnp.zeros(()))

    def loss(r, x):
        r[...] = r[...] + 1.0
        return jnp.sum(x ** 2 * total[...])
    seen += [lib.grad(loss, argnums=1)(calls, jnp.arange(3.0)), calls[...]]
    seen += [lib.value_and_grad(lambda x: loss(calls, x))(jnp.ones(3))[1], calls[...]]
    seen += list(lib.jvp(lambda x: total[...] * x, (jnp.ones(3),), (jnp.arange(3.0),)))   # read only
    seen += list(lib.vjp(lambda x: total[...] * x, jnp.ones(3))[1](jnp.ones(3)))
    return [np.asarray(v) for v in seen]


def test_threaded_refs_match_jax():
    for got, want in zip(_threaded(jaxprc), _threaded(jax), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("misuse", [
    lambda lib, r: lib.vmap(lambda x: r.__setitem__(..., x))(lib.numpy.ones((2, 3))),
    lambda lib, r: lib.vmap(lambda q, x: q.__setitem__(..., x), in_axes=(None, 0))(r, lib.numpy.ones((2, 3))),
    lambda lib, r: lib.grad(lambda x: (r.__setitem__(..., x), x.sum())[1])(lib.numpy.ones(3)),
])
def test_threaded_ref_misuse_raises_as_in_jax(misuse):
    messages = []
    for lib in (jaxprc, jax):
        r = lib.new_ref(lib.numpy.zeros(3))
        with pytest.raises(Exception) as info:
            misuse(lib, r)
        messages.append(str(info.value))
        if lib is jaxprc:    # the ref is intact (JAX's may hold the value written before it raised)
            np.testing.assert_array_equal(r[...], np.zeros(3))
    assert messages[0] == messages[1]
