"""Exported programs with effects, against JAX: ordered effects are token arguments and results of
``main`` (JAX's calling convention), both kinds are listed and serialized by their class's name, and
artifacts with an ordered effect move between JAX and jaxprc in both directions. What JAX refuses
to export (host callbacks, custom calls without compatibility guarantees) jaxprc refuses with the
same exception and words, and accepts where a ``DisabledSafetyCheck`` allows it."""
import dataclasses
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import export as jexport
from jax._src import effects as jax_effects
from jax.extend.core import Primitive as JPrimitive
from jax._src.interpreters import mlir as jmlir

import jaxprc
import jaxprc.numpy as xjnp
from jaxprc import export as xexport
from jaxprc.extend.core import Effect as XEffect, Primitive as XPrimitive
from jaxprc.interpreters import mlir as xmlir


# One effect class known to both libraries (JAX finds it by its name, ``str(type)``, as jaxprc does).
@dataclasses.dataclass(frozen=True)
class EchoOrdered(jax_effects.Effect, XEffect):
    ordered = True           # (jaxprc reads this; JAX its ordered_effects registry)


@dataclasses.dataclass(frozen=True)
class EchoUnordered(jax_effects.Effect, XEffect):
    pass


class NoNullary(XEffect):
    ordered = True

    def __init__(self, tag):
        self.tag = tag


for cls in (EchoOrdered, EchoUnordered):
    jax_effects.lowerable_effects.add_type(cls)
    jax_effects.control_flow_allowed_effects.add_type(cls)
jax_effects.ordered_effects.add_type(EchoOrdered)


def _jax_twice(effect):
    """A JAX primitive doubling its operand with ``effect`` (an ordered one threads its token)."""
    p = JPrimitive(f"twice_{type(effect).__name__}")
    p.def_effectful_abstract_eval(lambda aval: (aval, {effect}))

    def lower(ctx, x):
        if effect in ctx.tokens_in.effects():
            ctx.set_tokens_out(jmlir.TokenSet({effect: ctx.tokens_in.get(effect)}))
        return [jmlir.hlo.add(x, x)]

    jmlir.register_lowering(p, lower)
    return p


def _jaxprc_twice(effect):
    p = XPrimitive(f"twice_{type(effect).__name__}")
    p.def_abstract_eval(lambda aval: aval)
    p.def_effects(lambda: {effect})
    p.def_impl(lambda x: x * 2)

    def lower(ctx, x):
        if effect.ordered:
            ctx.set_token(ctx.get_token())
        return [xmlir.hlo.add(x, x)]

    xmlir.register_lowering(p, lower)
    return p


J_ORD, J_UNORD = _jax_twice(EchoOrdered()), _jax_twice(EchoUnordered())
X_ORD, X_UNORD, X_NO_NULLARY = _jaxprc_twice(EchoOrdered()), _jaxprc_twice(EchoUnordered()), _jaxprc_twice(NoNullary(1))


def _f(ordered, unordered):
    return lambda x: 10.0 + ordered.bind(x) + unordered.bind(x * 3)


X = np.arange(3, dtype=np.float32)
WANT = 10.0 + 2 * X + 6 * X
MAIN = (r"func.func public @main\(%arg0: !stablehlo.token \{jax.token = true\}.*?, %arg1: tensor<3xf32>.*?\) -> "
        r"\(!stablehlo.token \{jax.token = true\}, tensor<3xf32>")

_CACHE = {}


def _exported(lib):
    if lib not in _CACHE:
        _CACHE[lib] = (jexport.export(jax.jit(_f(J_ORD, J_UNORD)))(X) if lib == "jax"
                       else xexport.export(jaxprc.jit(_f(X_ORD, X_UNORD)))(X))
    return _CACHE[lib]


def _names(effects):
    return [str(type(e)) for e in effects]


def test_effects_and_calling_convention_match_jax():
    theirs, ours = _exported("jax"), _exported("jaxprc")
    assert _names(ours.ordered_effects) == _names(theirs.ordered_effects) == [str(EchoOrdered)]
    assert _names(ours.unordered_effects) == _names(theirs.unordered_effects) == [str(EchoUnordered)]
    assert re.search(MAIN, theirs.mlir_module()) and re.search(MAIN, ours.mlir_module())
    back = xexport.deserialize(ours.serialize())
    assert back.ordered_effects == (EchoOrdered(),) and back.unordered_effects == (EchoUnordered(),)
    np.testing.assert_allclose(back.call(X), WANT)
    # under jit beside the caller's own ordered effect: the tokens are threaded through the module
    np.testing.assert_allclose(jaxprc.jit(lambda x: X_ORD.bind(x) + back.call(x))(X), 2 * X + WANT)
    assert "call_exported" in str(jaxprc.make_jaxpr(back.call)(X)) and "EchoOrdered" in str(
        jaxprc.make_jaxpr(back.call)(X))


def test_jaxprc_artifact_with_an_ordered_effect_runs_in_jax():
    exp = jexport.deserialize(_exported("jaxprc").serialize())
    assert exp.ordered_effects == (EchoOrdered(),) and exp.unordered_effects == (EchoUnordered(),)
    np.testing.assert_allclose(exp.call(X), WANT)
    np.testing.assert_allclose(jax.jit(lambda x: J_ORD.bind(x) + exp.call(x))(X), 2 * X + WANT)


def test_jax_artifact_with_an_ordered_effect_runs_in_jaxprc():
    exp = xexport.deserialize(_exported("jax").serialize())
    assert exp.ordered_effects == (EchoOrdered(),) and exp.unordered_effects == (EchoUnordered(),)
    np.testing.assert_allclose(exp.call(X), WANT)
    np.testing.assert_allclose(jaxprc.jit(lambda x: X_ORD.bind(x) + exp.call(x))(X), 2 * X + WANT)


def test_symbolic_batch_with_an_ordered_effect_both_ways():
    specs = {lib: mod.ShapeDtypeStruct(mod.export.symbolic_shape("b, 3"), np.float32)
             for lib, mod in (("jax", jax), ("jaxprc", jaxprc))}
    ours = xexport.export(jaxprc.jit(_f(X_ORD, X_UNORD)))(specs["jaxprc"]).serialize()
    theirs = jexport.export(jax.jit(_f(J_ORD, J_UNORD)))(specs["jax"]).serialize()
    for n in (1, 4):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(jexport.deserialize(ours).call(x), 10 + 8 * x)
        np.testing.assert_allclose(xexport.deserialize(theirs).call(x), 10 + 8 * x)


def _refusal(export_mod, jit, fun, *args, **kwargs):
    with pytest.raises(Exception) as info:
        export_mod.export(jit(fun), **kwargs)(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("kind", ["ordered_print", "print", "io_callback", "pure_callback"])
def test_host_callbacks_are_refused_as_jax_refuses_them(kind):
    def make(lib, np_):
        def f(x):
            if kind.endswith("print"):
                lib.debug.print("x={}", x, ordered=kind == "ordered_print")
                return x * 2
            spec = lib.ShapeDtypeStruct(x.shape, x.dtype)
            call = (lib.experimental.io_callback if kind == "io_callback" else lib.pure_callback)
            return call(lambda v: np.asarray(v) + 1, spec, x) * 2
        return f
    import jax.experimental  # noqa: F401  (io_callback)
    import jaxprc.experimental  # noqa: F401
    for checks in ((), ("xla_ffi_python_cpu_callback", "xla_python_cpu_callback")):     # allowing them changes nothing
        theirs = _refusal(jexport, jax.jit, make(jax, jjnp), X,
                          disabled_checks=[jexport.DisabledSafetyCheck.custom_call(t) for t in checks])
        ours = _refusal(xexport, jaxprc.jit, make(jaxprc, xjnp), X,
                        disabled_checks=[xexport.DisabledSafetyCheck.custom_call(t) for t in checks])
        assert ours == theirs == (NotImplementedError, "serialization of host_callbacks is not yet implemented")


def test_custom_call_without_guarantees_is_refused_unless_allowed():
    qr_perm = lambda lib: (lambda x: lib.scipy.linalg.qr(x, pivoting=True)[2])      # noqa: E731
    import jax.scipy.linalg  # noqa: F401
    import jaxprc.scipy.linalg  # noqa: F401
    a = np.array([[1.0, 5.0, 2.0], [0.0, 1.0, 7.0], [3.0, 1.0, 0.5]], np.float32)
    theirs = _refusal(jexport, jax.jit, qr_perm(jax), a)
    ours = _refusal(xexport, jaxprc.jit, qr_perm(jaxprc), a)
    assert ours[0] is theirs[0] is ValueError
    head = "Cannot serialize code with custom calls whose targets have no compatibility guarantees."
    assert ours[1].startswith(head) and theirs[1].startswith(head)
    assert "lapack_sgeqp3_ffi" in ours[1] and "lapack_sgeqp3_ffi" in theirs[1]
    allowed = {lib: mod.export(jit(qr_perm(root)),
                               disabled_checks=[mod.DisabledSafetyCheck.custom_call("lapack_sgeqp3_ffi")])(a)
               for lib, mod, jit, root in (("jax", jexport, jax.jit, jax), ("jaxprc", xexport, jaxprc.jit, jaxprc))}
    want = jax.jit(qr_perm(jax))(a)
    ours_back = xexport.deserialize(allowed["jaxprc"].serialize())
    assert [str(c) for c in ours_back.disabled_safety_checks] == [
        str(c) for c in allowed["jax"].disabled_safety_checks] == ["custom_call:lapack_sgeqp3_ffi"]
    np.testing.assert_array_equal(ours_back.call(a), want)
    np.testing.assert_array_equal(jexport.deserialize(allowed["jaxprc"].serialize()).call(a), want)
    np.testing.assert_array_equal(xexport.deserialize(allowed["jax"].serialize()).call(a), want)


def test_effect_without_a_nullary_constructor_is_not_serializable():
    exp = xexport.export(jaxprc.jit(lambda x: X_NO_NULLARY.bind(x)))(X)
    with pytest.raises(NotImplementedError, match="must have a nullary constructor to be serializable"):
        exp.serialize()


@dataclasses.dataclass(frozen=True)
class OnlyJaxKnows(jax_effects.Effect):
    pass


jax_effects.lowerable_effects.add_type(OnlyJaxKnows)
jax_effects.ordered_effects.add_type(OnlyJaxKnows)


def test_an_effect_class_unknown_here_is_refused_on_deserialization_as_jax_does():
    blob = jexport.export(jax.jit(lambda x: _jax_twice(OnlyJaxKnows()).bind(x)))(X).serialize()
    assert jexport.deserialize(blob).ordered_effects == (OnlyJaxKnows(),)
    with pytest.raises(NotImplementedError, match=f"cannot deserialize effect type {re.escape(str(OnlyJaxKnows))}"):
        xexport.deserialize(blob)
