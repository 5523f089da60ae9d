"""jaxprc.export: export(jit(f))(*specs) -> Exported, called at several sizes (values against the
function jitted for each size), its calling convention and its errors."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import export
from jaxprc.ir.parser import ParseError, parse


def _model(d):
    return {"y": jnp.tanh(d["x"] @ d["w"]) * d["x"].shape[0], "mean": jnp.mean(d["x"], axis=0)}


ARGS = {"x": np.ones((3, 4), np.float32), "w": np.ones((4, 2), np.float32)}


def _exported():
    specs = export.symbolic_args_specs(ARGS, {"x": "b, _", "w": None}, constraints=["b >= 2"])
    return export.export(jaxprc.jit(_model))(specs)


def test_export_calling_convention():
    exp = _exported()
    b, = export.symbolic_shape("b", constraints=["b >= 2"])
    assert [a.shape for a in exp.in_avals] == [(4, 2), (b, 4)]
    assert [a.shape for a in exp.out_avals] == [(4,), (b, 2)]
    assert exp.in_tree == jaxprc.tree_util.tree_structure(((ARGS,), {}))
    assert exp.out_tree == jaxprc.tree_util.tree_structure({"y": 0, "mean": 0})
    assert exp.platforms == (jaxprc.default_backend(),) and exp.fun_name == "_model"
    assert export.is_symbolic_dim(b) and not export.is_symbolic_dim(3)


def test_exported_call_at_several_sizes():
    exp = _exported()
    rng = np.random.default_rng(0)
    for n in (2, 5, 9):
        args = {"x": rng.normal(size=(n, 4)).astype(np.float32), "w": rng.normal(size=(4, 2)).astype(np.float32)}
        got, want = exp.call(args), jaxprc.jit(_model)(args)
        for k in want:
            assert got[k].shape == want[k].shape
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)


def test_exported_call_errors():
    exp = _exported()
    with pytest.raises(ValueError, match="constraint 'b >= 2'"):
        exp.call({"x": np.ones((1, 4), np.float32), "w": np.ones((4, 2), np.float32)})
    with pytest.raises(ValueError, match="pytree structure"):
        exp.call(np.ones((3, 4), np.float32))
    with pytest.raises(TypeError, match="dtype int32"):
        exp.call({"x": np.ones((3, 4), np.int32), "w": np.ones((4, 2), np.float32)})
    with pytest.raises(ValueError, match="exported for platforms"):
        export.export(jaxprc.jit(_model), platforms=["tpu"])(ARGS).call(ARGS)
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(_model)


def test_polymorphic_export_is_a_dynamic_module():
    """Serialized, a polymorphic program is one module with dynamic sizes: deserialized, it runs
    at each size (refined to it) with the values and gradients of the traced program."""
    exp = _exported()
    text = exp.mlir_module()
    assert "tensor<?x4xf32>" in text and "stablehlo.get_dimension_size" in text
    assert text.count("@shape_assertion") == 2          # b >= 1, and the constraint b >= 2
    back = export.deserialize(exp.serialize(vjp_order=1))
    assert back.uses_global_constants and str(back.in_avals[1].shape) == "(b, 4)"
    rng = np.random.default_rng(0)
    for n in (2, 5):
        args = {"x": rng.normal(size=(n, 4)).astype(np.float32), "w": rng.normal(size=(4, 2)).astype(np.float32)}
        _assert_trees_equal(back.call(args), jaxprc.jit(_model)(args))
        loss = lambda call: lambda x: call({"x": x, "w": args["w"]})["y"].sum()
        np.testing.assert_allclose(jaxprc.grad(loss(back.call))(args["x"]), jaxprc.grad(loss(_model))(args["x"]),
                                   rtol=1e-5)
    with pytest.raises(ValueError, match="symbolic shape constraint b >= 2"):
        back.call({"x": np.ones((1, 4), np.float32), "w": np.ones((4, 2), np.float32)})


def test_dynamic_lowering_of_dimension_arithmetic():
    """arange, reshape(-1), broadcasting and a dimension as a value, over b and floordiv/mod of it;
    loops whose trip count is b."""
    def f(x):
        n = x.shape[0]
        flat = x.reshape(-1)
        return flat * (n // 2) + (n % 3), jnp.arange(2 * n) + n, jnp.zeros((n, 2)) + x[:, :1]
    def loops(x):           # trip counts of the symbolic length: a fori_loop, a reversed scan with ys
        total = jaxprc.lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i] * i, jnp.zeros(3))
        carry, ys = jaxprc.lax.scan(lambda c, row: (c * 0.5 + row, c.sum()), jnp.ones(3), x, reverse=True)
        return total, carry, ys
    b, = export.symbolic_shape("b")
    for fun in (f, loops):
        exp = export.export(jaxprc.jit(fun))(jaxprc.ShapeDtypeStruct((b, 3), np.float32))
        back = export.deserialize(exp.serialize())
        for n in (1, 4, 7):
            x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
            _assert_trees_equal(back.call(x), jaxprc.jit(fun)(x))


def test_static_export_has_a_module():
    exp = export.export(jaxprc.jit(lambda x: x * 2))(np.ones(3, np.float32))
    assert "stablehlo.multiply" in exp.mlir_module()
    np.testing.assert_array_equal(exp.call(np.arange(3, dtype=np.float32)), [0, 2, 4])


def test_lowering_a_symbolic_program_says_what_to_do():
    b, = export.symbolic_shape("b")
    with pytest.raises(NotImplementedError, match="does not emit dynamic StableHLO yet.*jaxpr_as_fun"):
        jaxprc.jit(lambda x: x * 2).lower(jaxprc.ShapeDtypeStruct((b, 4), np.float32))
    assert jaxprc.jit(lambda x: x * 2)(np.ones(2, np.float32)).shape == (2,)     # still usable


# ------------------------------------------------------------ serialization

Point = __import__("collections").namedtuple("Point", "x y")
export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")


def _mixed(d, p):
    """Pytree in and out, float/int/bool arguments and results."""
    s = jnp.sin(d["x"]) * p.y.astype(jnp.float32) + jnp.where(p.x, 1.0, 0.0)
    return {"s": s, "n": (d["x"] > 0).astype(jnp.int32) + p.y, "b": [p.x, None]}


MIXED_ARGS = ({"x": np.array([1.0, -2.0, 3.0], np.float32)},
              Point(np.array([True, False, True]), np.array([1, 2, 3], np.int32)))
_MIXED = {}


def _mixed_exported():
    if not _MIXED:
        _MIXED["exp"] = export.export(jaxprc.jit(_mixed))(*MIXED_ARGS)
        _MIXED["back"] = export.deserialize(_MIXED["exp"].serialize(vjp_order=1))
    return _MIXED["exp"], _MIXED["back"]


def _assert_trees_equal(got, want):
    got_leaves, got_tree = jaxprc.tree_util.tree_flatten(got)
    want_leaves, want_tree = jaxprc.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_serialize_round_trip_keeps_the_calling_convention():
    exp, back = _mixed_exported()
    assert back.fun_name == "_mixed" and back.platforms == exp.platforms
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    assert back.in_avals == exp.in_avals and back.out_avals == exp.out_avals
    assert back.calling_convention_version == export.maximum_supported_calling_convention_version
    assert back.module_kept_var_idx == (0, 1, 2) and not back.uses_global_constants
    assert back.has_vjp() and "stablehlo.sine" in back.mlir_module()


def test_deserialized_call_and_jit_give_the_traced_values():
    exp, back = _mixed_exported()
    want = jaxprc.jit(_mixed)(*MIXED_ARGS)
    _assert_trees_equal(back.call(*MIXED_ARGS), want)
    _assert_trees_equal(jaxprc.jit(back.call)(*MIXED_ARGS), want)


def test_deserialized_grad_uses_the_serialized_vjp():
    exp, back = _mixed_exported()

    def loss(call):
        return lambda x: call({"x": x}, MIXED_ARGS[1])["s"].sum()
    x = MIXED_ARGS[0]["x"]
    want = jaxprc.grad(loss(lambda *a: _mixed(*a)))(x)
    np.testing.assert_allclose(jaxprc.grad(loss(back.call))(x), want, rtol=1e-6)
    np.testing.assert_allclose(jaxprc.jit(jaxprc.grad(loss(back.call)))(x), want, rtol=1e-6)
    vjp = back.vjp()       # flat primals and output cotangents in, flat input cotangents out
    float0 = jaxprc.dtypes.float0      # the cotangents of the bool and int results
    assert [a.dtype for a in vjp.in_avals] == [np.float32, np.bool_, np.int32, float0, float0, np.float32]
    assert [a.dtype for a in vjp.out_avals] == [np.float32, float0, float0]
    no_vjp = export.deserialize(exp.serialize())
    with pytest.raises(ValueError, match="No VJP is available"):
        jaxprc.grad(loss(no_vjp.call))(x)


def test_multi_platform_module_dispatches_on_the_platform_index():
    """Exported for cpu and cuda (lowered for both here, without a GPU): main takes the platform
    index first and calls that platform's lowering; called here, it runs the cpu one."""
    b, = export.symbolic_shape("b")
    exp = export.export(jaxprc.jit(lambda x: jnp.sin(x) * x.shape[0]), platforms=("cpu", "cuda"))(
        jaxprc.ShapeDtypeStruct((b, 3), np.float32))
    text = exp.mlir_module()
    assert "func.func private @cpu_main" in text and "func.func private @cuda_main" in text
    assert "stablehlo.case" in text and 'jax.global_constant = "_platform_index"' in text
    back = export.deserialize(exp.serialize(vjp_order=1))
    assert back.platforms == ("cpu", "cuda")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(back.call(x), np.sin(x) * 2, rtol=1e-6)
    np.testing.assert_allclose(jaxprc.grad(lambda x: back.call(x).sum())(x), np.cos(x) * 2, rtol=1e-6)


def test_ordered_dict_and_namedtuple_field_names_travel():
    import collections
    od = collections.OrderedDict([("z", np.ones(2, np.float32)), ("a", np.zeros(2, np.float32))])
    back = export.deserialize(export.export(jaxprc.jit(lambda d: Point(d["a"], d["z"])))(od).serialize())
    assert back.in_tree == jaxprc.tree_util.tree_structure(((od,), {}))
    got = back.call(od)
    assert type(got) is Point and got.x.tolist() == [0, 0] and got.y.tolist() == [1, 1]


def test_second_order_vjp():
    exp = export.export(jaxprc.jit(jnp.sin))(np.ones(3, np.float32))
    back = export.deserialize(exp.serialize(vjp_order=2))
    second = jaxprc.grad(lambda x: jaxprc.grad(lambda y: back.call(y).sum())(x).sum())
    np.testing.assert_allclose(second(np.ones(3, np.float32)), -np.sin(np.ones(3)), rtol=1e-6)
    with pytest.raises(ValueError, match="vjps of high-enough order"):
        export.deserialize(exp.serialize(vjp_order=1)).serialize(vjp_order=2)


def test_serialization_errors():
    class Opaque:
        pass
    jaxprc.tree_util.register_pytree_node(Opaque, lambda o: ((), None), lambda _, kids: Opaque())
    with pytest.raises(ValueError, match="unregistered type"):
        export.export(jaxprc.jit(lambda o, x: x))(Opaque(), np.ones(2, np.float32)).serialize()
    with pytest.raises(TypeError, match="string keys"):
        export.export(jaxprc.jit(lambda d: d[1]))({1: np.ones(2, np.float32)}).serialize()
    with pytest.raises(ValueError, match="Duplicate serialization registration"):
        export.register_namedtuple_serialization(Point, serialized_name="other")


# A module as JAX writes one for f(x: f32[b, 4]) = sum(x, 0) * b with the constraint b >= 2, which
# the serialized avals do not keep: main takes the dynamic-shaped argument, checks b with a shape
# assertion and calls the wrapped function with b.
POLY_MODULE = """
func.func public @main(%x: tensor<?x4xf32>) -> tensor<4xf32> {
  %two = stablehlo.constant dense<2> : tensor<i32>
  %b = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
  %ok = stablehlo.compare GE, %b, %two, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  stablehlo.custom_call @shape_assertion(%ok, %b) {api_version = 2 : i32, has_side_effect = true,
      error_message = "Expected value >= 2 for dimension variable 'b'; got {0}"} : (tensor<i1>, tensor<i32>) -> ()
  %r = call @wrapped(%b, %x) : (tensor<i32>, tensor<?x4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @wrapped(%b: tensor<i32> {jax.global_constant = "b"}, %x: tensor<?x4xf32>) -> tensor<4xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<?x4xf32>, tensor<f32>) -> tensor<4xf32>
  %bf = stablehlo.convert %b : (tensor<i32>) -> tensor<f32>
  %bb = stablehlo.broadcast_in_dim %bf, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %r = stablehlo.multiply %s, %bb : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def _poly_module_exported():
    from jaxlib.mlir.dialects import stablehlo as hlo
    b, = export.symbolic_shape("b")
    artifact = hlo.serialize_portable_artifact_str(POLY_MODULE, hlo.get_minimum_version())
    in_tree = jaxprc.tree_util.tree_structure(((0,), {}))
    exp = export.Exported.from_module(
        fun_name="poly", in_tree=in_tree, in_avals=(jaxprc.core.ShapedArray((b, 4), np.float32),),
        out_tree=jaxprc.tree_util.tree_structure(0), out_avals=(jaxprc.core.ShapedArray((4,), np.float32),),
        nr_devices=1, platforms=(jaxprc.default_backend(),), disabled_safety_checks=(),
        mlir_module_serialized=artifact, calling_convention_version=10, module_kept_var_idx=(0,),
        uses_global_constants=True, vjp=None)
    return export.deserialize(exp.serialize())


def test_module_with_dynamic_shapes_is_refined_at_each_size():
    exp = _poly_module_exported()
    assert str(exp.in_avals[0].shape) == "(b, 4)" and exp.uses_global_constants
    for n in (2, 5):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_allclose(exp.call(x), x.sum(0) * n)
        np.testing.assert_allclose(jaxprc.jit(lambda x: exp.call(x) + 1)(x), x.sum(0) * n + 1)
    with pytest.raises(ValueError, match="Dimension variable 'b' must have an integer value >= 1"):
        exp.call(np.ones((0, 4), np.float32))         # the avals' own bound, before any lowering
    with pytest.raises(ValueError, match="Expected value >= 2 for dimension variable 'b'; got 1"):
        exp.call(np.ones((1, 4), np.float32))         # the module's shape assertion, at refinement
    np.testing.assert_allclose(exp.call(np.ones((3, 4), np.float32)), [9] * 4)    # still usable


def test_calling_convention_versions_are_checked():
    exp = _poly_module_exported()
    fields = dict(fun_name="f", in_tree=exp.in_tree, in_avals=exp.in_avals, out_tree=exp.out_tree,
                  out_avals=exp.out_avals, nr_devices=1, platforms=exp.platforms, disabled_safety_checks=(),
                  mlir_module_serialized=exp.mlir_module_serialized, module_kept_var_idx=(0,),
                  uses_global_constants=True, vjp=None)
    with pytest.raises(ValueError, match="invalid calling convention version 8"):
        export.Exported.from_module(calling_convention_version=8, **fields)
    with pytest.raises(NotImplementedError, match="4 devices"):
        export.Exported.from_module(calling_convention_version=10, **{**fields, "nr_devices": 4})


# ------------------------------------------------------------- command line

MODEL_PY = '''
import jaxprc.numpy as jnp
def predict(x, w):
    return jnp.tanh(x @ w), (x.sum() > 0).astype(jnp.int32)
'''


def _cli(argv, capsys):
    from jaxprc.tools.cli import main
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_export_then_run(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MODEL_PY)
    blob = tmp_path / "model.bin"
    rc, _, err = _cli(["export", f"{tmp_path}/model.py:predict", "--args", "f32[2,3], f32[3,2]",
                       "--vjp-order", "1", "-o", str(blob)], capsys)
    assert rc == 0 and "predict(f32[2,3], f32[3,2]) -> (f32[2,2], i32[])" in err and "order 1" in err
    exp = export.deserialize(blob.read_bytes())
    assert exp.has_vjp() and exp.vjp().has_vjp() is False
    x, w = np.full((2, 3), 0.1, np.float32), np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    np.save(tmp_path / "x.npy", x)
    rc, out, _ = _cli(["run", str(blob), "--input", str(tmp_path / "x.npy"), "--input", f"in1={w.tolist()}"], capsys)
    assert rc == 0
    lines = out.split("out1:")
    got = np.array(eval(lines[0].split(" = ")[1]), np.float32)
    np.testing.assert_allclose(got, np.tanh(x @ w), rtol=1e-6)
    assert lines[1].strip() == "i32[] = 1"


def test_cli_export_symbolic_then_run_at_two_sizes(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MODEL_PY)
    rc, _, err = _cli(["export", f"{tmp_path}/model.py:predict", "--args", "f32[b,3], f32[3,2]",
                       "--constraints", "b >= 2", "-o", str(tmp_path / "p.bin")], capsys)
    assert rc == 0 and "predict(f32[b,3], f32[3,2]) -> (f32[b,2], i32[])" in err
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    for n in (2, 4):
        x = np.full((n, 3), 0.1, np.float32)
        rc, out, _ = _cli(["run", str(tmp_path / "p.bin"), "--input", str(x.tolist()), "--input", str(w.tolist())],
                          capsys)
        got = np.array(eval(out.split("out1:")[0].split(" = ")[1]), np.float32)
        np.testing.assert_allclose(got, np.tanh(x @ w), rtol=1e-6)
    rc, _, err = _cli(["run", str(tmp_path / "p.bin"), "--input", "[[1.0, 2.0, 3.0]]", "--input", str(w.tolist())],
                      capsys)
    assert rc != 0 and "symbolic shape constraint b >= 2" in err


def test_cli_lower_shows_the_dynamic_module(capsys):
    import pathlib
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "poly_loss_grad.jaxpr"
    rc, out, _ = _cli(["lower", str(example)], capsys)
    assert rc == 0 and "tensor<?x4xf32>" in out and "constraint n >= 2" in out
    # both arguments' n: the second one is checked against the first
    assert "Expected args[1].shape[0] to be 'n'" in out


def test_mismatched_sizes_of_one_variable_fail_in_the_module():
    b, = export.symbolic_shape("b")
    exp = export.export(jaxprc.jit(lambda x, y: x + y))(*[jaxprc.ShapeDtypeStruct((b,), np.float32)] * 2)
    back = export.deserialize(exp.serialize())
    np.testing.assert_allclose(back.call(np.ones(3, np.float32), np.ones(3, np.float32)), [2, 2, 2])
    with pytest.raises(ValueError, match="dimension 0 of argument 1 is 2, but its symbolic size 'b' is 3"):
        back.call(np.ones(3, np.float32), np.ones(2, np.float32))     # (checked before the module runs)


def test_cli_export_and_run_errors(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MODEL_PY)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x10\x00\x00\x00garbage")
    rc, _, err = _cli(["run", str(bad)], capsys)
    assert rc != 0 and "not a text IR file, nor a serialized Exported that jaxprc can read" in err
    _cli(["export", f"{tmp_path}/model.py:predict", "--args", "f32[2,3], f32[3,2]", "-o", str(tmp_path / "m.bin")],
         capsys)
    rc, _, err = _cli(["run", str(tmp_path / "m.bin"), "--input", "1.0"], capsys)
    assert rc != 0 and "missing --input for in1:f32[3,2]" in err


def test_a_program_calling_a_module_prints_and_parse_refuses_it_with_its_position():
    exp = export.export(jaxprc.jit(lambda x: jnp.sin(x) * 2))(jaxprc.ShapeDtypeStruct((3,), jnp.float32))
    for order in (0, 1):      # printing never differentiates: no vjp is needed to print
        called = export.deserialize(exp.serialize(vjp_order=order))
        text = str(jaxprc.make_jaxpr(lambda x: called.call(x) + 1)(jnp.ones(3)))
        assert "call_exported[exported=<Exported>]" in text
        with pytest.raises(ParseError, match=r"line \d+, column \d+: opaque value <Exported> cannot be read back"):
            parse(text)


# ------------------------------------------------------------------ effects

class _Ordered(jaxprc.extend.core.Effect):
    ordered = True

    def __eq__(self, other):
        return type(other) is _Ordered

    def __hash__(self):
        return hash(_Ordered)


def _doubling_with(effect):
    from jaxprc.interpreters import mlir
    p = jaxprc.extend.core.Primitive("test_export_doubling")
    p.def_abstract_eval(lambda aval: aval)
    p.def_effects(lambda: {effect})

    def lower(ctx, x):
        ctx.set_token(ctx.get_token())         # ordered: it takes the token and passes it on
        return [mlir.hlo.add(x, x)]

    mlir.register_lowering(p, lower)
    return p


def test_ordered_effects_are_token_arguments_and_results_of_main():
    twice = _doubling_with(_Ordered())
    f = lambda x: twice.bind(x) + 1.0                      # noqa: E731
    b, = export.symbolic_shape("b")
    exp = export.export(jaxprc.jit(f), platforms=("cpu", "cuda"))(jaxprc.ShapeDtypeStruct((b,), np.float32))
    assert exp.ordered_effects == (_Ordered(),) and exp.unordered_effects == ()
    main = next(line for line in exp.mlir_module().splitlines() if "func.func public @main" in line)
    assert ("@main(%arg0: tensor<i32> {jax.global_constant = \"_platform_index\"}, "
            "%arg1: !stablehlo.token {jax.token = true}, %arg2: tensor<?xf32>) -> "
            "(!stablehlo.token {jax.token = true}, tensor<?xf32>)") in main
    back = export.deserialize(exp.serialize())
    assert back.ordered_effects == (_Ordered(),)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(back.call(x), 2 * x + 1)
    np.testing.assert_array_equal(jaxprc.jit(lambda x: twice.bind(back.call(x)))(x), 4 * x + 2)


def test_what_cannot_be_serialized_is_refused_at_export():
    def printing(x):
        jaxprc.debug.print("{}", x, ordered=True)
        return x
    with pytest.raises(NotImplementedError, match="serialization of host_callbacks is not yet implemented"):
        export.export(jaxprc.jit(printing))(np.ones(2, np.float32))
    qr_perm = jaxprc.jit(lambda x: jaxprc.scipy.linalg.qr(x, pivoting=True)[2])
    x = np.array([[1.0, 5.0], [3.0, 1.0]], np.float32)
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility guarantees"):
        export.export(qr_perm)(x)
    allowed = [export.DisabledSafetyCheck.custom_call("lapack_sgeqp3_ffi")]
    back = export.deserialize(export.export(qr_perm, disabled_checks=allowed)(x).serialize())
    assert back.disabled_safety_checks == tuple(allowed) and str(allowed[0]) == "custom_call:lapack_sgeqp3_ffi"
    np.testing.assert_array_equal(back.call(x), qr_perm(x))
    assert "lapack_sgeqp3_ffi" in back.mlir_module()


def test_disabled_platform_check_and_custom_pytree_nodes_travel():
    """Exported for another platform, a function runs here once DisabledSafetyCheck.platform()
    allows it (deserialized too: the first platform's lowering); a registered custom pytree node
    is rebuilt from its serialized auxdata."""
    x = np.arange(3, dtype=np.float32)
    with pytest.raises(ValueError, match="exported for platforms"):
        export.deserialize(export.export(jaxprc.jit(jnp.sin), platforms=("tpu",))(x).serialize()).call(x)
    allowed = export.export(jaxprc.jit(jnp.sin), platforms=("tpu",),
                            disabled_checks=[export.DisabledSafetyCheck.platform()])(x)
    assert str(allowed.disabled_safety_checks[0]) == "platform"
    for exp in (allowed, export.deserialize(allowed.serialize())):
        np.testing.assert_allclose(exp.call(x), np.sin(x), rtol=1e-6)

    class Scaled:
        def __init__(self, value, scale):
            self.value, self.scale = value, scale
    jaxprc.tree_util.register_pytree_node(Scaled, lambda s: ((s.value,), s.scale),
                                          lambda scale, kids: Scaled(kids[0], scale))
    export.register_pytree_node_serialization(Scaled, serialized_name="test_export.Scaled",
                                              serialize_auxdata=lambda scale: str(scale).encode(),
                                              deserialize_auxdata=lambda data: float(data.decode()))
    f = jaxprc.jit(lambda s: Scaled(s.value * s.scale, s.scale + 1))
    back = export.deserialize(export.export(f)(Scaled(x, 2.0)).serialize())
    out = back.call(Scaled(x, 2.0))
    assert type(out) is Scaled and out.scale == 3.0
    np.testing.assert_allclose(out.value, x * 2)
