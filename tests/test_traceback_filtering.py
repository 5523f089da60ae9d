"""Errors raised through jit, grad, vmap, scan, cond, custom_vjp... show the user's frames, as JAX's
``jax_traceback_filtering`` modes say (compiler/engine/traceback_filtering.py)."""
import os
import traceback

import pytest

import jaxprc as jx
import jaxprc.numpy as jnp
from jaxprc import lax
from jaxprc.engine.traceback_filtering import FILTERED_NOTE, UnfilteredStackTrace

HERE = os.path.abspath(__file__)
PACKAGE_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                     for m in (jx, jx.ir, jx.passes, jx.runtime))


class Boom(Exception):
    pass


def bad(x):
    raise Boom("boom")


def _identity_with_bad_fwd():
    f = jx.custom_vjp(lambda x: x)
    f.defvjp(lambda x: (bad(x), None), lambda r, g: (g,))
    return f


def _identity_with_bad_bwd():
    f = jx.custom_vjp(lambda x: x)
    f.defvjp(lambda x: (x, None), lambda r, g: bad(g))
    return f


def _identity_with_bad_jvp():
    f = jx.custom_jvp(lambda x: x)
    f.defjvp(lambda primals, tangents: bad(primals))
    return f


CASES = {
    "jit": lambda: jx.jit(bad)(1.0),
    "grad": lambda: jx.grad(bad)(1.0),
    "vmap": lambda: jx.vmap(bad)(jnp.ones(2)),
    "scan": lambda: lax.scan(lambda c, x: (bad(c), None), 1.0, jnp.ones(2)),
    "cond": lambda: lax.cond(True, bad, lambda x: x, 1.0),
    "custom_vjp fwd": lambda: jx.grad(_identity_with_bad_fwd())(1.0),
    "custom_vjp bwd": lambda: jx.grad(_identity_with_bad_bwd())(1.0),
    "jit of grad of vmap": lambda: jx.jit(jx.grad(lambda x: jx.vmap(bad)(x).sum()))(jnp.ones(2)),
    "jit shape error": lambda: jx.jit(lambda x: x + jnp.ones(3))(jnp.ones(2)),
    "lower": lambda: jx.jit(bad).lower(1.0),
    "eval_shape": lambda: jx.eval_shape(bad, 1.0),
    "make_jaxpr": lambda: jx.make_jaxpr(bad)(1.0),
    "checkpoint": lambda: jx.checkpoint(bad)(1.0),
    "custom_jvp rule": lambda: jx.jvp(_identity_with_bad_jvp(), (1.0,), (1.0,)),
    "while_loop": lambda: lax.while_loop(lambda c: True, bad, 1.0),
    "switch": lambda: lax.switch(1, [bad, bad], 1.0),
    "linear_transpose": lambda: jx.linear_transpose(bad, 1.0),
    "pure_callback": lambda: jx.pure_callback(bad, jx.ShapeDtypeStruct((), jnp.float32), 1.0),
}


def _raise(case, mode):
    with jx.config.override("jax_traceback_filtering", mode):
        try:
            CASES[case]()
        except Exception as e:       # noqa: BLE001 (the error under test, whatever its type)
            return e
    raise AssertionError("no error raised")


def _files(tb):
    return [os.path.abspath(f.f_code.co_filename) for f, _ in traceback.walk_tb(tb)]


def _is_library(path):
    return path.startswith(PACKAGE_DIRS)


@pytest.mark.parametrize("case", list(CASES))
def test_default_mode_removes_library_frames_and_says_so(case):
    e = _raise(case, "auto")
    files = _files(e.__traceback__)
    assert files and all(f == HERE for f in files), files
    assert e.__notes__.count(FILTERED_NOTE) == 1     # the outermost boundary only
    assert e.__cause__ is None or not isinstance(e.__cause__, UnfilteredStackTrace)
    if case != "jit shape error":
        assert type(e) is Boom and traceback.extract_tb(e.__traceback__)[-1].name == "bad"


def test_off_keeps_every_frame():
    e = _raise("jit of grad of vmap", "off")
    files = _files(e.__traceback__)
    assert any(_is_library(f) for f in files) and files[-1] == HERE
    assert not getattr(e, "__notes__", None) and e.__cause__ is None


def test_remove_frames_keeps_the_unfiltered_traceback_as_the_cause():
    e = _raise("scan", "remove_frames")
    assert all(f == HERE for f in _files(e.__traceback__))
    assert not getattr(e, "__notes__", None)
    cause = e.__cause__
    assert type(cause) is UnfilteredStackTrace and e.__context__ is None
    assert str(cause).endswith("Boom: boom\n\nThe stack trace below excludes jaxprc's internal frames.\n"
                               "The preceding is the original exception that occurred, unmodified."
                               "\n\n--------------------")
    full = traceback.extract_tb(cause.__traceback__)
    assert any(_is_library(f.filename) for f in full)
    # from the module that started the call (pytest's) down to the user's raise
    assert full[-1].name == "bad" and full[0].name == "<module>"
    assert "test_remove_frames_keeps_the_unfiltered_traceback_as_the_cause" in [f.name for f in full]


def test_remove_frames_chains_the_original_cause_behind_the_unfiltered_trace():
    def raises_with_cause(x):
        try:
            {}["missing"]
        except KeyError as err:
            raise Boom("from a KeyError") from err
    with jx.config.override("jax_traceback_filtering", "remove_frames"):
        with pytest.raises(Boom) as info:
            jx.jit(raises_with_cause)(1.0)
    assert type(info.value.__cause__) is UnfilteredStackTrace
    assert type(info.value.__cause__.__cause__) is KeyError


def test_tracebackhide_marks_library_frames_and_removes_none():
    e = _raise("vmap", "tracebackhide")
    entries = list(traceback.walk_tb(e.__traceback__))
    assert any(_is_library(f.f_code.co_filename) for f, _ in entries)
    for frame, _ in entries:
        hidden = frame.f_locals.get("__tracebackhide__", False)
        assert hidden == _is_library(os.path.abspath(frame.f_code.co_filename)), frame.f_code.co_name
    assert not getattr(e, "__notes__", None) and e.__cause__ is None


def test_a_caught_error_leaves_the_library_usable_and_a_later_error_is_filtered_again():
    for _ in range(2):
        e = _raise("jit", "auto")
        assert all(f == HERE for f in _files(e.__traceback__))
    assert float(jx.jit(lambda x: x * 2)(3.0)) == 6.0


def test_an_error_raised_inside_the_library_on_bad_input_is_filtered_too():
    with pytest.raises(ValueError, match=r"scan got `length` argument of 3 which disagrees with leading axis "
                                         r"sizes \[2\]\.") as info:
        lax.scan(lambda c, x: (c, None), 1.0, jnp.ones(2), length=3)
    assert all(f == HERE for f in _files(info.value.__traceback__))


def test_the_option_is_checked_as_jax_checks_enums():
    with pytest.raises(ValueError, match=r"new enum value must be in \['off', 'tracebackhide', 'remove_frames', "
                                         r"'quiet_remove_frames', 'auto'\], got sometimes of type <class 'str'>."):
        jx.config.update("jax_traceback_filtering", "sometimes")
    assert jx.config.jax_traceback_filtering == "auto"
