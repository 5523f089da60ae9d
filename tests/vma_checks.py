"""Checks of shard_map's varying-manual-axes types (check_vma) over 8 CPU devices: the types a
body's values get, their text form read back and run, the verifier and parser refusing edits that
break them, transformations keeping them, check_vma=False leaving them out; run by test_vma.py in a
process of its own."""
import sys

import numpy as np

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.sharding import AxisType, PartitionSpec as P

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from multidevice import check, raises, run  # noqa: E402
from roundtrip import assert_round_trip  # noqa: E402

mesh = jx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
A = np.arange(32, dtype=np.float32).reshape(8, 4) / 8
B = np.arange(4, dtype=np.float32) / 4


def body(a, b):
    """a is split over x, b replicated: a sum over x, a per-device scale, a loop with a cast carry."""
    total = lax.psum(a * b, "x")                                        # the same on every device of x
    scaled = a * lax.axis_index("y").astype(jnp.float32)                # varies over x and y
    carry = lax.fori_loop(0, 2, lambda i, c: c + a[0], lax.pcast(b, "x", to="varying"))
    return total, lax.psum(scaled, "y"), carry


smap = jx.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=(P(), P("x"), P("x")))


def expected():
    blocks = A.reshape(2, 4, 4)
    total = (blocks * B).sum(0)
    scaled = np.concatenate([blk * sum(range(4)) for blk in blocks])
    carry = np.concatenate([B + 2 * blk[0] for blk in blocks])
    return total, scaled, carry


@check
def body_values_are_typed():
    seen = {}

    def spy(a, b):
        seen["a"], seen["b"] = jx.typeof(a), jx.typeof(b)
        seen["i"] = jx.typeof(lax.axis_index(("x", "y")))
        seen["sum"] = jx.typeof(lax.psum(a, "x"))
        seen["gathered"] = jx.typeof(lax.all_gather(b, "y"))
        return a
    jx.shard_map(spy, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))(A, B)
    assert [seen[k].str_short() for k in ("a", "b", "i", "sum", "gathered")] == [
        "f32[4,4]{V:x}", "f32[4]", "i32[]{V:(x,y)}", "f32[4,4]", "f32[4,4]{V:y}"], seen
    assert seen["a"].mat.varying == frozenset({"x"}) and seen["b"].mat.varying == frozenset()
    assert seen["a"] != seen["a"].update(vma=frozenset()) and seen["a"].update(shape=(2, 4)).vma == {"x"}


@check
def values_eager_and_jitted():
    for out in (smap(A, B), jx.jit(smap)(A, B)):
        for got, want in zip(out, expected()):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@check
def types_round_trip_through_text():
    from jaxprc.ir.core import JaxprTypeError
    from jaxprc.ir.parser import ParseError, parse
    from jaxprc.ir.verify import verify
    cj = jx.make_jaxpr(smap)(A, B)
    text = str(cj)
    assert "{ lambda ; f:f32[4,4]{V:x} g:f32[4]. let" in text, text
    assert "i32[]{V:y} = pvary" in text and "f32[4,4]{V:(x,y)} = mul" in text, text
    back = assert_round_trip(cj)
    for got, want in zip(jx.jit(jx.jaxpr_as_fun(back))(A, B), expected()):     # the parsed program runs
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # an edit that drops an axis a value varies over is refused where it is declared
    edited = text.replace("f32[4,4]{V:(x,y)} = mul", "f32[4,4]{V:x} = mul", 1)
    assert edited != text
    raises(ParseError, lambda: parse(edited), "differs from the type mul gives; expected f32[4,4]{V:(x,y)}")
    # a body result varying over an axis its out_spec does not split it over is ill-typed
    sm_eqn = back.jaxpr.eqns[-1]
    inner = sm_eqn.params["jaxpr"].jaxpr
    first_out = inner.outvars[0]
    first_out.aval = first_out.aval.update(vma={"x"})
    raises(JaxprTypeError, lambda: verify(back), "varies over manual axes ['x'] its spec")


@check
def transformations_keep_types():
    from jaxprc.ir.verify import verify

    def loss(a, b):
        total, scaled, carry = smap(a, b)
        return total.sum() + (scaled * scaled).sum() + jnp.sin(carry).sum()
    for fn in (jx.grad(loss, argnums=(0, 1)), lambda a, b: jx.jvp(loss, (a, b), (a, b))):
        back = assert_round_trip(jx.make_jaxpr(fn)(A, B))      # verified, printed and read back
        for got, want in zip(jx.jit(jx.jaxpr_as_fun(back))(A, B), jx.tree.leaves(jx.jit(fn)(A, B))):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    ga, gb = jx.jit(jx.grad(loss, argnums=(0, 1)))(A, B)
    eps = 1e-3                                # central differences along one direction per argument
    da, db = np.sin(np.arange(32.0)).reshape(8, 4).astype(np.float32), np.cos(np.arange(4.0)).astype(np.float32)
    fd = (float(loss(A + eps * da, B + eps * db)) - float(loss(A - eps * da, B - eps * db))) / (2 * eps)
    np.testing.assert_allclose(float((np.asarray(ga) * da).sum() + (np.asarray(gb) * db).sum()), fd, rtol=2e-2)
    batched = jx.jit(jx.vmap(smap, in_axes=(None, 0)))(A, np.stack([B, 2 * B]))
    np.testing.assert_allclose(np.asarray(batched[0][1]), (A.reshape(2, 4, 4) * 2 * B).sum(0), rtol=1e-6)
    verify(jx.make_jaxpr(jx.vmap(smap, in_axes=(None, 0)))(A, np.stack([B, 2 * B])))
    out, lin = jx.linearize(lambda a: smap(a, B)[2], A)
    np.testing.assert_allclose(np.asarray(lin(A)), np.concatenate([2 * blk[0] for blk in A.reshape(2, 4, 4)]),
                               rtol=1e-6)


@check
def check_vma_false_types_nothing():
    seen = []

    def spy(a, b):
        seen.append(jx.typeof(lax.pcast(a + lax.axis_index("x"), "y", to="varying")))
        return a * 2
    out = jx.shard_map(spy, mesh=mesh, in_specs=(P("x"), P()), out_specs=P(), check_vma=False)(A, B)
    assert seen[0].str_short() == "f32[4,4]" and np.array_equal(np.asarray(out), A[:4] * 2), seen


@check
def loops_and_branches_refuse_as_jax():
    sm = lambda f: jx.shard_map(f, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))(A, B)  # noqa: E731
    raises(TypeError, lambda: sm(lambda a, b: lax.scan(lambda c, r: (c + r, r), b, a)[0]),
           "The input carry c has type float32[4] but the corresponding output carry component has type "
           "float32[4]{V:x}, so the manual axis types do not match.\n\nThis might be fixed by applying "
           "`jax.lax.pcast(..., ('x',), to='varying')`, to the initial carry value corresponding to the input "
           "carry c.")
    raises(TypeError, lambda: sm(lambda a, b: lax.cond(True, lambda: a[0], lambda: b)),
           "so the manual axis types do not match.\n\nThis might be fixed by applying `jax.lax.pcast(..., (), "
           "to='varying')` to the output of true_fun.")
    # a carry that starts varying may come out invariant: the loop's result still varies
    out = sm(lambda a, b: lax.fori_loop(0, 2, lambda i, c: c * 0 + b, a))
    np.testing.assert_allclose(np.asarray(out), np.tile(B, (8, 1)))
    zero_trips = sm(lambda a, b: lax.fori_loop(0, 0, lambda i, c: c * 0 + b, a))
    np.testing.assert_allclose(np.asarray(zero_trips), A)


if __name__ == "__main__":
    run()
