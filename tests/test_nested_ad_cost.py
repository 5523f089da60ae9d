"""Transforming nested control flow costs work linear in the nesting depth.

Loop and branch rules transform their bodies, some more than once (fixpoints over nonzero
tangents, unknowns, batched carries); unless those sub-transformations are memoised, a body
nested d deep is transformed 2**d times. The tests count the body interpretations each
transformation does at two depths, rather than time them.
"""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.passes import jvp as jvp_pass, transpose as transpose_pass, vmap as vmap_pass
from jaxprc.passes import partial_eval as pe_pass


def nested(kind, depth):
    g = jnp.sin
    for _ in range(depth):
        if kind == "scan":
            g = (lambda inner: lambda c: lax.scan(lambda cc, _: (inner(cc), None), c, None, length=2)[0])(g)
        elif kind == "cond":
            g = (lambda inner: lambda c: lax.cond(c > 0, inner, lambda z: z * 2.0, c))(g)
        else:
            g = (lambda inner: lambda c: lax.fori_loop(0, 2, lambda i, z: inner(z), c))(g)
    return g


def count_interpretations(monkeypatch, fn):
    counts = {"n": 0}
    for module, name in [(jvp_pass, "jvp_eval"), (transpose_pass, "backward_pass"),
                         (vmap_pass, "batch_eval"), (pe_pass, "partial_eval_jaxpr")]:
        original = getattr(module, name)

        def counting(*args, _original=original, **kwargs):
            counts["n"] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(module, name, counting)
    fn()
    monkeypatch.undo()
    return counts["n"]


TRANSFORMS = {
    "grad": lambda f: jaxprc.make_jaxpr(jaxprc.grad(f))(0.5),
    "jvp": lambda f: jaxprc.make_jaxpr(lambda x: jaxprc.jvp(f, (x,), (1.0,)))(0.5),
    "vmap_grad": lambda f: jaxprc.make_jaxpr(jaxprc.vmap(jaxprc.grad(f)))(np.ones(3, np.float32)),
}


@pytest.mark.parametrize("kind", ["scan", "cond", "while"])
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_transform_work_is_linear_in_depth(monkeypatch, kind, transform):
    shallow = count_interpretations(monkeypatch, lambda: TRANSFORMS[transform](nested(kind, 4)))
    deep = count_interpretations(monkeypatch, lambda: TRANSFORMS[transform](nested(kind, 12)))
    # linear work triples from depth 4 to 12; doubling per level would multiply it by 256
    assert deep <= 4 * shallow, (shallow, deep)


def test_grad_of_deeply_nested_scans_is_right():
    f = nested("scan", 16)
    x = 0.5
    expected, y = 1.0, x
    for _ in range(2 ** 16):       # the composition is sin applied 2**16 times
        expected *= np.cos(y)
        y = np.sin(y)
    np.testing.assert_allclose(float(jaxprc.jit(jaxprc.grad(f))(x)), expected, rtol=2e-2)
