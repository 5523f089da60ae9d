"""The trace machinery itself: concretization, leaked tracers, compile-time evaluation, locations."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.ir import ConcretizationTypeError, UnexpectedTracerError, eval_jaxpr, trace_to_jaxpr


def test_ensure_compile_time_eval_folds_concrete_values_into_the_program():
    seen = []

    def f(x):
        with jaxprc.ensure_compile_time_eval():
            y = jnp.sin(2.0) * 3          # concrete: computed now, even under jit
            seen.append(float(y))
            z = x * 2                     # traced: still recorded
        return z + y

    program = jaxprc.make_jaxpr(f)(1.0)
    assert [e.primitive.name for e in program.jaxpr.eqns] == ["mul", "add"]
    assert seen == [pytest.approx(3 * np.sin(2.0), rel=1e-6)]
    np.testing.assert_allclose(jaxprc.jit(f)(1.0), 2 + 3 * np.sin(2.0), rtol=1e-6)


def test_concretization_error_names_value_line_and_fixes():
    def f(x):
        if x > 0:                         # the offending line
            return x
        return -x

    with pytest.raises(ConcretizationTypeError) as info:
        jaxprc.jit(f)(1.0)
    msg = str(info.value)
    assert "bool()" in msg and "test_tracing.py" in msg
    assert "static_argnums" in msg and "lax.cond" in msg


def test_leaked_tracer_is_reported_when_used_later():
    leaked = []
    jaxprc.make_jaxpr(lambda x: leaked.append(x) or x)(1.0)
    with pytest.raises(UnexpectedTracerError, match="unexpected tracer"):
        jnp.sin(leaked[0])
    assert float(jnp.sin(0.0)) == 0.0     # the process stays usable


def test_reemitted_equations_keep_their_original_line():
    program = jaxprc.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0)
    inlined = trace_to_jaxpr(lambda x: eval_jaxpr(program.jaxpr, program.consts, x),
                             [program.in_avals[0]])
    before = [e.source_info.line for e in program.jaxpr.eqns]
    after = [e.source_info.line for e in inlined.jaxpr.eqns]
    assert before == after


def test_non_array_output_is_named_with_its_position():
    with pytest.raises(TypeError, match=r"function <lambda> \(called at .*\) returned a value of type <class 'str'>, "
                                        r"which is not a valid JAX type: output 1 is 'x'"):
        jaxprc.make_jaxpr(lambda a: (a, "x"))(1.0)
