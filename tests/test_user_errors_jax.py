"""The errors a user's mistakes raise, with JAX's types and the facts JAX's messages carry:
escaped tracers, conversions of traced values, non-JAX values, vmap's sizes and in_axes,
Jacobians of complex functions, grad's argnums, Python ints too large for their type, float0
arithmetic and the cotangent given to the function jax.vjp returns."""
import numpy as np
import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax


def test_an_escaped_tracer_says_its_type_function_and_creation_line():
    leaked = []

    def leak(x):
        leaked.append(x * 2)
        return x
    jx.jit(leak)(jnp.ones((2, 3)))
    with pytest.raises(jx.errors.UnexpectedTracerError) as e:
        leaked[0] + 1
    message = str(e.value)
    assert message.startswith("Encountered an unexpected tracer. A function transformed by JAX had a side effect, "
                              "allowing for a reference to an intermediate value with type float32[2,3] wrapped in")
    assert "The function being traced when the value leaked was leak." in message
    assert f"The leaked intermediate value was created on line {__file__}:" in message
    with pytest.raises(jx.errors.UnexpectedTracerError, match="was used in another trace"):
        jx.jit(lambda y: y + leaked[0])(1.0)
    assert float(jnp.ones(()) + 1) == 2.0


@pytest.mark.parametrize("convert, error, headline", [
    (int, jx.errors.ConcretizationTypeError, "Abstract tracer value encountered where concrete value is expected: "
     "traced array with shape float32[]\nThe problem arose with the `int` function. If trying to convert the data "
     "type of a value, try using `x.astype(int)` or `jnp.array(x, int)` instead.\n"),
    (float, jx.errors.ConcretizationTypeError, "Abstract tracer value encountered where concrete value is expected: "
     "traced array with shape float32[]\nThe problem arose with the `float` function. If trying to convert "
     "the data type of a value, try using `x.astype(float)`"),
    (bool, jx.errors.TracerBoolConversionError, "Attempted boolean conversion of traced array with shape float32[].\n"),
    (lambda x: [1, 2][x.astype(int)], jx.errors.TracerIntegerConversionError,
     "The __index__() method was called on traced array with shape int32[]\n"),
    (lambda x: range(x.astype(int)), jx.errors.TracerIntegerConversionError, "The __index__() method was called"),
    (np.asarray, jx.errors.TracerArrayConversionError,
     "The numpy.ndarray conversion method __array__() was called on traced array with shape float32[]\n"),
])
def test_traced_value_conversions_say_what_and_how_to_fix_it(convert, error, headline):
    with pytest.raises(error) as e:
        jx.jit(convert)(1.0)
    assert str(e.value).startswith(headline)              # JAX's first line(s), exactly
    assert f"was called at {__file__}:" in str(e.value)
    assert "an argument of the traced function" in str(e.value) or f"created at {__file__}:" in str(e.value)


def test_values_that_are_not_jax_types():
    with pytest.raises(TypeError) as e:
        jx.jit(lambda x: x)({"a": "abc"})
    assert str(e.value).startswith("Error interpreting argument to <lambda> as an abstract array. The problematic "
                                   "value is of type <class 'str'> and was passed to the function at path x['a'].")
    assert "is not a valid JAX type" in str(e.value) and "static_argnames='x'" in str(e.value)
    for f in (jx.jit(lambda x: "abc"), lambda x: jx.eval_shape(lambda y: object(), x), jx.grad(lambda x: "abc")):
        with pytest.raises(TypeError, match="returned a value of type <class '(str|object)'>, which is not a valid "
                                            "JAX type"):
            f(1.0)
    with pytest.raises(TypeError, match="Argument 'abc' of type <class 'str'> is not a valid JAX type"):
        jx.grad(lambda x: x)("abc")


def test_vmap_lists_every_argument_size():
    with pytest.raises(ValueError) as e:
        jx.vmap(lambda a, b, c: a)(jnp.ones(2), jnp.ones((3, 2)), {"k": jnp.ones(4)})
    assert str(e.value) == ("vmap got inconsistent sizes for array axes to be mapped:\n"
                            "  * one axis had size 2: axis 0 of argument a of type float32[2];\n"
                            "  * one axis had size 3: axis 0 of argument b of type float32[3,2];\n"
                            "  * one axis had size 4: axis 0 of argument c['k'] of type float32[4]")
    with pytest.raises(ValueError, match=r"most axes \(2 of them\) had size 2, e.g. axis 0 of argument a of type "
                                         r"float32\[2\];\n  \* one axis had size 4: axis 1 of argument b"):
        jx.vmap(lambda a, b, c: a, in_axes=(0, 1, 0))(jnp.ones(2), jnp.ones((3, 4)), jnp.ones(2))


def test_in_axes_must_be_a_tree_prefix_of_the_arguments():
    x = jnp.ones(3)
    with pytest.raises(ValueError) as e:
        jx.vmap(lambda a: a[0], in_axes=([0, 0],))([x, x, x])
    assert str(e.value) == (
        "vmap in_axes specification must be a tree prefix of the corresponding value; \n"
        "  Mismatch details (1 found):\n  pytree structure error: different lengths of list at key path\n"
        "    vmap in_axes[0]\nAt that key path, the prefix pytree vmap in_axes has a subtree of type list of "
        "length 2, but the full pytree has a subtree of the same type but of length 3.")
    with pytest.raises(ValueError, match=r"(?s)different pytree metadata at key path\n    vmap in_axes\[0\].*"
                                         r"symmetric difference on key sets is\n    a b"):
        jx.vmap(lambda d: d, in_axes=({"a": 0},))({"b": x})
    with pytest.raises(ValueError, match="(?s)vmap out_axes specification.*different type\n    pytree leaf."):
        jx.vmap(lambda a: a, out_axes=(0, 0))(x)
    assert jx.vmap(lambda d: d["b"] * 2, in_axes=({"b": 0},))({"b": x}).shape == (3,)     # still usable


@pytest.mark.parametrize("make, message", [
    (lambda: jx.jacfwd(lambda x: x)(1j), "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
     "np.floating), but got complex64. For holomorphic differentiation, pass holomorphic=True."),
    (lambda: jx.jacfwd(lambda x: x, holomorphic=True)(1.0), "jacfwd with holomorphic=True requires inputs with "
     "complex dtype, but got float32."),
    (lambda: jx.jacfwd(lambda x: x.real, holomorphic=True)(1j), "jacfwd with holomorphic=True requires outputs with "
     "complex dtype, but got float32."),
    (lambda: jx.jacrev(lambda x: x * 1j)(1.0), "jacrev requires real-valued outputs (output dtype that is a sub-dtype "
     "of np.floating), but got complex64."),
    (lambda: jx.jacrev(lambda x: x, holomorphic=True)(1.0), "jacrev with holomorphic=True requires inputs with "
     "complex dtype, but got float32."),
    (lambda: jx.jacrev(lambda x: x)(1), "jacrev requires real- or complex-valued inputs"),
    (lambda: jx.grad(lambda x, y: x * y, argnums=1)(1.0), "differentiating with respect to argnums=1 requires at "
     "least 2 positional arguments to be passed by the caller, but got only 1 positional arguments."),
    (lambda: jx.grad(lambda x, y: x * y, argnums=(0, 2))(1.0, 2.0), "argnums=(0, 2) requires at least 3"),
])
def test_differentiation_type_errors(make, message):
    with pytest.raises(TypeError) as e:
        make()
    assert message in str(e.value)


def test_jacobians_of_holomorphic_functions_still_work():
    np.testing.assert_allclose(complex(jx.jacfwd(lambda z: z * z, holomorphic=True)(1.0 + 2.0j)), 2 + 4j, rtol=1e-6)
    np.testing.assert_allclose(complex(jx.jacrev(lambda z: z * z, holomorphic=True)(1.0 + 2.0j)), 2 + 4j, rtol=1e-6)


@pytest.mark.parametrize("call, path", [
    (lambda: jx.jit(lambda x, y: x * y)(jnp.ones(3), 2**40), "y"),
    (lambda: jx.jit(lambda x, y: x * y)(jnp.ones(3), y=2**70), "y"),
    (lambda: jx.jit(lambda d: d["a"])({"a": [1, 2**70]}), "d['a'][1]"),
    (lambda: jx.make_jaxpr(lambda x: x)(-2**63 - 1), "x"),
])
def test_python_ints_beyond_their_type_overflow(call, path):
    with pytest.raises(OverflowError, match=r"(?m)An overflow was encountered while parsing an argument to a jitted "
                                            rf"computation, whose argument path is {__import__('re').escape(path)}\. "
                                            r"Got <class 'int'> with value -?\d+$"):
        call()
    assert int(jx.jit(lambda x: x)(2**31 - 1)) == 2**31 - 1


_LEAKED = []


def test_scan_and_checking_leaks_name_the_holder():
    with jx.checking_leaks(), pytest.raises(Exception, match=r"(?s)Leaked trace DynamicJaxprTrace\..*created on line "
                                                             r".*while tracing scan.*"
                                                             r"<DynamicJaxprTracer \d+> is referred to by <list (\d+)>\[0\]\n"
                                                             r"<list \1> is referred to by .*\._LEAKED"):
        lax.scan(lambda c, _: (_LEAKED.append(c * 2) or c, None), 1.0, None, length=2)
    _LEAKED.clear()


class _Holder:
    pass


_HOLDER = _Holder()


def test_checking_leaks_names_the_attribute_and_key_that_hold_a_tracer():
    def keep_in_attribute(x):
        _HOLDER.kept = x
        return x
    with jx.checking_leaks(), pytest.raises(Exception, match=r"<DynamicJaxprTracer \d+> is referred to by <_Holder (\d+)>\.kept"
                                                             r"\n<_Holder \1> is referred to by .*\._HOLDER"):
        jx.jit(keep_in_attribute)(1.0)
    del _HOLDER.kept
    store = {}
    with jx.checking_leaks(), pytest.raises(Exception, match=r"<BatchTracer \d+> is referred to by <dict \d+>\['k'\]"):
        jx.vmap(lambda x: store.setdefault("k", x))(jnp.ones(2))
    store.clear()


def test_float0_values_take_part_in_no_arithmetic():
    zeros = np.zeros(3, dtype=jx.dtypes.float0)
    for op in (lambda: jnp.add(zeros, zeros), lambda: jx.jit(lambda x: x * 2)(zeros)):
        with pytest.raises(TypeError, match=r"Called (add|multiply) with a float0 array\. float0s do not support any "
                                            r"operations by design"):
            op()
    # what differentiating with respect to an integer gives back is such a value, and it passes through jit
    g = jx.grad(lambda x, n: x * n, argnums=1, allow_int=True)(1.0, 3)
    assert g.dtype == jx.dtypes.float0 and jx.jit(lambda v: v)(g).dtype == jx.dtypes.float0


def test_the_function_vjp_returns_checks_its_one_cotangent():
    def pair(x):
        return x * 2.0, jnp.sin(x)
    _, pullback = jx.vjp(pair, 1.0)
    with pytest.raises(TypeError, match=r"applied to pair was called with 2 arguments,\nbut functions returned by "
                                        r"`jax.vjp` must be called with a single argument"):
        pullback(1.0, 2.0)
    with pytest.raises(ValueError, match=r"(?s)unexpected tree structure\..*function pair at .*test_user_errors_jax"
                                         r".*  \* out was a <class 'tuple'> in the original output, but a "
                                         r"<class 'list'> here"):
        pullback([1.0, 2.0])
    for bad, got in (((jnp.ones(3), 1.0), "float32\\[3\\]"), ((jnp.int32(1), 1.0), "int32\\[\\]")):
        with pytest.raises(ValueError, match=rf"for argument to VJP function: got {got}, but expected float32\[\] "
                                             r"because the corresponding output of the differentiated function "
                                             r"had JAX type float32\[\]"):
            pullback(bad)
    (ct,) = pullback((1.0, 1.0))
    np.testing.assert_allclose(float(ct), 2.0 + np.cos(1.0), rtol=1e-6)
    # an integer output's cotangent may be any integer array or float0 of its shape, as in JAX
    _, int_pullback = jx.vjp(lambda x: (x * 2.0, jnp.int32(3)), 1.0)
    assert float(int_pullback((1.0, np.zeros((), jx.dtypes.float0)))[0]) == 2.0
    assert float(int_pullback((1.0, jnp.int32(5)))[0]) == 2.0
