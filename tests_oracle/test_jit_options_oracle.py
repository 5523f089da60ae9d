"""jit's options and argument checks against JAX: the same exception types and messages for the
same mistakes, the same arguments kept by keep_unused, the same equations under inline."""
import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as xnp


def _add(x, y=1.0):
    return x + y


def _pos_only(x, /, y):
    return x + y


def _error(lib, make):
    # JAX checks for masked arrays only on its slow path: once jnp.sin has run on an f64[2] array
    # elsewhere in the worker, its C++ fast path accepts the masked array silently. Start cold.
    lib.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            make(lib)
        except Exception as e:     # noqa: BLE001 - the type is what is compared
            return type(e), re.sub(r"0x[0-9a-f]+", "ADDR", str(e))
    raise AssertionError(f"{lib.__name__} raised nothing")


class _K:
    @staticmethod
    def g(x):
        return x


def _gen(x):
    yield x


ERRORS = {
    "static_argnames": lambda lib: lib.jit(_add, static_argnames="z"),
    "donate_argnames": lambda lib: lib.jit(_add, donate_argnames=("y", "w")),
    "static_argnums": lambda lib: lib.jit(_add, static_argnums=(0, 4)),
    "donate_argnums": lambda lib: lib.jit(_add, donate_argnums=5),
    "positional_only": lambda lib: lib.jit(_pos_only, static_argnames="x"),
    "static_donate": lambda lib: lib.jit(_add, static_argnames="x", donate_argnames="x"),
    "device_and_backend": lambda lib: lib.jit(_add, device=lib.devices()[0], backend="cpu"),
    "staticmethod": lambda lib: lib.jit(_K.__dict__["g"]),
    "generator": lambda lib: lib.jit(_gen),
    "masked_jit": lambda lib: lib.jit(lambda x: x)(np.ma.array([1.0, 2.0], mask=[0, 1])),
    "masked_eager": lambda lib: lib.numpy.sin(np.ma.array([1.0, 2.0], mask=[0, 1])),
    "may_alias_and_donate": lambda lib: lib.device_put(lib.numpy.ones(2), may_alias=True, donate=True),
    "may_alias_prefix": lambda lib: lib.device_put([1.0, 2.0], may_alias=[True, False, True]),
    "donate_prefix_types": lambda lib: lib.device_put((1.0, [2.0]), donate=(True, {"a": True})),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_same_error_as_jax(name):
    assert _error(jaxprc, ERRORS[name]) == _error(jax, ERRORS[name])


def _compiled(lib):
    return lib.jit(lambda x, y: x["a"]).lower({"a": lib.numpy.ones(3), "b": 1.0}, [1.0, 2.0]).compile()


@pytest.mark.parametrize("args", [
    lambda np_: ({"a": np_.ones(3)}, [1.0, 2.0]),
    lambda np_: ({"a": np_.ones(3), "b": 1.0}, (1.0, 2.0)),
    lambda np_: ({"a": np_.ones(3), "b": 1.0}, [1.0, [2.0]]),
    lambda np_: ({"a": np_.ones(3), "b": 1.0}, [1.0, 2.0, 3.0]),
    lambda np_: ({"a": np_.ones(4), "b": np.int32(1)}, [np_.ones(2), 2.0]),
])
def test_compiled_called_with_other_arguments_as_jax(args):
    def call(lib):
        _compiled(lib)(*args(lib.numpy))
    kind, message = _error(jaxprc, call)
    want_kind, want = _error(jax, call)
    assert kind is want_kind is TypeError
    assert message.startswith(want.split("\n")[0])
    assert [line for line in want.split("\n")[1:]] == message.split("\n")[1:len(want.split("\n"))]


def test_deleted_array_message_starts_as_jax():
    def use(lib):
        x = lib.numpy.ones((2, 3))
        x.delete()
        return x + 1
    (kind, message), (want_kind, want) = _error(jaxprc, use), _error(jax, use)
    assert issubclass(kind, want_kind) and message.startswith(want)


def test_keep_unused_keeps_the_arguments_jax_keeps():
    def f(x, y, z):
        return (jnp.sin(y), x * 2)[1] if isinstance(x, jax.Array) else (xnp.sin(y), x * 2)[1]
    for keep in (False, True):
        texts = [lib.jit(f, keep_unused=keep).lower(1.0, 2.0, 3).as_text() for lib in (jax, jaxprc)]
        mains = [next(line for line in t.splitlines() if "@main" in line) for t in texts]
        assert mains[0].count("%arg") == mains[1].count("%arg")
        assert texts[0].splitlines()[0].split(" attributes ")[1] == texts[1].splitlines()[0].split(" attributes ")[1]


def test_inline_gives_jax_equations():
    def outer(lib):
        inner = lib.jit(lambda y: lib.numpy.sin(y) * 2, inline=True)
        return [e.primitive.name for e in lib.make_jaxpr(lambda x: inner(x) + 1)(1.0).jaxpr.eqns]
    assert outer(jaxprc) == outer(jax)


def test_partial_names_and_donate_argnames_infos_as_jax():
    for lib in (jax, jaxprc):
        assert lib.jit(functools.partial(_add, 1.0)).__name__ == "_add"
    infos = [lib.jit(_add, donate_argnames="y").lower(np.ones(3, np.float32), y=np.ones(3, np.float32)).args_info
             for lib in (jax, jaxprc)]
    assert [[i.donated for i in jax.tree.leaves(info)] for info in infos] == [[False, True]] * 2
