"""jit's options and the checks on what it is given, as JAX's: donate_argnames, keep_unused,
inline, compiler_options, device/backend, the callables it refuses, AOT executables called with
other arguments, device_put's may_alias/donate, and deleted arrays."""
import functools
import warnings

import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp


def _add(x, y=1.0):
    return x + y


def test_donate_argnames_donates_the_keyword_argument_and_names_its_position():
    f = jx.jit(_add, donate_argnames="y")
    info = f.lower(jnp.ones(3), y=jnp.ones(3)).args_info
    assert [i.donated for i in info[0]] == [False] and info[1]["y"].donated
    x, y = jnp.ones(3), jnp.full(3, 2.0)
    np.testing.assert_array_equal(np.asarray(f(x, y=y)), [3.0, 3.0, 3.0])
    assert y.is_deleted() and not x.is_deleted()
    # the name also donates the parameter when it is passed by position, as JAX infers
    assert [i.donated for i in jx.jit(_add, donate_argnames="y").lower(1.0, 2.0).args_info[0]] == [False, True]
    assert jx.jit(_add, donate_argnums=1).lower(1.0, y=jnp.ones(2)).args_info[1]["y"].donated


@pytest.mark.parametrize("kwargs, message", [
    (dict(donate_argnames="z"), "Jitted function has invalid argnames {'z'} in donate_argnames. Function does not"),
    (dict(static_argnames="z"), "Jitted function has invalid argnames {'z'} in static_argnames. Function does not"),
    (dict(static_argnums=3), r"Jitted function has static_argnums=\(3,\), but only accepts 2 positional"),
    (dict(static_argnames="x", donate_argnames="x"), "static_argnames and donate_argnames cannot intersect"),
    (dict(static_argnums=0, donate_argnums=0), "cannot intersect"),
])
def test_argnums_and_argnames_must_name_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        jx.jit(_add, **kwargs)


def test_positional_only_parameters_cannot_be_named():
    def f(x, /, y):
        return x + y
    with pytest.raises(ValueError, match="invalid argnames {'x'} in static_argnames. These are positional-only"):
        jx.jit(f, static_argnames="x")


def test_unused_arguments_leave_the_executable_unless_keep_unused():
    def first(x, y, z):
        return x * 2
    for keep, n_args in [(False, 1), (True, 3)]:
        f = jx.jit(first, keep_unused=keep)
        main = next(line for line in f.lower(1.0, jnp.ones(3), 2).as_text().splitlines() if "@main" in line)
        assert main.count("%arg") == n_args
        for _ in range(2):          # a miss, then a hit (jaxlib's C++ dispatch when it is on)
            np.testing.assert_array_equal(np.asarray(f(jnp.arange(2.0), jnp.ones(3), 5)), [0.0, 2.0])
        compiled = f.lower(1.0, jnp.ones(3), 2).compile()
        assert float(compiled(3.0, jnp.zeros(3), 1)) == 6.0
    # an argument used only by a dead equation is unused too
    f = jx.jit(lambda x, y: (jnp.sin(y), x)[1])
    assert next(line for line in f.lower(1.0, 2.0).as_text().splitlines() if "@main" in line).count("%arg") == 1


def test_inline_puts_the_equations_into_the_enclosing_trace():
    inner = jx.jit(lambda y: jnp.sin(y) * 2, inline=True)
    jaxpr = jx.make_jaxpr(lambda x: inner(x) + 1)(1.0)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["sin", "mul", "add"]
    outer = jx.jit(lambda x: inner(x) + 1)
    assert float(outer(0.5)) == pytest.approx(np.sin(0.5) * 2 + 1, rel=1e-6)
    assert [e.primitive.name for e in jx.make_jaxpr(lambda x: jx.jit(jnp.sin)(x))(1.0).jaxpr.eqns] == ["jit"]


def test_compiler_options_reach_xla():
    f = jx.jit(_add, compiler_options={"xla_cpu_enable_fast_math": True})
    assert float(f(1.0, 2.0)) == 3.0
    with pytest.raises(jx.errors.JaxRuntimeError, match="No such compile option: 'no_such_option'"):
        jx.jit(_add, compiler_options={"no_such_option": True})(1.0, 2.0)
    assert float(jx.jit(_add)(1.0, 2.0)) == 3.0       # other options: another cache entry


def test_device_and_backend_are_deprecated_and_exclusive():
    with pytest.warns(DeprecationWarning, match="backend and device argument on jit is deprecated"):
        f = jx.jit(_add, device=jx.devices()[0])
    assert float(f(1.0, 2.0)) == 3.0
    with pytest.warns(DeprecationWarning):
        assert float(jx.jit(_add, backend=jx.default_backend())(1.0, 2.0)) == 3.0
    with warnings.catch_warnings(), pytest.raises(ValueError, match="can't specify both a device and a backend"):
        warnings.simplefilter("ignore", DeprecationWarning)
        jx.jit(_add, device=jx.devices()[0], backend="cpu")


def test_what_jit_refuses():
    class K:
        @staticmethod
        def g(x):
            return x

    def gen(x):
        yield x
    with pytest.raises(TypeError, match="staticmethod arguments are not supported"):
        jx.jit(K.__dict__["g"])
    with pytest.raises(TypeError, match="Expected a function, got a generator function"):
        jx.jit(gen)
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        jx.jit(3)

    class NoWeakref:
        __slots__ = ()

        def __call__(self, x):
            return x
    with pytest.raises(TypeError, match="cannot create weak reference to 'NoWeakref' object"):
        jx.jit(NoWeakref())(1.0)


def test_numpy_masked_arrays_are_refused():
    m = np.ma.array([1.0, 2.0], mask=[0, 1])
    for f in (jnp.sin, jx.jit(lambda x: x), jx.grad(lambda x: x.sum())):
        with pytest.raises(ValueError, match="numpy masked arrays are not supported .* Use arr.filled()"):
            f(m)


def test_jit_of_a_partial_is_named_after_its_function():
    f = jx.jit(functools.partial(_add, 1.0))
    assert f.__name__ == "_add"
    assert f.lower(2.0).as_text().startswith("module @jit__add")


def test_lowered_module_says_partitions_and_replicas():
    text = jx.jit(_add).lower(1.0, 2.0).as_text().splitlines()[0]
    assert "mhlo.num_partitions = 1 : i32" in text and "mhlo.num_replicas = 1 : i32" in text


def test_compiled_called_with_other_structure_lists_each_difference():
    compiled = jx.jit(lambda x, y: x["a"]).lower({"a": jnp.ones(3), "b": 1.0}, [1.0, 2.0]).compile()
    cases = [
        (({"a": jnp.ones(3)}, [1.0, 2.0]), "at args[0], seen <class 'dict'> with 2 children but now given <class "
                                           "'dict'> with 1 child, so the numbers of children do not match, with the "
                                           "symmetric difference of key sets: {'b'}"),
        (({"a": jnp.ones(3), "b": 1.0}, (1.0, 2.0)), "at args[1], seen <class 'list'> but now given <class 'tuple'>, "
                                                     "so their Python types differ"),
        (({"a": jnp.ones(3), "b": 1.0}, [1.0, [2.0]]), "at args[1][1], seen pytree leaf but now given <class 'list'>"),
        (({"a": jnp.ones(3), "b": 1.0}, [1.0, 2.0, 3.0]), "at args[1], seen list of length 2 but now given list of "
                                                          "length 3, so the lengths do not match"),
    ]
    for args, line in cases:
        with pytest.raises(TypeError) as e:
            compiled(*args)
        assert str(e.value).startswith("Function compiled with input pytree does not match the input pytree it was "
                                       "called with. There are 1 mismatches, including:\n")
        assert f"    * {line}" in str(e.value)
    with pytest.raises(TypeError, match="(?m)Argument 'x\\['b'\\]' compiled with float32\\[\\] and called with int32\\[\\]\n"
                                        "Argument 'y\\[0\\]' compiled with float32\\[\\] and called with float32\\[2\\]$"):
        compiled({"a": jnp.ones(3), "b": np.int32(1)}, [jnp.ones(2), 2.0])
    assert compiled({"a": jnp.ones(3), "b": 1.0}, [1.0, 2.0]).shape == (3,)     # still usable


def test_compiled_refuses_transformations():
    compiled = jx.jit(lambda x: x * 2).lower(jnp.ones(3)).compile()
    for transform in (jx.jit, jx.vmap, lambda f: jx.grad(lambda x: f(x).sum())):
        with pytest.raises(TypeError, match="Cannot apply JAX transformations to a function lowered and compiled for a "
                                            "particular signature. Detected argument of Tracer type"):
            transform(compiled)(jnp.ones(3) if transform is not jx.vmap else jnp.ones((2, 3)))


def test_device_put_may_alias_and_donate():
    x = jnp.arange(3.0)
    assert jx.device_put(x) is x and jx.device_put(x, may_alias=True) is x
    y = jx.device_put(x, may_alias=False)
    assert y is not x and np.asarray(y).tolist() == [0.0, 1.0, 2.0]
    x.delete()
    assert np.asarray(y).tolist() == [0.0, 1.0, 2.0]      # a copy of its own
    z = jnp.ones(2)
    assert np.asarray(jx.device_put(z, donate=True)).tolist() == [1.0, 1.0]
    assert np.asarray(jx.device_put(np.ones(2), donate=True)).tolist() == [1.0, 1.0]
    pair = jx.device_put([z, z], may_alias=[True, False])
    assert pair[0] is z and pair[1] is not z
    with pytest.raises(ValueError, match="may_alias and donate cannot be True at the same time"):
        jx.device_put(z, may_alias=True, donate=True)


def test_device_put_prefix_errors_name_the_mismatch():
    z = jnp.ones(2)
    with pytest.raises(ValueError) as e:
        jx.device_put([z, z], may_alias=[True, False, True])
    assert str(e.value) == (
        "device_put may_alias specification must be a tree prefix of the corresponding value; \n"
        "  Mismatch details (1 found):\n  pytree structure error: different lengths of list at key path\n"
        "    device_put may_alias\nAt that key path, the prefix pytree device_put may_alias has a subtree of type list "
        "of length 3, but the full pytree has a subtree of the same type but of length 2.")
    with pytest.raises(ValueError, match=r"(?s)different types at key path\n    device_put donate\[1\].*"
                                         r"<class 'dict'>\nbut .* of different type\n    <class 'list'>"):
        jx.device_put((z, [z]), donate=(True, {"a": True}))
    with pytest.raises(ValueError, match="device_put device specification must be a tree prefix"):
        jx.device_put([z, z], jx.devices()[:1] * 3)


def test_deleted_arrays_raise_runtime_errors_naming_their_type():
    x = jnp.ones((2, 3))
    x.delete()
    assert x.is_deleted() and "deleted" in repr(x)
    for use in (lambda: x + 1, lambda: np.asarray(x), lambda: jx.jit(jnp.sin)(x), lambda: x[0]):
        with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[2,3\]\."):
            use()
    assert float(jnp.ones(()) + 1) == 2.0     # the process stays usable
