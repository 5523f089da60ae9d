"""Real programs trace to IR that verifies and round-trips through the parser, and bad input
gives one-paragraph errors naming the user's line (this file's)."""
import inspect

import numpy as np
import pytest

import jaxprc
import jaxprc.nn as nn
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import alpha_equivalent, parse, verify

RNG = np.random.default_rng(3)
F32 = np.float32
HERE = __file__


def here_line(offset: int = 0) -> str:
    """``this_file:line`` of the caller's line plus ``offset``: where an error must point."""
    return f"{HERE}:{inspect.currentframe().f_back.f_lineno + offset}"


def check_round_trip(cj):
    """The printed program verifies, parses back, prints identically and is alpha-equivalent."""
    verify(cj)
    text = str(cj)
    again = parse(text)
    verify(again)
    assert str(again) == text
    assert alpha_equivalent(again, cj)
    return text


# ------------------------------------------------------- readable, round-tripping IR

def mlp_loss(params, x, labels):
    (w1, b1), (w2, b2) = params
    hidden = nn.relu(x @ w1 + b1)
    logits = hidden @ w2 + b2
    return -jnp.mean(jnp.sum(nn.log_softmax(logits) * nn.one_hot(labels, 3), axis=-1))


MLP_ARGS = (((RNG.normal(size=(4, 8)).astype(F32), np.zeros(8, F32)),
             (RNG.normal(size=(8, 3)).astype(F32), np.zeros(3, F32))),
            RNG.normal(size=(5, 4)).astype(F32), np.array([0, 2, 1, 1, 0], np.int32))


def test_mlp_loss_ir_round_trips_and_reads_like_jax():
    cj = jaxprc.make_jaxpr(mlp_loss)(*MLP_ARGS)
    text = check_round_trip(cj)
    assert text.startswith("{ lambda ; a:f32[4,8] b:f32[8] c:f32[8,3] d:f32[3] e:f32[5,4] f:i32[5]. let")
    assert [str(a) for a in cj.out_avals] == ["float32[]"]   # str of a type is JAX's
    for op in ("dot_general", "broadcast_in_dim", "exp", "log", "reduce_max", "reduce_sum", "eq", "neg"):
        assert f"= {op}" in text, op
    # The jaxpr computes the loss: evaluating it agrees with running the function eagerly.
    (w1, b1), (w2, b2) = MLP_ARGS[0]
    out, = jaxprc.jaxpr_as_fun(cj)(w1, b1, w2, b2, *MLP_ARGS[1:])
    logits = np.maximum(MLP_ARGS[1] @ w1 + b1, 0) @ w2 + b2
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(out), -logp[np.arange(5), MLP_ARGS[2]].mean(), rtol=1e-5)


def test_grad_of_mlp_loss_round_trips():
    check_round_trip(jaxprc.make_jaxpr(jaxprc.grad(mlp_loss))(*MLP_ARGS))


def rnn(w, h0, xs):
    def step(h, x):
        h = jnp.tanh(w @ h + x)
        return h, jnp.sum(h)
    return lax.scan(step, h0, xs)


def test_scan_rnn_ir_round_trips():
    w, h0, xs = RNG.normal(size=(3, 3)).astype(F32), np.zeros(3, F32), RNG.normal(size=(6, 3)).astype(F32)
    cj = jaxprc.make_jaxpr(rnn)(w, h0, xs)
    text = check_round_trip(cj)
    assert "scan[" in text and "length=6" in text and "num_carry=1" in text and "num_consts=1" in text
    assert [a.str_short() for a in cj.out_avals] == ["f32[3]", "f32[6]"]
    # Matrix-vector products are one dot_general, as in JAX (no reshapes around it).
    assert "squeeze" not in text and text.count("dot_general") == 1
    h, sums = jaxprc.jaxpr_as_fun(cj)(w, h0, xs)
    expected_h, expected_sums = h0, []
    for x in xs:
        expected_h = np.tanh(w @ expected_h + x)
        expected_sums.append(expected_h.sum())
    np.testing.assert_allclose(np.asarray(h), expected_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(sums), expected_sums, rtol=1e-5, atol=1e-6)


def collatz_steps(n):
    def body(state):
        k, steps = state
        return jnp.where(k % 2 == 0, k // 2, 3 * k + 1), steps + 1
    return lax.while_loop(lambda state: state[0] != 1, body, (n, 0))


def test_while_loop_ir_round_trips():
    cj = jaxprc.make_jaxpr(collatz_steps)(np.int32(6))
    text = check_round_trip(cj)
    assert "while[" in text and "cond_jaxpr=" in text and "body_jaxpr=" in text
    assert [a.dtype for a in cj.out_avals] == [np.int32, np.int32]
    k, steps = jaxprc.jaxpr_as_fun(cj)(np.int32(6))
    assert (int(k), int(steps)) == (1, 8)


# ----------------------------------------------------- errors naming the user's line

X23 = np.ones((2, 3), F32)


def test_dot_shape_error_names_the_line():
    with pytest.raises(TypeError) as e:
        jaxprc.make_jaxpr(lambda a, b: jnp.dot(a, b))(X23, X23)
    message = str(e.value)
    assert here_line(-2) in message and "(2, 3) and (2, 3) are not aligned" in message
    assert "\n" not in message


def test_matmul_shape_error_names_the_line():
    f = jaxprc.jit(lambda a, b: a @ b)
    with pytest.raises(TypeError) as e:
        f(X23, np.ones(2, F32))
    assert here_line(-3) in str(e.value) and "(2, 3) and (2,)" in str(e.value)
    with pytest.raises(TypeError, match=r"matmul \(at .*test_round_trip_and_user_errors.py:\d+\): contracting"):
        jnp.matmul(X23, X23)


def test_mismatched_cond_branches_name_both_types_and_lines():
    def true_branch(v):
        return v

    def false_branch(v):
        return v.sum()

    with pytest.raises(TypeError) as e:
        jaxprc.make_jaxpr(lambda p, v: lax.cond(p, true_branch, false_branch, v))(True, X23)
    message = str(e.value)
    assert "float32[2,3]" in message and "float32[]" in message      # (JAX's type names)
    assert f"{HERE}:{true_branch.__code__.co_firstlineno}" in message
    assert f"{HERE}:{false_branch.__code__.co_firstlineno}" in message


def test_non_boolean_while_condition_says_what_it_returned():
    def cond_fun(c):
        return c

    with pytest.raises(TypeError) as e:      # JAX's words, which name no function
        lax.while_loop(cond_fun, lambda c: c + 1, np.float32(0))
    assert str(e.value) == "cond_fun must return a boolean scalar, but got output type(s) [ShapedArray(float32[])]."


def test_non_array_operand_names_the_line():
    with pytest.raises(TypeError) as e:
        jnp.add(X23, "one")
    assert here_line(-1) in str(e.value) and "'one' of type str" in str(e.value)


@pytest.mark.parametrize("transform", [jaxprc.make_jaxpr, jaxprc.jit])
def test_string_argument_is_rejected(transform):
    with pytest.raises(TypeError, match="'hello' of type str is not a valid JAX type"):
        transform(lambda a, s: a)(X23, "hello")


def test_string_argument_error_names_the_line():
    with pytest.raises(TypeError) as e:
        jaxprc.jit(lambda a, s: a)(X23, "hello")
    assert here_line(-1) in str(e.value)


@pytest.mark.parametrize("transform", [jaxprc.make_jaxpr, jaxprc.jit])
def test_non_array_output_names_the_line(transform):
    with pytest.raises(TypeError) as e:
        transform(lambda a: (a, "label"))(X23)
    message = str(e.value)
    assert f"(called at {here_line(-2)})" in message and "returned a value of type <class 'str'>" in message
    assert "\n" not in message


def positive_part(x):
    if x.sum() > 0:      # Python control flow on a traced value
        return x
    return -x


def test_python_if_on_traced_value_under_jit():
    with pytest.raises(jaxprc.ConcretizationTypeError) as e:
        jaxprc.jit(positive_part)(X23)
    message = str(e.value)
    line = f"{HERE}:{positive_part.__code__.co_firstlineno + 1}"
    assert f"bool() was called at {line}" in message
    assert "JitTracer(bool[])" in message                   # the value
    assert "static_argnums" in message and "lax.cond" in message   # the fixes
    headline, details = message.split("\n")         # JAX's line, then what and where in one paragraph
    assert headline == "Attempted boolean conversion of traced array with shape bool[]."
    assert f"bool() was called at {line}" in details
    # Outside any transformation the same function just runs.
    np.testing.assert_array_equal(np.asarray(positive_part(jnp.asarray(X23))), X23)


@pytest.mark.parametrize("convert,name", [(int, "int()"), (float, "float()"), (range, "__index__()")])
def test_python_conversions_of_traced_values(convert, name):
    with pytest.raises(jaxprc.ConcretizationTypeError) as e:
        jaxprc.jit(lambda x: convert(x[0, 0].astype(jnp.int32)))(X23)
    assert f"{name} was called at {here_line(-1)}" in str(e.value)


# --------------------------------------------- indexing, .at, iteration and len on tracers

def test_indexing_at_iteration_and_len_under_jit():
    x = np.arange(12, dtype=F32).reshape(3, 4)
    rows = np.array([2, 0, 2])
    mask = x[:, 0] > 3         # a constant mask: its shape is static

    def f(a, idx):
        return (a[idx], a[mask], a[:, idx[:2]], a.at[idx].add(1.0), a.at[mask].set(0.0),
                a.at[0, idx].mul(2.0), a.at[idx].get(), [r.sum() for r in a], len(a), a.var(), a.var(1))

    outs = jaxprc.jit(f)(x, rows)
    expected_add = x.copy()
    np.add.at(expected_add, rows, 1.0)
    expected_set = x.copy()
    expected_set[mask] = 0.0
    expected_mul = x.copy()
    np.multiply.at(expected_mul, (0, rows), 2.0)
    expected = (x[rows], x[mask], x[:, rows[:2]], expected_add, expected_set, expected_mul, x[rows],
                list(x.sum(1)), 3, x.var(), x.var(1))
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    text = str(jaxprc.make_jaxpr(f)(x, rows))
    assert "gather[" in text and "scatter-add[" in text and "scatter-mul[" in text and "scatter[" in text


def test_traced_boolean_mask_and_empty_axis_index_name_the_line():
    with pytest.raises(IndexError) as e:
        jaxprc.jit(lambda a: a[a > 0])(X23)
    assert "boolean indices must be concrete" in str(e.value) and here_line(-1) in str(e.value)
    with pytest.raises(IndexError) as e:
        jaxprc.make_jaxpr(lambda a: a[:, 0])(X23[:, :0])
    assert "out of bounds" in str(e.value) and here_line(-1) in str(e.value)


def test_iterating_or_len_of_a_scalar_tracer_is_an_error():
    with pytest.raises(TypeError):
        jaxprc.make_jaxpr(lambda a: list(a.sum()))(X23)
    with pytest.raises(TypeError):
        jaxprc.make_jaxpr(lambda a: len(a.sum()))(X23)
