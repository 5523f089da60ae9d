"""Primitive families: every built-in primitive is exported by ``jaxprc.lax`` as ``<name>_p`` (the
random samplers' ``random_gamma_p`` by ``jaxprc.random``, as JAX's)
with its rules in the public tables, and a family's primitives are defined and used in one
module (the pass drivers, the IR and the runtime name none of them)."""
import pathlib
import re

import pytest

import jaxprc as jx
from jaxprc.interpreters import ad, batching, mlir

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAX_PRIMITIVES = {k: v for module in (jx.lax, jx.random) for k, v in vars(module).items()
                  if k.endswith("_p") and isinstance(v, jx.core.Primitive)}

# (table, primitive name) -> why that table has no rule for it
NO_RULE = {
    ("jvp", "custom_lin"): "it only lives in linear programs, to be transposed away",
    ("batching", "iota"): "it has no operands, so it is never batched",
    ("jvp", "composite"): "as in JAX: wrap the composite in custom_jvp to differentiate it",
    ("batching", "composite"): "as in JAX: a composite has no batching rule",
    ("batching", "dim_as_value"): "it has no operands, so it is never batched",
    ("batching", "call_exported"): "as in JAX: a serialized module is not batched",
    ("jvp", "pmax"): "no derivative, as in JAX",
    ("jvp", "pmin"): "no derivative, as in JAX",
}


def test_every_builtin_primitive_is_exported_by_lax(builtins):
    assert {p.name for p in LAX_PRIMITIVES.values()} == {p.name for p in builtins}
    for name, prim in LAX_PRIMITIVES.items():
        assert name == prim.name.replace("-", "_") + "_p"


@pytest.mark.parametrize("name", sorted(LAX_PRIMITIVES))
def test_rules_are_in_the_public_tables(name):
    prim = LAX_PRIMITIVES[name]
    for table, rules in [("jvp", ad.primitive_jvps), ("batching", batching.primitive_batchers)]:
        assert (prim in rules) != ((table, prim.name) in NO_RULE), (table, prim.name)
    assert mlir.has_lowering(prim)


SAMPLE = ["cumsum", "sort", "gather", "select_n", "integer_pow", "dot_general", "reduce_max", "scan",
          "while", "custom_jvp_call_jaxpr"]
FRONT_ENDS = ("compiler/numpy/", "compiler/nn/", "compiler/scipy/",
              "compiler/extend/")     # jax.extend.core.primitives: the families' primitives under JAX's names
# checkify's error checks name the primitives they check, in one module (JAX's error_checks table)
# (and the test-case reducer keeps a while loop's predicate and what it reads, to stay terminating)
TRANSFORMS = ("compiler/experimental/checkify.py", "tools/reduce.py")


def test_a_primitive_lives_in_its_family_module():
    files = [p for d in ("ir", "passes", "runtime", "compiler", "tools") for p in (ROOT / d).rglob("*.py")
             if not p.relative_to(ROOT).as_posix().startswith(FRONT_ENDS + TRANSFORMS)]
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in files}
    for name in SAMPLE:
        pattern = re.compile(rf"\b{re.escape(name)}_p\b|[\"']{re.escape(name)}[\"']")
        where = [f for f, text in texts.items() if pattern.search(text)]
        assert any(f.startswith("compiler/lax/") for f in where), name
        assert len(where) <= 2, (name, where)
    any_primitive = re.compile(rf"\b({'|'.join(sorted(LAX_PRIMITIVES))})\b")
    for f, text in texts.items():       # the IR and the pass drivers hold no primitive
        if f.startswith(("ir/", "passes/")):
            assert not any_primitive.search(text), f


def test_the_documented_worked_example_runs():
    """The writing-a-primitive guide's one-file primitive works in every pass and in the text form."""
    import numpy as np
    import jaxprc.numpy as jnp
    from roundtrip import assert_round_trip
    doc = (ROOT / "docs" / "guides" / "writing-a-primitive.md").read_text()
    namespace = {}
    exec(re.search(r"```python\n(.*?)```", doc, re.S).group(1), namespace)
    axpy = namespace["axpy"]
    x, y = jnp.arange(3.0), jnp.ones(3)
    np.testing.assert_allclose(axpy(2.0, x, y), [1.0, 3.0, 5.0])
    np.testing.assert_allclose(jx.jit(lambda x, y: axpy(2.0, x, y))(x, y), [1.0, 3.0, 5.0])
    gx, gy = jx.grad(lambda x, y: jnp.sum(axpy(2.0, x, y) ** 2), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 4.0 * (2.0 * np.arange(3.0) + 1.0))
    np.testing.assert_allclose(gy, 2.0 * (2.0 * np.arange(3.0) + 1.0))
    xs = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(jx.vmap(lambda x: axpy(3.0, x, y))(xs), np.stack([3.0 * r + 1.0 for r in np.asarray(xs)]))
    cj = jx.make_jaxpr(lambda x, y: axpy(2.0, x, y))(x, y)
    assert "axpy[a=2.0]" in str(cj)
    assert_round_trip(cj)
