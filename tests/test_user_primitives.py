"""User-defined primitives: JAX's primitives walkthrough, rule by rule.

``test_seed_walkthrough`` runs examples/multiply_add.py, JAX's "JAX Internals:
primitives" walkthrough with only its import lines changed, and checks its
NotImplementedError steps by message. The other tests replay each step on a
freshly named primitive with numeric oracles (numpy, closed-form
derivatives, finite differences), then cover the text form, multiple
results and JAX's helper APIs (``defjvp``, ``lower_fun``, ``defbroadcasting``).
Every test restores the global registries it touched.
"""
import itertools
import pathlib
import re
import runpy

import numpy as np
import pytest
from jaxlib.mlir.dialects import stablehlo as hlo

import jaxprc as api
from jaxprc import core, lax, runtime
from jaxprc.interpreters import ad, batching, mlir
from jaxprc.ir import core as ir_core
from jaxprc.ir.parser import ParseError, parse
from jaxprc.ir.verify import verify
from jaxprc.passes import jvp as jvp_pass
from jaxprc.passes import transpose as transpose_pass
from jaxprc.passes import vmap as vmap_pass
from jaxprc.engine import lowering

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "multiply_add.py"
BACKEND = runtime.default_backend()
_names = itertools.count()


@pytest.fixture(autouse=True)
def restore_registries():
    """Primitives and rules are global: put every table back as it was."""
    tables = [ir_core.PRIMITIVES, ad.primitive_jvps, ad.primitive_transposes,
              batching.primitive_batchers, mlir.LOWERING_RULES, *mlir.PLATFORM_LOWERING_RULES.values()]
    saved = [dict(t) for t in tables]
    yield
    for table, old in zip(tables, saved):
        table.clear()
        table.update(old)


def not_implemented(what: str, name: str):
    """pytest.raises for the missing-rule error naming ``what`` and the primitive."""
    return pytest.raises(NotImplementedError, match=f"{what}.*'{re.escape(name)}'")


# ------------------------------------------------------------- the seed, verbatim

@pytest.mark.skipif(BACKEND != "cpu", reason="the seed registers its lowering for platform='cpu' only")
def test_seed_walkthrough(capsys):
    """Every assert of the seed holds; each expectNotImplementedError step saw the right rule missing."""
    names = runpy.run_path(str(EXAMPLE), run_name="walkthrough")
    out, err = capsys.readouterr()
    assert "square_add_lax =  14.0" in out and "grad(square_add_lax) =  4.0" in out
    assert "square_add_numpy =  14.0" in out and "grad(square_add_numpy) =  4.0" in out
    errors = re.findall(r"^NotImplementedError: (.*)$", err, re.M)
    expected = ["Evaluation rule for 'multiply_add'", "Abstract evaluation for 'multiply_add'",
                "lowering rule for primitive 'multiply_add' not found for platform cpu",
                "Differentiation rule for 'multiply_add'", "Transpose rule for 'multiply_add'",
                "Batching rule for 'multiply_add'"]
    assert len(errors) == len(expected), errors
    for message, want in zip(errors, expected):
        assert want in message
    # grad transposed the two uses of multiply_add in the tangent computation (seed's note)
    grad_log = out[out.index("call multiply_add_transpose"):]
    assert grad_log.count("call multiply_add_transpose") >= 2
    assert names["multiply_add_p"] is ir_core.PRIMITIVES["multiply_add"]


# ------------------------------------------------- the seed's rules, per primitive

class MultiplyAdd:
    """The seed's multiply_add primitive under a fresh name, with its rules to register one by one."""

    def __init__(self):
        self.name = f"multiply_add_{next(_names)}"
        self.p = core.Primitive(self.name)

    def prim(self, x, y, z):
        return self.p.bind(x, y, z)

    def square_add(self, a, b):
        return self.prim(a, a, b)

    def def_impl(self):
        self.p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))

    def def_abstract_eval(self):
        def abstract_eval(xs, ys, zs):
            assert xs.shape == ys.shape == zs.shape
            return core.ShapedArray(xs.shape, xs.dtype)
        self.p.def_abstract_eval(abstract_eval)

    def register_lowering(self, platform=None):
        mlir.register_lowering(self.p, lambda ctx, x, y, z: [hlo.AddOp(hlo.MulOp(x, y), z).result],
                               platform=platform)

    def def_jvp(self):
        def value_and_jvp(primals, tangents):
            x, y, z = primals
            zero = lambda t: lax.zeros_like_array(x) if type(t) is ad.Zero else t
            xt, yt, zt = map(zero, tangents)
            return self.prim(x, y, z), self.prim(xt, y, self.prim(x, yt, zt))
        ad.primitive_jvps[self.p] = value_and_jvp

    def def_transpose(self):
        def transpose(ct, x, y, z):
            if not ad.is_undefined_primal(x):
                ct_y = ad.Zero(y.aval) if type(ct) is ad.Zero else self.prim(x, ct, lax.zeros_like_array(x))
                return None, ct_y, ct
            ct_x = ad.Zero(x.aval) if type(ct) is ad.Zero else self.prim(ct, y, lax.zeros_like_array(y))
            return ct_x, None, ct
        ad.primitive_transposes[self.p] = transpose

    def def_batching(self):
        def batch(args, dims):
            # unlike the seed's rule, also takes unbatched operands (as vmap(grad) produces)
            size = next(x.shape[d] for x, d in zip(args, dims) if d is not batching.not_mapped)
            return self.prim(*(batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))), 0
        batching.primitive_batchers[self.p] = batch

    def define(self, *steps):
        for step in steps:
            getattr(self, step)()
        return self


ALL_RULES = ("def_impl", "def_abstract_eval", "register_lowering", "def_jvp", "def_transpose",
             "def_batching")
XS = np.array([2., 3., -1.5], np.float32)
YS = np.array([10., 20., 0.25], np.float32)


# --------------------------------------------------------- step by step, with oracles

def test_eager_evaluation_needs_impl():
    ma = MultiplyAdd()
    with not_implemented("Evaluation rule", ma.name):
        ma.square_add(2., 10.)
    ma.def_impl()
    assert ma.square_add(2., 10.) == 14.
    np.testing.assert_allclose(ma.prim(XS, YS, XS), XS * YS + XS)


def test_jit_needs_abstract_eval_then_lowering():
    ma = MultiplyAdd().define("def_impl")
    f = lambda x, y: ma.square_add(x, y)
    with not_implemented("Abstract evaluation", ma.name):
        api.jit(f)(2., 10.)
    ma.def_abstract_eval()
    with not_implemented("lowering rule", ma.name):
        api.jit(f)(2., 10.)
    other = "cuda" if BACKEND == "cpu" else "cpu"
    ma.register_lowering(platform=other)        # a rule for another platform is not used here
    with pytest.raises(NotImplementedError, match=f"'{ma.name}' not found for platform {BACKEND}"):
        api.jit(f)(2., 10.)
    ma.register_lowering(platform=BACKEND)
    assert api.jit(f)(2., 10.) == 14.
    assert api.jit(f, static_argnums=1)(2., 10.) == 14.
    np.testing.assert_allclose(api.jit(f)(XS, YS), XS * XS + YS)
    lowered = api.jit(f).lower(XS, YS)
    assert "stablehlo.multiply" in lowered.as_text()
    assert f'loc("{ma.name}"' in lowered.as_text(debug_info=True)   # ops located at the equation


def test_jvp_needs_rule_then_works_under_jit():
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval", "register_lowering")
    with not_implemented("Differentiation rule", ma.name):
        api.jvp(ma.square_add, (2., 10.), (1., 1.))
    ma.def_jvp()
    assert api.jvp(ma.square_add, (2., 10.), (1., 1.)) == (14., 5.)
    assert api.jit(lambda p, t: api.jvp(ma.square_add, p, t))((2., 10.), (1., 1.)) == (14., 5.)
    tx, ty = np.float32([1., -2., .5]), np.float32([3., 0., 1.])
    out, tangent = api.jvp(ma.square_add, (XS, YS), (tx, ty))
    np.testing.assert_allclose(out, XS * XS + YS)
    np.testing.assert_allclose(tangent, 2 * XS * tx + ty, rtol=1e-6)


def test_grad_needs_transpose_then_works_under_jit():
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval", "register_lowering", "def_jvp")
    with not_implemented("Transpose rule", ma.name):
        api.grad(ma.square_add)(2., 10.)
    ma.def_transpose()
    assert api.grad(ma.square_add)(2., 10.) == 4.
    assert api.jit(api.grad(ma.square_add))(2., 10.) == 4.
    assert api.grad(ma.square_add, argnums=(0, 1))(2., 10.) == (4., 1.)
    # d/dx sum(x*x + y) against central finite differences
    loss = lambda x, y: api.numpy.sum(ma.square_add(x, y))
    g = np.asarray(api.grad(loss)(XS, YS))
    x64, eps = XS.astype(np.float64), 1e-3
    fd = [((x64 + eps * e) ** 2 - (x64 - eps * e) ** 2).sum() / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-4)
    # second order: the jvp rule traces the primitive itself, so grad(grad) works too
    assert api.grad(api.grad(ma.square_add))(2., 10.) == 2.


def test_vmap_needs_batching_rule_then_composes():
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval", "register_lowering", "def_jvp",
                              "def_transpose")
    xs, ys = np.array([2., 3.]), np.array([10., 20.])
    with not_implemented("Batching rule", ma.name):
        api.vmap(ma.square_add, in_axes=0, out_axes=0)(xs, ys)
    ma.def_batching()
    assert np.allclose(api.vmap(ma.square_add, in_axes=0, out_axes=0)(xs, ys), [14., 29.])
    assert np.allclose(api.jit(api.vmap(ma.square_add, in_axes=0, out_axes=0))(xs, ys), [14., 29.])
    np.testing.assert_allclose(api.jit(api.vmap(api.grad(ma.square_add)))(xs, ys), 2 * xs)
    np.testing.assert_allclose(api.vmap(api.grad(ma.square_add))(xs, ys), 2 * xs)
    _, tangents = api.jvp(api.vmap(ma.square_add), (xs, ys), (np.ones(2), np.zeros(2)))
    np.testing.assert_allclose(tangents, 2 * xs)



def test_transformations_of_an_impl_only_primitive_run_its_impl():
    """No lowering for this backend: at top level the transformed program runs op by op, through
    the impl (JAX runs such primitives eagerly too); only jit needs the lowering."""
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval", "def_jvp", "def_transpose", "def_batching")
    ma.register_lowering(platform="cuda" if BACKEND == "cpu" else "cpu")   # not this backend's
    calls = []
    impl = ma.p.impl_rule
    ma.p.def_impl(lambda *args: calls.append(1) or impl(*args))
    ys = api.vmap(ma.square_add)(XS, YS)
    assert isinstance(ys, api.Array) and calls
    np.testing.assert_allclose(ys, XS * XS + YS)
    assert api.jvp(ma.square_add, (2., 10.), (1., 1.)) == (14., 5.)
    np.testing.assert_allclose(api.vmap(api.grad(ma.square_add))(XS, YS), 2 * XS)
    with not_implemented("lowering rule", ma.name):
        api.jit(api.vmap(ma.square_add))(XS, YS)

def test_interpreter_tables_are_the_passes_tables():
    assert ad.primitive_jvps is jvp_pass.jvp_rules
    assert ad.primitive_transposes is transpose_pass.transpose_rules
    assert batching.primitive_batchers is vmap_pass.batch_rules
    assert mlir.LOWERING_RULES is lowering.LOWERING_RULES
    assert ad.Zero is jvp_pass.Zero and ad.UndefinedPrimal is transpose_pass.UndefinedPrimal
    assert batching.not_mapped is None and core.Primitive is ir_core.Primitive
    assert core.ShapedArray is ir_core.ShapedArray


# ------------------------------------------------------------------- text form

def test_text_round_trip_computes_same_values_and_gradients():
    ma = MultiplyAdd().define(*ALL_RULES)
    program = api.make_jaxpr(ma.square_add)(XS, YS)
    text = str(program)
    assert f"{ma.name} " in text
    parsed = parse(text)
    verify(parsed)
    assert parsed == program and str(parsed) == text
    run = lambda x, y: api.jaxpr_as_fun(parsed)(x, y)[0]
    np.testing.assert_allclose(run(XS, YS), ma.square_add(XS, YS))
    np.testing.assert_allclose(api.jit(run)(XS, YS), XS * XS + YS)
    loss = lambda f: (lambda x, y: api.numpy.sum(f(x, y)))
    np.testing.assert_allclose(api.grad(loss(run))(XS, YS), api.grad(loss(ma.square_add))(XS, YS))
    np.testing.assert_allclose(api.vmap(run)(XS[:, None], YS[:, None]), (XS * XS + YS)[:, None])
    # the gradient program itself round-trips too
    grad_program = api.make_jaxpr(api.grad(loss(ma.square_add)))(XS, YS)
    reparsed = parse(str(grad_program))
    np.testing.assert_allclose(api.jaxpr_as_fun(reparsed)(XS, YS)[0], 2 * XS)


def test_text_typing_goes_through_the_abstract_eval_rule():
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval")
    good = f"{{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = {ma.name} a a b in (c,) }}"
    assert parse(good).out_avals == [core.ShapedArray((3,), np.float32)]
    declared_wrong = good.replace("c:f32[3] =", "c:f32[4] =")
    with pytest.raises(ParseError, match="declared type f32\\[4\\]"):
        parse(declared_wrong)
    mismatched = f"{{ lambda ; a:f32[3] b:f32[2]. let c:f32[3] = {ma.name} a a b in (c,) }}"
    with pytest.raises(ParseError, match=f"{ma.name} rejects its operands") as info:
        parse(mismatched)
    assert info.value.line == 1 and info.value.column == good.index(ma.name) + 1


def test_unregistered_primitive_is_a_located_parse_error():
    text = "{ lambda ; a:f32[]. let\n    b:f32[] = no_such_primitive a a a\n  in (b,) }"
    with pytest.raises(ParseError, match="unknown primitive 'no_such_primitive'") as info:
        parse(text)
    assert (info.value.line, info.value.column) == (2, 15)


def test_text_of_primitive_without_abstract_eval_says_which_rule():
    ma = MultiplyAdd()
    with pytest.raises(ParseError, match="Abstract evaluation"):
        parse(f"{{ lambda ; a:f32[]. let b:f32[] = {ma.name} a a a in (b,) }}")


# ------------------------------------------------------- more of JAX's interface

def test_multiple_results_primitive():
    """A primitive with two results: (x + y, x - y), through jit, jvp, grad and vmap."""
    p = core.Primitive(f"sum_and_difference_{next(_names)}")
    p.multiple_results = True
    p.def_impl(lambda x, y: (np.add(x, y), np.subtract(x, y)))
    p.def_abstract_eval(lambda x, y: [x, x])
    mlir.register_lowering(p, lambda ctx, x, y: [hlo.add(x, y), hlo.subtract(x, y)])
    ad.primitive_jvps[p] = lambda primals, tangents: (
        p.bind(*primals), p.bind(*map(ad.instantiate_zeros, tangents)))
    ad.primitive_transposes[p] = lambda cts, x, y: _sum_difference_transpose(cts)
    batching.primitive_batchers[p] = lambda args, dims: (p.bind(*args), [dims[0], dims[0]])

    f = lambda x, y: p.bind(x, y)
    assert [float(v) for v in f(5., 3.)] == [8., 2.]
    assert [float(v) for v in api.jit(f)(5., 3.)] == [8., 2.]
    _, tangents = api.jvp(f, (5., 3.), (1., 0.))
    assert [float(t) for t in tangents] == [1., 1.]
    # d/dx, d/dy of (x + y) * (x - y) = x^2 - y^2
    g = api.grad(lambda x, y: lax.mul(*f(x, y)), argnums=(0, 1))(5., 3.)
    assert (float(g[0]), float(g[1])) == (10., -6.)
    sums, diffs = api.vmap(f)(XS, YS)
    np.testing.assert_allclose(sums, XS + YS)
    np.testing.assert_allclose(diffs, XS - YS)
    program = api.make_jaxpr(f)(XS, YS)
    np.testing.assert_allclose(api.jaxpr_as_fun(parse(str(program)))(XS, YS)[1], XS - YS)


def _sum_difference_transpose(cts):
    ca, cb = (lax.zeros_like_array(c.aval) if type(c) is ad.Zero else c for c in cts)
    return [lax.add(ca, cb), lax.sub(ca, cb)]


def test_defjvp_lower_fun_and_defbroadcasting():
    """JAX's helpers: per-operand jvp rules, a lowering traced from lax, an elementwise batcher."""
    p = core.Primitive(f"scaled_sin_{next(_names)}")
    p.def_impl(lambda x, *, scale: scale * np.sin(x))
    p.def_abstract_eval(lambda x, *, scale: x)
    mlir.register_lowering(p, mlir.lower_fun(lambda x, *, scale: lax.mul(lax.sin(x), scale),
                                             multiple_results=False))
    ad.defjvp(p, lambda t, x, *, scale: lax.mul(t, lax.mul(lax.cos(x), scale)))
    batching.defbroadcasting(p)
    f = lambda x: p.bind(x, scale=3.)
    np.testing.assert_allclose(api.jit(f)(XS), 3 * np.sin(XS), rtol=1e-6)
    np.testing.assert_allclose(api.vmap(api.grad(f))(XS), 3 * np.cos(XS), rtol=1e-6)
    np.testing.assert_allclose(api.jit(api.vmap(api.grad(f)))(XS), 3 * np.cos(XS), rtol=1e-6)
    assert "scale=3.0" in str(api.make_jaxpr(f)(XS))


def test_lowering_rule_returning_the_wrong_type_is_reported():
    ma = MultiplyAdd().define("def_impl", "def_abstract_eval")
    mlir.register_lowering(ma.p, lambda ctx, x, y, z: [hlo.convert(
        mlir.aval_to_ir_type(core.ShapedArray(ctx.avals_out[0].shape, np.int32)), x)])
    with pytest.raises(TypeError, match=f"lowering rule of '{ma.name}'.*expected tensor<3xf32>"):
        api.jit(ma.square_add)(XS, YS)
