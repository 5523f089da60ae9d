"""Array refs (jaxprc.ref): eager, under jit/grad/vmap and in loops, discharged while tracing so
the traced program is pure and survives the text round trip. Expected values: NumPy doing the
same writes in place."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ref import AbstractRef, RefEscapeError

from roundtrip import assert_round_trip


def _np_program(x):
    """The in-place program the ref tests run, on a NumPy array."""
    x = np.array(x, np.float32)
    x[...] += 1
    x[0] = 7.0
    x[1:] *= 2
    return x * 2


def _ref_program(x):
    r = jaxprc.new_ref(x)
    r[...] += 1
    r[0] = 7.0
    r[1:] = r[1:] * 2
    return r[...] * 2


X = np.arange(4, dtype=np.float32)


def test_eager_read_write_and_type():
    r = jaxprc.new_ref(jnp.zeros(3))
    assert repr(r) == "Ref([0., 0., 0.], dtype=float32)"
    assert jaxprc.typeof(r) == AbstractRef(jaxprc.ShapedArray((3,), np.float32))
    assert repr(jaxprc.typeof(r)) == "Ref{float32[3]}"
    assert (r.shape, r.dtype, r.ndim) == ((3,), np.float32, 1)
    r[1] = 5.0
    np.testing.assert_array_equal(r[...], [0, 5, 0])
    np.testing.assert_array_equal(r[1:], [5, 0])
    np.testing.assert_array_equal(jaxprc.ref.swap(r, 2, jnp.float32(4)), 0.0)
    jaxprc.ref.addupdate(r, ..., jnp.ones(3))
    np.testing.assert_array_equal(jaxprc.ref.get(r), [1, 6, 5])
    np.testing.assert_array_equal(_ref_program(X), _np_program(X))


def test_writes_must_match_shape_and_dtype_as_in_jax():
    r = jaxprc.new_ref(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"Invalid shape for `swap`.*Value shape: \(2,\)"):
        r[...] = jnp.ones(2)
    with pytest.raises(ValueError, match="Invalid dtype for `swap`. Ref dtype: float32. Value dtype: int32"):
        r[1] = 5                          # a Python int is int32, never promoted
    with pytest.raises(ValueError, match="Invalid dtype for `addupdate`"):
        jaxprc.ref.addupdate(r, ..., jnp.ones(3, jnp.int32))
    np.testing.assert_array_equal(r[...], [0, 0, 0])      # failed writes change nothing


def test_freeze_and_free_end_the_ref():
    r = jaxprc.new_ref(jnp.ones(2))
    np.testing.assert_array_equal(jaxprc.freeze(r), [1, 1])
    with pytest.raises(RefEscapeError, match="freed or frozen"):
        r[...]
    e = jaxprc.empty_ref(jaxprc.ShapedArray((2,), np.int32))
    assert jaxprc.typeof(e) == AbstractRef(jaxprc.ShapedArray((2,), np.int32))
    jaxprc.free_ref(e)
    with pytest.raises(RefEscapeError):
        e[0] = jnp.int32(1)


_jitted = jaxprc.jit(_ref_program)


def test_jit_equals_eager_and_the_ir_is_pure_and_round_trips():
    np.testing.assert_array_equal(_jitted(X), _np_program(X))
    cj = jaxprc.make_jaxpr(_ref_program)(X)
    assert all("ref" not in eqn.primitive.name for eqn in cj.jaxpr.eqns)
    back = assert_round_trip(cj)
    np.testing.assert_array_equal(jaxprc.core.eval_jaxpr(back.jaxpr, back.consts, X)[0], _np_program(X))


def test_grad_and_vmap_through_refs():
    def f(x):
        r = jaxprc.new_ref(jnp.zeros_like(x))
        r[...] = jnp.sin(x)
        r[0] = r[0] * x[1]
        return jnp.sum(r[...])

    def f_plain(x):
        y = jnp.sin(x)
        return jnp.sum(y.at[0].set(y[0] * x[1]))

    np.testing.assert_allclose(jaxprc.grad(f)(X), jaxprc.grad(f_plain)(X), rtol=1e-6)
    batch = np.stack([X, X + 1])
    np.testing.assert_allclose(jaxprc.vmap(_ref_program)(batch), np.stack([_np_program(b) for b in batch]))


def test_refs_inside_loop_and_branch_bodies():
    def body(i, acc):
        r = jaxprc.new_ref(acc)
        r[i] = r[i] + 1.0
        return r[...]

    def f(x):
        y = lax.fori_loop(0, 3, body, x)
        return lax.cond(y[0] > 0, lambda v: _ref_program(v), lambda v: v, y)

    want = _np_program(X + np.array([1, 1, 1, 0], np.float32))
    np.testing.assert_array_equal(jaxprc.jit(f)(X), want)
    assert_round_trip(jaxprc.make_jaxpr(f)(X))


def test_refs_as_jit_arguments_are_threaded_and_written_back():
    @jaxprc.jit
    def accumulate(r, x):
        r[...] += x
        return r[0] * 2

    r = jaxprc.new_ref(jnp.zeros(3))
    assert float(accumulate(r, jnp.ones(3))) == 2.0 and float(accumulate(r, jnp.ones(3))) == 4.0
    np.testing.assert_array_equal(r[...], [2, 2, 2])
    cj = jaxprc.make_jaxpr(accumulate)(r, jnp.ones(3))     # the ref's value in, its final value out
    assert [a.str_short() for a in cj.out_avals] == ["f32[]", "f32[3]"]
    assert_round_trip(cj)

    @jaxprc.jit
    def outer(x):                                         # a ref made in a trace, passed to a jit
        q = jaxprc.new_ref(x)
        return accumulate(q, x), q[...]
    out, final = outer(jnp.ones(3))
    assert float(out) == 4.0
    np.testing.assert_array_equal(final, [2, 2, 2])
    with pytest.raises(ValueError, match="the same Ref twice"):
        jaxprc.jit(lambda a, b: a[...])(r, r)
    with pytest.raises(TypeError, match="a Ref is an argument of jit calls and make_jaxpr only"):
        jaxprc.eval_shape(lambda a: a[...], r)


def test_a_nested_trace_reads_an_enclosing_ref():
    def f(x):
        r = jaxprc.new_ref(x)
        total = lax.fori_loop(0, 3, lambda i, c: c + r[i], 0.0)
        slope = jaxprc.grad(lambda s: jnp.sum(r[...] * s))(1.0)
        return total, slope

    np.testing.assert_array_equal(jaxprc.jit(f)(X), (3.0, 6.0))


def _loops_writing_a_ref(x):
    """Loop and branch bodies that write a ref of the code around them (its value is threaded
    through each). Expected: [6, 12, 5, -1] for x = [0, 1, 2, 3] (worked by hand, and JAX's)."""
    r = jaxprc.new_ref(x)

    def body(i, c):
        r[i] = r[i] + c
        return c + 1.0
    c = lax.fori_loop(0, 3, body, 1.0)

    def step(total, v):
        r[0] = r[0] * v
        return total + v, total
    s, _ = lax.scan(step, 0.0, jnp.arange(2.0) + 2)
    lax.cond(c > 0, lambda: r.__setitem__(3, jnp.float32(-1)), lambda: None)
    lax.while_loop(lambda k: k < 2, lambda k: (r.__setitem__(1, r[1] * 2), k + 1)[1], 0)
    return r[...], c, s


def test_loop_and_branch_bodies_write_refs_of_the_enclosing_code():
    want = ([6, 12, 5, -1], 4.0, 5.0)
    for run in (_loops_writing_a_ref, jaxprc.jit(_loops_writing_a_ref)):
        for got, expected in zip(run(X), want):
            np.testing.assert_array_equal(got, expected)
    back = assert_round_trip(jaxprc.make_jaxpr(_loops_writing_a_ref)(X))
    np.testing.assert_array_equal(jaxprc.core.eval_jaxpr(back.jaxpr, back.consts, X)[0], want[0])


def test_a_ref_used_across_a_trace_boundary_is_refused():
    outer = jaxprc.new_ref(jnp.zeros(3))
    with pytest.raises(RefEscapeError, match="Ref write: the ref is used inside a traced function"):
        jaxprc.make_jaxpr(lambda x: outer.__setitem__(..., x))(X[:3])   # jaxprc's IR has no ref types
    with pytest.raises(RefEscapeError, match="Ref read: the ref is used inside a traced function"):
        jaxprc.checkpoint(lambda x: outer[...] + x)(X[:3])

    def writes_in_grad(x):
        r = jaxprc.new_ref(x)
        return jaxprc.grad(lambda y: (r.__setitem__(..., y), jnp.sum(y))[1])(x)
    with pytest.raises(RefEscapeError, match="a differentiated value on a non-differentiated array reference"):
        jaxprc.jit(writes_in_grad)(X)

    def cond_writes(x):
        r = jaxprc.new_ref(x)
        return lax.while_loop(lambda k: (r.__setitem__(0, 1.0), k < 1)[1], lambda k: k + 1, 0)
    with pytest.raises(RefEscapeError, match="cond_fun writes a ref"):
        jaxprc.jit(cond_writes)(X)
    with pytest.raises(RefEscapeError, match="vmapped value on an unbatched array reference"):
        jaxprc.vmap(lambda x: outer.__setitem__(..., x))(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="both closed over and passed as an argument"):
        jaxprc.jit(lambda r, x: outer[...] + x)(outer, X[:3])
    np.testing.assert_array_equal(outer[...], [0, 0, 0])      # the process goes on; the ref is intact


def test_refs_closed_over_by_jit_are_threaded():
    """A jit function that uses refs of the calling code: their values go in and come out at
    every call (none is baked in), also through a nested jit and a loop inside it."""
    total, count = jaxprc.new_ref(jnp.zeros(3)), jaxprc.new_ref(0)

    @jaxprc.jit
    def accumulate(x):
        @jaxprc.jit
        def add(y):
            total[...] += y
        add(x)
        count[...] += 1
        lax.fori_loop(0, 2, lambda i, c: total.__setitem__(i, total[i] * 2.0), None)
        return total[...] * 10

    np.testing.assert_array_equal(accumulate(X[:3]), [0, 20, 20])
    np.testing.assert_array_equal(accumulate(X[:3]), [0, 60, 40])    # the new values went in
    np.testing.assert_array_equal(total[...], [0, 6, 4])
    assert int(count[...]) == 2
    total[...] = jnp.ones(3)                                       # an eager write is seen too
    np.testing.assert_array_equal(accumulate(X[:3]), [20, 40, 30])
    reads = jaxprc.jit(lambda: count[...] + 1)
    assert int(reads()) == 4
    count[...] = 10
    assert int(reads()) == 11


def test_refs_under_vmap_and_grad():
    batched = jaxprc.new_ref(jnp.zeros((4, 3)))

    def add(r, x):
        r[...] = r[...] + x
        return x * 2
    out = jaxprc.vmap(add)(batched, jnp.ones((4, 3)))
    np.testing.assert_array_equal(out, np.full((4, 3), 2))
    np.testing.assert_array_equal(batched[...], np.ones((4, 3)))
    by_column = jaxprc.new_ref(jnp.zeros((3, 4)))               # batched along axis 1
    jaxprc.vmap(add, in_axes=(1, 0))(by_column, jnp.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(by_column[...], np.arange(12.0).reshape(4, 3).T)
    scale = jaxprc.new_ref(jnp.arange(3.0))
    np.testing.assert_array_equal(jaxprc.vmap(lambda x: scale[...] * x)(jnp.ones((2, 3))), [[0, 1, 2]] * 2)

    calls = jaxprc.new_ref(jnp.zeros(()))

    def loss(r, x):
        r[...] = r[...] + 1.0                 # not differentiated: allowed, written back
        return jnp.sum(x ** 2 * scale[...])
    g = jaxprc.grad(loss, argnums=1)(calls, jnp.ones(3))
    np.testing.assert_array_equal(g, [0, 2, 4])
    (value, aux), g = jaxprc.value_and_grad(lambda x: (loss(calls, x), calls[...]), has_aux=True)(jnp.ones(3))
    assert float(value) == 3.0 and float(aux) == 2.0 and float(calls[...]) == 2.0
    np.testing.assert_array_equal(jaxprc.jit(jaxprc.grad(loss, argnums=1))(calls, jnp.ones(3)), [0, 2, 4])
    assert float(calls[...]) == 3.0


def test_one_shot_traces_read_closed_over_refs_as_constants():
    scale = jaxprc.new_ref(jnp.arange(3.0))
    cj = jaxprc.make_jaxpr(lambda x: scale[...] * x)(X[:3])
    np.testing.assert_array_equal(cj.consts[0], [0, 1, 2])
    primal, tangent = jaxprc.jvp(lambda x: scale[...] * x, (X[:3],), (jnp.ones(3),))
    np.testing.assert_array_equal(tangent, [0, 1, 2])
    scale[...] = jnp.full(3, 2.0)                     # the next trace reads the new value
    np.testing.assert_array_equal(jaxprc.vjp(lambda x: scale[...] * x, X[:3])[1](jnp.ones(3))[0], [2, 2, 2])
    assert jaxprc.eval_shape(lambda x: scale[1:] * x, 1.0).shape == (2,)
