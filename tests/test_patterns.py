"""Rewrite patterns (jaxprc.passes.patterns): matching by primitive, params and nested
producers with bindings; named sets; the greedy driver and the ``rewrite`` pass."""
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.ir import parse
from jaxprc.ir.verify import verify
from jaxprc.passes import (PassError, Pat, PatternError, PipelineError, Splat, bind, pattern, register_pattern,
                           run_pipeline)
from jaxprc.passes.patterns import PATTERN_SETS, pattern_set, rewrite_jaxpr


@pytest.fixture
def fresh_set():
    name = "test_rules"
    PATTERN_SETS.pop(name, None)
    yield name
    PATTERN_SETS.pop(name, None)


def eqn_names(cj):
    return [e.primitive.name for e in cj.jaxpr.eqns]


def run_same(before, after, *args):
    a = jaxprc.jaxpr_as_fun(before)(*args)
    b = jaxprc.jaxpr_as_fun(after)(*args)
    for x, y in zip(a, b):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_nested_pattern_with_param_bindings_rewrites_to_a_fixed_point(fresh_set):
    # exp(log(x)) -> x is not exact, which is why it lives in a user's set, not canonicalize
    calls = []

    @pattern(fresh_set, Pat(lax.exp_p, Pat(lax.log_p, "x")))
    def exp_log(x):
        calls.append(x.aval)
        return x

    cj = jaxprc.make_jaxpr(lambda x: jnp.exp(jnp.log(jnp.exp(jnp.log(x)))))(jnp.ones(3))
    out = run_pipeline(cj, f"rewrite:set={fresh_set},dce", verify=True)
    assert eqn_names(out) == [] and len(calls) == 2
    assert out.jaxpr.outvars[0] is out.jaxpr.invars[0]


def test_a_name_bound_twice_must_be_the_same_value(fresh_set):
    register_pattern(fresh_set, Pat(lax.sub_p, "x", "x"), lambda x: lax.full_like(x, 0), name="x_minus_x")
    cj = jaxprc.make_jaxpr(lambda x, y: (x - x, x - y))(1, 2)     # integers: x - x is 0 exactly
    out = run_pipeline(cj, f"rewrite:set={fresh_set},dce", verify=True)
    assert eqn_names(out).count("sub") == 1
    run_same(cj, out, np.int32(5), np.int32(3))


def test_params_match_by_equality_or_bind_and_the_matched_equation_binds_with_as(fresh_set):
    seen = {}

    @pattern(fresh_set, Pat(lax.reduce_sum_p, Pat(lax.transpose_p, "x", permutation=(1, 0), as_="t"),
                            axes=bind("axes")))
    def sum_of_transpose(x, t, axes):
        seen.update(axes=axes, t=t.primitive.name)
        return None          # declines: the program is left as it is

    cj = jaxprc.make_jaxpr(lambda x: (x.T.sum(axis=0), x.sum(axis=0)))(jnp.ones((2, 3)))
    out, changed = rewrite_jaxpr(cj, pattern_set(fresh_set))
    assert not changed and seen == {"axes": (0,), "t": "transpose"}
    assert eqn_names(out) == eqn_names(cj)


def test_commute_splat_and_rest_operands(fresh_set):
    @pattern(fresh_set, Pat(lax.max_p, "x", Splat(float("-inf")), commute=True))
    def max_with_minus_inf(x):
        return x

    @pattern(fresh_set, Pat(lax.concatenate_p, "*parts", dimension=0))
    def single_concat(parts):
        return parts[0] if len(parts) == 1 else None

    f = lambda x: (jnp.maximum(-jnp.inf, x), jnp.maximum(x, np.full(3, -np.inf, np.float32)), jnp.maximum(x, 0.0),
                   lax.concatenate([x], 0))
    cj = jaxprc.make_jaxpr(f)(jnp.ones(3))
    out = run_pipeline(cj, f"rewrite:set={fresh_set},dce", verify=True)
    assert eqn_names(out).count("max") == 1 and "concatenate" not in eqn_names(out)
    run_same(cj, out, np.array([np.nan, -0.0, -np.inf], np.float32))


def test_sets_join_with_plus_and_unknown_sets_are_pipeline_errors(fresh_set):
    register_pattern(fresh_set, Pat(lax.neg_p, Pat(lax.neg_p, "x")), lambda x: x)
    cj = jaxprc.make_jaxpr(lambda x: -(-x))(1.0)
    assert eqn_names(run_pipeline(cj, f"rewrite:set={fresh_set}+canonicalize,dce")) == []
    with pytest.raises(PassError, match="no pattern set named 'nope'; the sets are: .*canonicalize") as info:
        run_pipeline(cj, "rewrite:set=nope")
    assert isinstance(info.value.__cause__, PipelineError)


def test_patterns_rewrite_inside_sub_jaxprs(fresh_set):
    register_pattern(fresh_set, Pat(lax.neg_p, Pat(lax.neg_p, "x")), lambda x: x)
    cj = jaxprc.make_jaxpr(lambda x: lax.cond(x > 0, lambda v: -(-v), lambda v: v * 2, x))(1.0)
    out = run_pipeline(cj, f"rewrite:set={fresh_set},dce", verify=True)
    branch = out.jaxpr.eqns[-1].params["branches"][1]
    assert [e.primitive.name for e in branch.jaxpr.eqns] == []
    run_same(cj, out, np.float32(3.0))


def test_a_rewrite_that_changes_a_type_is_an_error_naming_the_pattern(fresh_set):
    register_pattern(fresh_set, Pat(lax.sin_p, "x"), lambda x: lax.convert_element_type(x, np.int32),
                     name="bad_sin")
    cj = jaxprc.make_jaxpr(jnp.sin)(1.0)
    with pytest.raises(Exception, match="bad_sin.*f32\\[\\].*i32\\[\\]") as info:
        run_pipeline(cj, f"rewrite:set={fresh_set}")
    assert isinstance(info.value.__cause__, PatternError)


def test_a_rewrite_that_raises_is_an_error_naming_the_pattern(fresh_set):
    def broken(x):
        raise ZeroDivisionError("oops")
    register_pattern(fresh_set, Pat(lax.sin_p, "x"), broken)
    with pytest.raises(Exception, match="pattern 'broken' failed on .*sin.*ZeroDivisionError: oops"):
        run_pipeline(jaxprc.make_jaxpr(jnp.sin)(1.0), f"rewrite:set={fresh_set}")


def test_a_weak_type_change_declines(fresh_set):
    register_pattern(fresh_set, Pat(lax.mul_p, "x", "y"), lambda x, y: y)
    # c (weak) may become the weak literal; d (strong) may not: declined, it stays
    cj = parse("{ lambda ; a:~f32[] b:f32[]. let c:~f32[] = mul a 2.0:~f32[] "
               "d:f32[] = mul b 2.0:~f32[] in (c, d) }")
    out, changed = rewrite_jaxpr(cj, pattern_set(fresh_set))
    verify(out)
    assert changed and eqn_names(out) == ["mul"]


def test_register_pattern_rejects_what_is_not_a_pattern():
    with pytest.raises(TypeError, match="must be a Pat"):
        register_pattern("x", lax.neg_p, lambda x: x)
    with pytest.raises(ValueError, match="exactly two operands"):
        Pat(lax.neg_p, "x", commute=True)
