"""jaxprc.export: export(jit(f))(*specs) -> Exported, called at several sizes (values against the
function jitted for each size), its calling convention and its errors."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import export


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
    with pytest.raises(NotImplementedError, match="dynamic StableHLO"):
        exp.mlir_module()
    with pytest.raises(ValueError, match="exported for platforms"):
        export.export(jaxprc.jit(_model), platforms=["tpu"])(ARGS).call(ARGS)
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(_model)


def test_static_export_has_a_module():
    exp = export.export(jaxprc.jit(lambda x: x * 2))(np.ones(3, np.float32))
    assert "stablehlo.multiply" in exp.mlir_module()
    np.testing.assert_array_equal(exp.call(np.arange(3, dtype=np.float32)), [0, 2, 4])


def test_lowering_a_symbolic_program_says_what_to_do():
    b, = export.symbolic_shape("b")
    with pytest.raises(NotImplementedError, match="does not emit dynamic StableHLO yet.*jaxpr_as_fun"):
        jaxprc.jit(lambda x: x * 2).lower(jaxprc.ShapeDtypeStruct((b, 4), np.float32))
    assert jaxprc.jit(lambda x: x * 2)(np.ones(2, np.float32)).shape == (2,)     # still usable
