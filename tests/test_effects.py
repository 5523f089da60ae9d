"""Effects in the IR: which equations have them, how they print and parse, and the passes that
must respect them (DCE, CSE, partial evaluation) and propagate them (calls, loops, cond, remat)."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.experimental import io_callback
from jaxprc.ir import Effect, HostCallback, ParseError, parse
from jaxprc.ir.core import Primitive
from jaxprc.ir.effects import has_ordered_effects, jaxpr_effects
from jaxprc.passes import run_pipeline
from jaxprc.passes.partial_eval import partial_eval_jaxpr

from roundtrip import assert_round_trip as _assert_round_trip


def assert_round_trip(cj):
    """The text round trip, the parsed program's callbacks bound to the original functions."""
    text = str(cj)
    back = parse(text, callbacks=jx.ir.program_callbacks(cj))
    assert str(back) == text and back == cj and hash(back) == hash(cj)
    unbound = parse(text)
    _assert_round_trip(unbound)

F32 = np.float32
S = jx.ShapeDtypeStruct((), F32)


def _show(x):
    jx.debug.print("x={}", x)


def _io(x, ordered=False):
    return io_callback(np.cos, S, x, ordered=ordered)


def _pure(x):
    return jx.pure_callback(np.sin, S, x)


def test_equation_effects_come_from_primitive_and_params():
    cj = jx.make_jaxpr(lambda x: (_show(x), jx.debug.print("o", ordered=True), _io(x), _io(x, True),
                                  _pure(x))[-1])(1.0)
    assert [e.effects for e in cj.eqns] == [{Effect.debug}, {Effect.ordered_debug}, {Effect.io},
                                           {Effect.ordered_io}, set()]
    assert cj.effects == {Effect.debug, Effect.ordered_debug, Effect.io, Effect.ordered_io}
    assert jx.make_jaxpr(jnp.sin)(1.0).effects == set()
    assert [e.ordered for e in Effect] == [False, True, False, True, False]      # check: unordered


@pytest.mark.parametrize("wrap", ["jit", "scan", "while", "cond", "checkpoint", "custom_jvp"])
def test_effects_propagate_from_sub_jaxprs(wrap):
    def body(x):
        jx.debug.print("{}", x, ordered=True)
        return x

    @jx.custom_jvp
    def cj_fun(x):
        return body(x)
    cj_fun.defjvp(lambda p, t: (cj_fun(p[0]), t[0]))
    fun = {"jit": jx.jit(body),
           "scan": lambda x: lax.scan(lambda c, a: (body(c), a), x, jnp.zeros(2))[0],
           "while": lambda x: lax.while_loop(lambda c: c < 1.0, lambda c: body(c) + 1.0, x),
           "cond": lambda x: lax.cond(x > 0, body, lambda y: y, x),
           "checkpoint": jx.checkpoint(body),
           "custom_jvp": cj_fun}[wrap]
    cj = jx.make_jaxpr(fun)(1.0)
    outer = [e for e in cj.eqns if e.effects]
    assert len(outer) == 1 and outer[0].effects == {Effect.ordered_debug}
    assert has_ordered_effects(cj) and jaxpr_effects(cj.jaxpr) == {Effect.ordered_debug}
    assert "!{ordered_debug}" in str(cj)
    assert_round_trip(cj)


def test_text_form_prints_effects_and_callbacks_by_name():
    cj = jx.make_jaxpr(lambda x: _io(x, True) + _pure(x))(1.0)
    text = str(cj)
    assert 'callback=HostCallback(name="cos")' in text and "] a !{ordered_io}" in text
    assert 'HostCallback(name="sin")' in text
    back = parse(text)
    assert str(back) == text and back.effects == {Effect.ordered_io}
    assert all(e.params["callback"].fn is None for e in back.eqns[:2])


def test_parser_checks_the_written_effects():
    good = ('{ lambda ; a:f32[]. let _ = debug_callback[callback=HostCallback(name="f") '
            'effect=Effect.debug partitioned=False] a !{debug} in () }')
    assert parse(good).effects == {Effect.debug}
    for wrong, what in [("!{debug}", "!{io}"), ("!{debug}", ""), ("!{debug}", "!{debug, io}")]:
        with pytest.raises(ParseError, match="debug_callback is written with effects"):
            parse(good.replace(wrong, what))
    with pytest.raises(ParseError, match="unknown effect 'loud'"):
        parse(good.replace("!{debug}", "!{loud}"))
    with pytest.raises(ParseError, match="sin is written with effects"):
        parse("{ lambda ; a:f32[]. let b:f32[] = sin a !{io} in (b,) }")
    with pytest.raises(ParseError, match="HostCallback"):
        parse(good.replace('HostCallback(name="f")', '"f"'))


def test_user_primitive_declares_effects():
    p = Primitive("test_effects_probe")
    p.def_abstract_eval(lambda x, *, loud: x)
    p.def_effects(lambda *, loud: {Effect.io} if loud else set())
    cj = jx.make_jaxpr(lambda x: (p.bind(x, loud=True), p.bind(x, loud=False))[1])(1.0)
    assert [e.effects for e in cj.eqns] == [{Effect.io}, set()]
    dced = run_pipeline(cj, "dce")
    assert [e.params["loud"] for e in dced.eqns] == [True, False]
    assert "loud=True] a !{io}" in str(cj)


def test_library_defined_effect_kind():
    """jax.extend.core.Effect subclassed by a library (as flax nnx does): the equation carries it,
    prints it by its class's name, and DCE keeps the equation."""
    from jaxprc.extend.core import Effect as LibraryEffect
    from jaxprc.ir.effects import control_flow_allowed_effects

    class StateEffect(LibraryEffect):
        pass
    state = StateEffect()
    control_flow_allowed_effects.add_type(StateEffect)
    assert control_flow_allowed_effects.contains(state) and not control_flow_allowed_effects.contains(Effect.io)
    p = Primitive("test_library_effect_probe")
    p.def_abstract_eval(lambda x: x)
    p.def_effects(lambda: {state})
    cj = jx.make_jaxpr(lambda x: (p.bind(x), x)[1])(1.0)
    assert cj.effects == {state} and not state.ordered
    assert "test_library_effect_probe a !{StateEffect}" in str(cj)
    assert [e.primitive for e in run_pipeline(cj, "dce").eqns] == [p]


def test_dce_keeps_effects_and_drops_unused_pure_callbacks():
    def f(x):
        _pure(x)
        _io(x)
        _show(x)
        lax.scan(lambda c, a: (c, _show(a)), 0.0, jnp.zeros(2))    # effect inside a loop
        jx.jit(lambda y: (_pure(y), y)[1])(x)                      # pure inside a call: goes
        return x
    cj = run_pipeline(jx.make_jaxpr(f)(1.0), "dce")
    names = [e.primitive.name for e in cj.eqns]
    assert names == ["io_callback", "debug_callback", "broadcast_in_dim", "scan"], names
    assert [e.primitive.name for e in cj.eqns[-1].params["jaxpr"].eqns] == ["debug_callback"]


def test_cse_merges_pure_callbacks_only():
    cj = jx.make_jaxpr(lambda x: _pure(x) + _pure(x) + _io(x) + _io(x))(1.0)
    names = [e.primitive.name for e in run_pipeline(cj, "cse").eqns]
    assert names.count("pure_callback") == 1 and names.count("io_callback") == 2
    other = jx.make_jaxpr(lambda x: _pure(x) + jx.pure_callback(np.tan, S, x))(1.0)
    assert [e.primitive.name for e in run_pipeline(other, "cse").eqns].count("pure_callback") == 2


def test_partial_eval_keeps_a_print_of_known_values_in_the_known_part():
    def f(x):
        _show(x)
        return jnp.sin(x) * x
    jvp = jx.make_jaxpr(lambda x, t: jx.jvp(f, (x,), (t,)))(1.0, 1.0)
    known, unknown, _, _ = partial_eval_jaxpr(jvp, [False, True], True)
    assert known.effects == {Effect.debug} and unknown.effects == set()
    grad = jx.make_jaxpr(jx.grad(f))(1.0)
    assert [e.primitive.name for e in grad.eqns].count("debug_callback") == 1


def test_callbacks_compare_by_function_identity():
    a, b = jx.make_jaxpr(_pure)(1.0), jx.make_jaxpr(_pure)(1.0)
    assert a == b and hash(a) == hash(b)
    c = jx.make_jaxpr(lambda x: jx.pure_callback(lambda v: np.sin(v), S, x))(1.0)
    d = jx.make_jaxpr(lambda x: jx.pure_callback(lambda v: np.sin(v), S, x))(1.0)
    assert c != d            # same name and text, different functions
    assert HostCallback("f") == HostCallback("f") != HostCallback("g")
    assert HostCallback("f", np.sin) != HostCallback("f")


def test_bind_callbacks_names_unknown_names():
    back = parse(str(jx.make_jaxpr(_pure)(1.0)))
    with pytest.raises(KeyError, match="no callback named 'cos'; it calls 'sin'"):
        jx.ir.bind_callbacks(back, {"cos": np.cos})
    assert jx.ir.bind_callbacks(back, {"sin": np.sin}) == 1


def test_effects_of_shared_jaxprs_are_known_when_parsed():
    g = jx.jit(lambda x: (jx.debug.print("{}", x, ordered=True), x + 1)[1])
    cj = jx.make_jaxpr(lambda x: lax.cond(x > 0, lambda y: g(g(y)), lambda y: y, x))(1.0)
    text = str(cj)
    assert "= jaxpr {" in text and text.count("!{ordered_debug}") == 4   # cond, 2 calls, the print
    assert_round_trip(cj)
    with pytest.raises(ParseError, match="cond is written with effects"):
        parse(text.replace("] c a !{ordered_debug}", "] c a", 1))
