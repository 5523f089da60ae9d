"""Symbolic dimensions (ir/shape_poly.py): normal forms, arithmetic, decisions, parsing, solving."""
import itertools
import operator

import numpy as np

import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.ir import shape_poly as sp
from jaxprc.ir.shape_poly import InconclusiveDimensionOperation, SymbolicScope, symbolic_shape


def test_normal_form_and_text():
    b, h = symbolic_shape("b, h")
    cases = {b + 1: "b + 1", 2 * b + 1: "2*b + 1", b * h + 2 * b - 3: "b*h + 2*b - 3",
             (b + 1) * (b - 1): "b^2 - 1", -b: "- b", 3 - b: "- b + 3", h * b * b + h: "b^2*h + h",
             b // 2: "floordiv(b, 2)", b % 3: "mod(b, 3)", sp.max_dim(b, 4): "max(b, 4)"}
    for expr, text in cases.items():
        assert str(expr) == text
        again, = symbolic_shape(text, scope=b.scope)
        assert again == expr and hash(again) == hash(expr)


def test_constant_results_are_ints():
    b, h = symbolic_shape("b, h")
    for expr, value in [(b - b, 0), ((b + 1) - b, 1), ((2 * b + 3) % 2, 1), (b * h // (b * h), 1),
                        ((b * h) % h, 0), (2 * b * 0, 0), (0 // b, 0), (0 % b, 0)]:
        assert type(expr) is int and expr == value
    assert (2 * b) // 2 == b and (2 * b + 3) // 2 == b + 1 and (b * h) // h == b
    assert divmod(b, 2) == (b // 2, b % 2)


def test_arithmetic_agrees_with_ints():
    """Every expression evaluated at sample points equals the same arithmetic on ints."""
    b, h = symbolic_shape("b, h")
    ops = [lambda x, y: x + y, lambda x, y: x - 2 * y, lambda x, y: x * y + 1,
           lambda x, y: (x * y + 3) // 2, lambda x, y: (x + 5) % 3, lambda x, y: x // y,
           lambda x, y: (3 * x) % y, lambda x, y: sp.max_dim(x, y + 1) - sp.min_dim(x, 2)]
    for op, (vb, vh) in itertools.product(ops, [(1, 1), (2, 7), (9, 4), (13, 13)]):
        assert sp.evaluate(op(b, h), {"b": vb, "h": vh}) == op(vb, vh)


def test_hashable_and_equal():
    b, = symbolic_shape("b")
    b2, = symbolic_shape("b")       # another scope with the same (no) constraints
    assert b == b2 and hash(b) == hash(b2) and {b: 1}[b2] == 1
    assert b != b + 1 and b != 3 and (b == "b") is False
    assert (b,) == (b2,) and len({(b, 1), (b2, 1)}) == 1


def test_comparisons_decided_by_bounds():
    b, h = symbolic_shape("b, h")
    assert b >= 1 and b > 0 and b + 1 > b and 2 * b >= b + 1 and not b < 1 and b * h >= 1
    assert not b - 1 < 0 and b % 3 < 3 and b % 3 >= 0 and b // 2 >= 0
    assert sp.min_dim(b, 5) <= b and sp.max_dim(b, h) >= h and sp.max_dim(b, 5) - sp.min_dim(b, 5) >= 0
    for undecidable in [lambda: b >= 2, lambda: b < h, lambda: b > h, lambda: b <= 5,
                        lambda: sp.min_dim(b, 5) >= 3,
                        lambda: sorted([b, h])]:
        with pytest.raises(InconclusiveDimensionOperation, match="inconclusive"):
            undecidable()
    assert (b == 2) is False and (b != h) is True      # equality never raises (JAX)


def test_constraints_decide():
    scope = SymbolicScope(["b >= 2", "b <= 10", "h >= b + 3"])
    b, h = symbolic_shape("b, h", scope=scope)
    assert b >= 2 and b < 11 and b.bounds() == (2, 10) and h > b and h >= 5 - 1
    assert sp.max_dim(b, 1) == b and sp.min_dim(b, 20) == b and sp.max_dim(b, 5) != b
    with pytest.raises(InconclusiveDimensionOperation):
        b >= 3
    # equality constraints make the left side an alias of the right
    b, n, k = symbolic_shape("b, n, k", constraints=("n == 2*k", "b >= 2"))
    assert n == 2 * k and n // 2 == k and n % 2 == 0 and str(n) == "2*k"


def test_bad_constraints_and_specs():
    for bad, match in [(["b > 2"], "comparison"), (["2*b == h"], "left side"), (["b >= 2 +"], "syntax"),
                       (["1 >= 2"], "always false"), ("b >= 2", "sequence of strings")]:
        with pytest.raises(ValueError, match=match):
            SymbolicScope(bad)
    for bad in ["b,,", "b + ", "3 $ b", "max(b)", "b^h"]:
        with pytest.raises(ValueError, match="syntax error"):
            symbolic_shape(bad)
    with pytest.raises(ValueError, match="both"):
        symbolic_shape("b", constraints=["b >= 2"], scope=SymbolicScope())
    a, = symbolic_shape("a")
    c, = symbolic_shape("c", constraints=["c >= 2"])
    with pytest.raises(ValueError, match="mixing of symbolic scopes"):
        a + c


def test_not_an_int():
    b, = symbolic_shape("b")
    with pytest.raises(InconclusiveDimensionOperation, match="'b'"):
        int(b)
    # as JAX's dimensions, which have no __index__ or __float__: Python's TypeErrors
    for convert in [float, operator.index, lambda d: range(d), lambda d: [0] * d]:
        with pytest.raises(TypeError, match="'b'"):
            convert(b)


def test_spec_forms():
    assert symbolic_shape("(b, 4)") == symbolic_shape("b, 4") and symbolic_shape("") == ()
    assert symbolic_shape(None) == () and symbolic_shape("4, 5") == (4, 5)
    b, = symbolic_shape("b")
    assert symbolic_shape("b^2 - b", scope=b.scope) == (b * b - b,)


def test_solve_dim_vars():
    scope = SymbolicScope(["b >= 2", "n == 2*k"])
    b, n, k = symbolic_shape("b, n, k", scope=scope)
    assert sp.solve_dim_vars([((b, 2 * b + 1), (4, 9)), ((n,), (6,))], scope) == {"b": 4, "k": 3, "n": 6}
    with pytest.raises(ValueError, match="constraint 'b >= 2'"):
        sp.solve_dim_vars([((b,), (1,))], scope)
    with pytest.raises(ValueError, match=r"argument 1 is 8, but its symbolic size '2\*b \+ 1' is 9"):
        sp.solve_dim_vars([((b,), (4,)), ((2 * b + 1,), (8,))], scope)
    with pytest.raises(ValueError, match="argument 0 is 7, but its symbolic size .2\\*k. is never 7"):
        sp.solve_dim_vars([((n,), (7,))], scope)        # n = 2*k is never odd
    with pytest.raises(ValueError, match="Cannot solve"):
        sp.solve_dim_vars([((b * b,), (9,))], scope)


# ------------------------------------------------------------- text form

POLY_PROGRAM = """\
dims b, h where b >= 2, max(b, h) <= 64
{ lambda ; a:f32[b,2*h+1] b:f32[]. let
    c:f32[b,2*h+1] = sin a
    d:f32[b,2*h+1] = broadcast_in_dim[
      broadcast_dimensions=()
      shape=(`b`, `2*h+1`)
    ] b
    e:f32[b,2*h+1] = mul c d
    f:f32[b] = reduce_sum[axes=(1,)] e
  in (f,) }"""


def test_text_round_trip_and_verify():
    from jaxprc.ir import parse, verify
    p = parse(POLY_PROGRAM)
    verify(p)
    b, h = symbolic_shape("b, h", constraints=("b >= 2", "max(b, h) <= 64"))
    assert p.in_avals[0].shape == (b, 2 * h + 1) and p.out_avals[0].shape == (b,)
    assert p.eqns[1].params["shape"] == (b, 2 * h + 1)
    assert str(p) == POLY_PROGRAM and parse(str(p)) == p
    assert hash(parse(str(p))) == hash(p)
    assert p.in_avals[0].str_short() == "f32[b,2*h+1]"


def test_text_errors():
    from jaxprc.ir import ParseError, parse
    body = POLY_PROGRAM.split("\n", 1)[1]
    for header, match in [("", "without a dims line"), ("dims b\n", "undeclared dimension variable 'h'"),
                          ("dims b, h where b > 2\n", "malformed dims line"),
                          ("dims b, 3\n", "'3' is not a dimension variable name"),
                          ("dims b, h where k >= 2\n", "undeclared dimension variable 'k'")]:
        with pytest.raises(ParseError, match=match):
            parse(header + body)
    with pytest.raises(ParseError, match=r"line 9, .* expected f32\[2\*h\+1\]"):   # typed symbolically
        parse(POLY_PROGRAM.replace("reduce_sum[axes=(1,)] e", "reduce_sum[axes=(0,)] e"))


def test_cli_check_polymorphic(tmp_path, capsys):
    from jaxprc.tools.cli import main
    path = tmp_path / "poly.jaxpr"
    path.write_text(POLY_PROGRAM)
    assert main(["check", str(path)]) == 0
    assert "verified, round-trips" in capsys.readouterr().out


# ---------------------------------------------------------------- tracing

def _sds(*shape, dtype=np.float32):
    return jaxprc.ShapeDtypeStruct(shape, dtype)


B, H = symbolic_shape("b, h", constraints=("b >= 2",))

# name -> (function, argument specs, expected output shapes)
TRACED = {
    "elementwise": (lambda x: jnp.sin(x) * 2.0 + x, [(B, 4)], [(B, 4)]),
    "broadcast": (lambda x, y, z: x + y + z, [(B, 1), (1, H), (H,)], [(B, H)]),
    "reduce": (lambda x: jnp.sum(x, axis=0) + jnp.max(x, axis=1, keepdims=True), [(B, 4)], [(B, 4)]),
    "mean": (lambda x: jnp.mean(x, axis=0), [(B, 4)], [(4,)]),
    "dot": (lambda x, w: x @ w, [(B, H), (H, 3)], [(B, 3)]),
    "reshape": (lambda x: (x.reshape(-1), x.reshape((-1, 2, 2)), x.reshape((x.shape[0], 2, 2))),
                [(B, 4)], [(4 * B,), (B, 2, 2), (B, 2, 2)]),
    "transpose": (lambda x: x.T, [(B, H)], [(H, B)]),
    "concatenate": (lambda x, y: jnp.concatenate([x, y, x], axis=0), [(B, 4), (3, 4)], [(2 * B + 3, 4)]),
    "slice": (lambda x: (x[1:], x[:1], x[-1], x[: , 1:3], x[1::2]), [(B, 4)],
              [(B - 1, 4), (1, 4), (4,), (B, 2), ((B - 1 + 1) // 2, 4)]),
    "iota": (lambda x: x + jnp.arange(x.shape[0], dtype=np.float32)[:, None], [(B, 4)], [(B, 4)]),
    "arange_shifted": (lambda x: jnp.arange(2, x.shape[0] + 2), [(B, 4)], [(B,)]),
    "dim_value": (lambda x: x * x.shape[0] + x.shape[0] // 2, [(B, 4)], [(B, 4)]),
    "convert_select": (lambda x: jnp.where(x > 0, x, 0).astype(np.int32), [(B, 4)], [(B, 4)]),
    "cumulative": (lambda x: jnp.cumsum(x, axis=0), [(B, 4)], [(B, 4)]),
    "squeeze_expand": (lambda x: jnp.expand_dims(jnp.squeeze(x[:, :1], 1), 0), [(B, 4)], [(1, B)]),
    "broadcast_to": (lambda x: jnp.broadcast_to(x, (x.shape[0], 4)) + jnp.zeros(x.shape[:1] + (4,)),
                     [(B, 1)], [(B, 4)]),
    "softmax": (lambda x: jax_nn().softmax(x, axis=0), [(B, 4)], [(B, 4)]),
    "tile": (lambda x: jnp.tile(x, (2, 1)), [(B, 4)], [(2 * B, 4)]),
}


def jax_nn():
    import jaxprc.nn
    return jaxprc.nn


@pytest.mark.parametrize("name", sorted(TRACED))
def test_trace_symbolic(name):
    """Each family types symbolic shapes; the program verifies, prints and parses back."""
    from jaxprc.ir import parse, verify
    f, specs, expected = TRACED[name]
    cj = jaxprc.make_jaxpr(f)(*[_sds(*s) for s in specs])
    verify(cj)
    assert [a.shape for a in cj.out_avals] == [tuple(e) for e in expected]
    assert parse(str(cj)) == cj
    shapes = jaxprc.tree_util.tree_map(lambda s: s.shape, jaxprc.eval_shape(f, *[_sds(*s) for s in specs]))
    assert list(shapes) if isinstance(shapes, tuple) else [shapes] == [tuple(e) for e in expected]


def test_undecidable_shape_rule_raises():
    with pytest.raises(InconclusiveDimensionOperation, match="inconclusive"):
        jaxprc.make_jaxpr(lambda x: jnp.zeros((x.shape[0] - 3,)))(_sds(B))   # b - 3 may be < 0
    with pytest.raises(InconclusiveDimensionOperation, match="inconclusive"):
        jaxprc.make_jaxpr(lambda x: jaxprc.lax.slice(x, (0,), (3,)))(_sds(B))     # 3 <= b?
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(b,\), \(h,\)\."):
        jaxprc.make_jaxpr(lambda x, y: x + y)(_sds(B), _sds(H))
    with pytest.raises(TypeError, match="reshape"):
        jaxprc.make_jaxpr(lambda x: x.reshape((3, -1)))(_sds(B, 4))


# ------------------------------------------- running at concrete sizes

def _mlp_loss(x, w):
    return jnp.sum(jnp.tanh(x @ w)) / x.shape[0] + jnp.arange(x.shape[0])[1:].sum()


TRANSFORMED = {      # name -> function of (x: f32[b,4], w: f32[4,3]) traced polymorphically
    "mlp": _mlp_loss,
    "grad": lambda x, w: jaxprc.grad(_mlp_loss, argnums=(0, 1))(x, w),
    "vmap": lambda x, w: jaxprc.vmap(lambda r: jnp.tanh(r @ w) * x.shape[0])(x),
    "jvp": lambda x, w: jaxprc.jvp(lambda v: _mlp_loss(v, w), (x,), (jnp.ones_like(x),)),
    "transpose": lambda x, w: jaxprc.linear_transpose(
        lambda v: jnp.cumsum(v @ w, axis=0)[1:], x)(jnp.ones((x.shape[0] - 1, 3), np.float32)),
    "slices": lambda x, w: (jnp.concatenate([x[1:], x[:1]]) * jnp.arange(2, x.shape[0] + 2)[:, None],
                            x.reshape(-1, 2).T, jnp.mean(x, axis=0)),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMED))
def test_polymorphic_program_runs_at_several_sizes(name):
    """Traced once with b symbolic and read back from text, the program runs at every size
    with the values of the program traced for that size."""
    from jaxprc.ir import parse
    f = TRANSFORMED[name]
    poly = parse(str(jaxprc.make_jaxpr(f)(_sds(B, 4), _sds(4, 3))))
    run = jaxprc.jit(jaxprc.jaxpr_as_fun(poly))
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    for n in (2, 5):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        got, want = run(x, w), jaxprc.tree_util.tree_leaves(jaxprc.jit(f)(x, w))
        assert len(got) == len(want)
        for g, v in zip(got, want):
            assert g.shape == v.shape and g.dtype == v.dtype
            np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-5)


def test_polymorphic_call_checks_sizes():
    poly = jaxprc.make_jaxpr(_mlp_loss)(_sds(B, 4), _sds(4, 3))
    run = jaxprc.jaxpr_as_fun(poly)
    w = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"constraint 'b >= 2': at b = 1 it reads 1 >= 2"):
        run(np.ones((1, 4), np.float32), w)
    with pytest.raises(ValueError, match="dimension 1 of argument 0 is 5, but its size is 4"):
        run(np.ones((3, 5), np.float32), w)
    with pytest.raises(ValueError, match=r"argument 1 has shape \(4,\), but its type is f32\[4,3\]"):
        run(np.ones((3, 4), np.float32), np.ones(4, np.float32))
    assert float(run(np.zeros((3, 4), np.float32), w)[0]) == 3.0       # still usable


RUN_PROGRAM = """\
dims b where b >= 2
{ lambda ; a:f32[b,2]. let
    b:~i32[] = dim_as_value[dim=`b`]
    c:f32[] = convert_element_type[new_dtype=f32 weak_type=False] b
    d:f32[b,2] = broadcast_in_dim[broadcast_dimensions=() shape=(`b`, 2)] c
    e:f32[b,2] = mul a d
  in (e,) }"""


def test_cli_runs_polymorphic_program_at_any_size(tmp_path, capsys):
    from jaxprc.tools.cli import main
    path = tmp_path / "poly.jaxpr"
    path.write_text(RUN_PROGRAM)
    assert main(["run", str(path), "--input", "a=[[1,2],[3,4],[5,6]]"]) == 0
    assert "[[ 3.,  6.],\n [ 9., 12.],\n [15., 18.]]" in capsys.readouterr().out
    assert main(["run", str(path), "--input", "a=[[1,2],[3,4]]"]) == 0
    assert "[[2., 4.],\n [6., 8.]]" in capsys.readouterr().out
    assert main(["run", str(path), "--input", "a=[[1,2]]"]) == 1
    assert "constraint 'b >= 2': at b = 1" in capsys.readouterr().err


def test_cli_traces_with_symbolic_args(tmp_path, capsys):
    from jaxprc.ir import parse
    from jaxprc.tools.cli import main
    model = tmp_path / "model.py"
    model.write_text("import jaxprc.numpy as jnp\n"
                     "def predict(x, w):\n    return jnp.tanh(x @ w).mean(axis=0) * x.shape[0]\n")
    assert main(["trace", f"{model}:predict", "--args", "f32[b,784], f32[784,10]",
                 "--constraints", "b >= 2, b <= 4096"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("dims b where b >= 2, b <= 4096\n{ lambda ; a:f32[b,784] b:f32[784,10]. let")
    assert str(parse(text)) == text.rstrip("\n")
    assert main(["trace", f"{model}:predict", "--args", "f32[b+,784], f32[784,10]"]) == 1
    assert "bad type text 'f32[b+,784]': syntax error" in capsys.readouterr().err


S = {"x": (B, 4), "x3": (B, 2, 3), "y3": (B, 3, 4), "img": (B, 1, 6, 6)}
MORE = {     # name -> (function, argument names in S); run at b = 2 and 5 against the static program
    "scan": (lambda x: jaxprc.lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(4), x), ["x"]),
    "fori_to_dim": (lambda x: jaxprc.lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i], jnp.zeros(4)), ["x"]),
    "cond_while": (lambda x: jaxprc.lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, jaxprc.lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1]), ["x"]),
    "sort_top_k": (lambda x: (jnp.sort(x, axis=0), jaxprc.lax.top_k(x, 2)[0], jnp.argmax(x, axis=0)), ["x"]),
    "prefix": (lambda x: (x[:5], jnp.flip(x, 0), jnp.pad(x, ((1, 2), (0, 0))), x.at[0].set(1.0)), ["x"]),
    "batched_matmul": (lambda x, y: jnp.einsum("bij,bjk->bik", x, y), ["x3", "y3"]),
    "conv_pool": (lambda v: jaxprc.lax.reduce_window(jaxprc.lax.conv(v, jnp.ones((2, 1, 3, 3)), (1, 1), "SAME"),
                                                     0.0, jaxprc.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
                  ["img"]),
    "remat_grad": (lambda x: jaxprc.grad(jaxprc.checkpoint(lambda v: jnp.sin(v).sum() / v.shape[0]))(x), ["x"]),
}


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_families_run_at_several_sizes(name):
    f, names = MORE[name]
    poly = jaxprc.make_jaxpr(f)(*[_sds(*S[n]) for n in names])
    run = jaxprc.jit(jaxprc.jaxpr_as_fun(poly))
    rng = np.random.default_rng(1)
    for n in (2, 5):
        args = [rng.normal(size=[n if d is B else d for d in S[k]]).astype(np.float32) for k in names]
        got, want = run(*args), jaxprc.tree_util.tree_leaves(jaxprc.jit(f)(*args))
        for g, v in zip(got, want):
            assert g.shape == v.shape
            np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-5)


def test_example_program_runs_as_the_static_gradient():
    import pathlib
    from jaxprc.ir import parse
    root = pathlib.Path(__file__).resolve().parents[1]
    poly = parse((root / "examples" / "poly_loss_grad.jaxpr").read_text())
    loss = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    run = jaxprc.jit(jaxprc.jaxpr_as_fun(poly))
    rng = np.random.default_rng(2)
    for n in (2, 6):
        w, x = rng.normal(size=(n, 4)).astype(np.float32), rng.normal(size=n).astype(np.float32)
        np.testing.assert_allclose(run(w, x)[0], jaxprc.grad(loss)(w, x), rtol=1e-5, atol=1e-6)


def test_pass_pipelines_on_a_polymorphic_program():
    """The passes keep the symbolic types (verified after each pass); specialising the
    polymorphic gradient gives the gradient traced at that size."""
    import pathlib
    from jaxprc.ir import parse
    from jaxprc.passes import PassError, run_pipeline
    root = pathlib.Path(__file__).resolve().parents[1]
    poly = parse((root / "examples" / "poly_loss_grad.jaxpr").read_text())
    n, = symbolic_shape("n", constraints=("n >= 2",))
    for pipeline, in_shapes in [("jvp,dce,cse", [(n, 4), (n,), (n, 4), (n,)]),
                                ("vmap:axis_size=3,dce", [(3, n, 4), (3, n)]),
                                ("linearize,inline", None)]:
        out = run_pipeline(poly, pipeline, verify=True)
        assert parse(str(out)) == out
        if in_shapes is not None:
            assert [a.shape for a in out.in_avals] == in_shapes
    static = jaxprc.make_jaxpr(jaxprc.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)))(
        _sds(3, 4), _sds(3))
    assert run_pipeline(poly, "specialize:n=3") == static
    with pytest.raises(PassError, match="constraint 'n >= 2'"):
        run_pipeline(poly, "specialize:n=1")
    with pytest.raises(PassError, match="a size for each dimension variable"):
        run_pipeline(poly, "specialize:m=3")


def test_jit_of_a_polymorphic_program_compiles_once_per_size():
    poly = jaxprc.make_jaxpr(lambda x: jnp.tanh(x) * x.shape[0])(_sds(symbolic_shape("b")[0], 3))
    run = jaxprc.jit(jaxprc.jaxpr_as_fun(poly))
    compiled = []

    def listen(event, duration, **_):
        if event == jaxprc.runtime.monitoring.BACKEND_COMPILE_EVENT:
            compiled.append(event)

    jaxprc.monitoring.register_event_duration_secs_listener(listen)
    try:
        for n in (2, 5, 2, 5, 2):
            x = np.full((n, 3), 0.5, np.float32)
            np.testing.assert_allclose(run(x)[0], np.tanh(x) * n, rtol=1e-6)
    finally:
        jaxprc.monitoring.unregister_event_duration_listener(listen)
    assert len(compiled) == 2


def test_transpose_pass_on_a_polymorphic_linear_program():
    """The transpose pass keeps the symbolic types; specialised, the transposed program gives
    linear_transpose's cotangents at that size."""
    from jaxprc.ir import parse
    from jaxprc.passes import run_pipeline
    linear = lambda x: (2.0 * x.sum(axis=0), x[1:] * 3.0)          # noqa: E731
    b, = symbolic_shape("b", constraints=("b >= 2",))
    poly = jaxprc.make_jaxpr(linear)(_sds(b, 3))
    transposed = run_pipeline(poly, "transpose", verify=True)
    assert parse(str(transposed)) == transposed
    assert [a.shape for a in transposed.out_avals] == [(b, 3)]
    run = jaxprc.jaxpr_as_fun(transposed)
    for n in (2, 4):
        cts = (np.arange(3, dtype=np.float32), np.ones((n - 1, 3), np.float32))
        want = jaxprc.linear_transpose(linear, np.zeros((n, 3), np.float32))(cts)
        np.testing.assert_allclose(run(*cts)[0], want[0])


def test_composite_decomposition_reads_dimension_values():
    """A composite whose decomposition needs the batch size (as a value and as a shape) takes the
    dimension variables first, like every private function of a polymorphic module: the exported
    artifact runs at each size as the static program."""
    scaled = jaxprc.lax.composite(lambda x: x * x.shape[0] + jaxprc.lax.broadcasted_iota(x.dtype, x.shape, 0),
                                  name="my.scaled")
    f = lambda x: scaled(x) * 2                     # noqa: E731
    b, = symbolic_shape("b")
    exp = jaxprc.export.export(jaxprc.jit(f))(jaxprc.ShapeDtypeStruct((b, 3), np.float32))
    assert 'stablehlo.composite "my.scaled"' in exp.mlir_module()
    exp = jaxprc.export.deserialize(exp.serialize())
    for n in (2, 5):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        want = (x * n + np.arange(n, dtype=np.float32)[:, None]) * 2
        np.testing.assert_array_equal(exp.call(x), want)
        np.testing.assert_array_equal(jaxprc.jit(f)(x), want)
