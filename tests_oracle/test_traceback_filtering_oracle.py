"""Traceback filtering against JAX: for an error raised in a user's function under jit, grad,
vmap, scan, cond and custom_vjp, each library's traceback holds the same frames of the user's file,
in each ``jax_traceback_filtering`` mode, with the same note or cause."""
import os
import traceback

import jax
import numpy as np
import pytest

import jaxprc

HERE = os.path.abspath(__file__)


class Boom(Exception):
    pass


def bad(x):
    raise Boom("boom")


def _custom_vjp(lib, where):
    f = lib.custom_vjp(lambda x: x)
    if where == "fwd":
        f.defvjp(lambda x: (bad(x), None), lambda r, g: (g,))
    else:
        f.defvjp(lambda x: (x, None), lambda r, g: bad(g))
    return f


CASES = {
    "jit": lambda lib: lib.jit(bad)(1.0),
    "grad": lambda lib: lib.grad(bad)(1.0),
    "vmap": lambda lib: lib.vmap(bad)(np.ones(2, np.float32)),
    "scan": lambda lib: lib.lax.scan(lambda c, x: (bad(c), None), 1.0, np.ones(2, np.float32)),
    "cond": lambda lib: lib.lax.cond(True, bad, lambda x: x, 1.0),
    "custom_vjp fwd": lambda lib: lib.grad(_custom_vjp(lib, "fwd"))(1.0),
    "custom_vjp bwd": lambda lib: lib.grad(_custom_vjp(lib, "bwd"))(1.0),
    "jit of vmap of grad": lambda lib: lib.jit(lib.vmap(lib.grad(bad)))(np.ones(2, np.float32)),
    "vjp function": lambda lib: lib.vjp(_custom_vjp(lib, "bwd"), 1.0)[1](1.0),
}


def _error(lib, case, mode):
    previous = lib.config.jax_traceback_filtering
    lib.config.update("jax_traceback_filtering", mode)
    try:
        CASES[case](lib)
    except Boom as e:
        return e
    finally:
        lib.config.update("jax_traceback_filtering", previous)
    raise AssertionError(f"{lib.__name__}: no error")


def _user_frames(tb):
    return [(f.name, f.lineno) for f in traceback.extract_tb(tb) if os.path.abspath(f.filename) == HERE]


def _outline(e):
    """What a user sees of the error's traceback and its chain."""
    return dict(frames=_user_frames(e.__traceback__),
                n_frames=len(traceback.extract_tb(e.__traceback__)),
                notes=len(getattr(e, "__notes__", ())),
                cause=type(e.__cause__).__name__,
                cause_user_frames=_user_frames(e.__cause__.__traceback__) if e.__cause__ is not None else None)


@pytest.mark.parametrize("mode", ["quiet_remove_frames", "remove_frames", "off"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_user_sees_the_frames_jax_shows(case, mode):
    ours, theirs = _outline(_error(jaxprc, case, mode)), _outline(_error(jax, case, mode))
    if mode != "off":       # filtered: nothing but the user's frames (JAX keeps some files of its own)
        assert ours["n_frames"] == len(ours["frames"])
    del ours["n_frames"], theirs["n_frames"]
    if case == "vjp function":      # JAX's vjp function is no boundary: it leaves its frames in,
        ours, theirs = ours["frames"], theirs["frames"]     # jaxprc removes them (and says so)
    assert ours == theirs


EAGER = {      # an error raised by an eager jax.numpy or lax call, outside any transformation
    "jnp.reshape": lambda lib: lib.numpy.reshape(lib.numpy.ones(3), (5,)),       # before any jitted code
    "jnp.add": lambda lib: lib.numpy.add(lib.numpy.ones(3), lib.numpy.ones(4)),
    "lax.add": lambda lib: lib.lax.add(lib.numpy.ones(3), lib.numpy.ones(4)),
    "lax.mul ranks": lambda lib: lib.lax.mul(lib.numpy.ones((3, 1)), lib.numpy.ones(3)),
}


@pytest.mark.parametrize("case", list(EAGER))
def test_eager_calls_are_boundaries_where_jax_jits(case):
    """JAX's eager primitives and most jax.numpy functions run jitted code, a boundary: the note
    is added, its machinery's frames go (frames above the boundary stay: each library keeps some
    of its own). An error raised before any jitted code is left as it is."""
    def outline(lib):
        try:
            EAGER[case](lib)
        except Exception as e:    # noqa: BLE001 - the type and traceback are what is compared
            frames = traceback.extract_tb(e.__traceback__)
            return (isinstance(e, TypeError), str(e).split("\n")[0].split(" (at ")[0],
                    len(getattr(e, "__notes__", ())), os.path.abspath(frames[1].filename) == HERE)
        raise AssertionError(f"{lib.__name__}: no error")
    ours, theirs = outline(jaxprc), outline(jax)
    if case == "jnp.reshape":     # the same facts, in each library's words
        ours, theirs = ours[:1] + ours[2:], theirs[:1] + theirs[2:]
    assert ours == theirs
