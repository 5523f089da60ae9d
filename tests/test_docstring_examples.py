"""The ``>>>`` examples in the public functions' docstrings run and print what they show (as JAX's
doctests do, with ``jaxprc`` and ``jnp`` already imported), so the API reference never lies."""
import doctest
import importlib

import pytest

import jaxprc
import jaxprc.numpy as jnp

# The module of each documented name (where its docstring is written), and the names that must
# carry an example: the most used functions of the API.
EXAMPLES = {
    "jaxprc.api": ("jit", "make_jaxpr"),
    "jaxprc.transformations.ad": ("grad",),
    "jaxprc.transformations.vmap": ("vmap",),
    "jaxprc.transformations.custom_derivatives": ("custom_jvp", "custom_vjp"),
    "jaxprc.lax.control_flow.loops": ("scan",),
    "jaxprc.lax.control_flow.conditionals": ("cond",),
    "jaxprc.ir.shape_poly": ("symbolic_shape",),
    "jaxprc.passes.registry": ("run_pipeline",),
}


@pytest.mark.parametrize("module_name", sorted(EXAMPLES))
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    tests = doctest.DocTestFinder().find(module, extraglobs={"jaxprc": jaxprc, "jnp": jnp})
    with_examples = {t.name.rsplit(".", 1)[-1] for t in tests if t.examples}
    assert set(EXAMPLES[module_name]) <= with_examples, with_examples
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_a_wrong_example_fails():
    """The runner compares: an example that prints something else is a failure."""
    wrong = doctest.DocTestParser().get_doctest(">>> print(jaxprc.grad(lambda x: x ** 3)(2.0))\n13.0\n",
                                                {"jaxprc": jaxprc}, "wrong", None, 0)
    runner = doctest.DocTestRunner()
    runner.run(wrong, out=lambda _: None)
    assert runner.summarize(verbose=False) == (1, 1)
