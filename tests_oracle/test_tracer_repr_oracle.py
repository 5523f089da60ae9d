"""Tracers and types print as JAX 0.10.2's: ``JitTracer(float32[3])``, ``GradTracer(primal=...,
typeof(tangent)=f32[3])``, ``JVPTracer(primal=..., tangent=...)``, ``VmapTracer(aval=...,
batched=...)``, and ``str``/``repr`` of a ``ShapedArray``.

Each case records the repr of an argument and of an intermediate value (``x * 2``) inside one
transformation. Where jaxprc cannot know what JAX's tracer holds (it traces once and transforms
the program), ``KNOWN_DIFFERENCES`` says why; a listed case that starts matching fails, so the
table only shrinks."""
import jax
import numpy as np
import pytest

import jaxprc

X3 = np.arange(3.0, dtype=np.float32)
X23 = np.ones((2, 3), np.float32)


def _recorder(out):
    def f(x):
        y = x * 2
        out.append((repr(x), str(x), repr(y)))
        return y.sum()
    return f


CASES = {
    "jit": lambda lib, f: lib.jit(f)(X3),
    "jit weak scalar": lambda lib, f: lib.jit(f)(1.0),
    "jit int": lambda lib, f: lib.jit(f)(np.int32(3)),
    "jit bool": lambda lib, f: lib.jit(f)(np.bool_(True)),
    "make_jaxpr": lambda lib, f: lib.make_jaxpr(f)(X3),
    "grad": lambda lib, f: lib.grad(f)(X3),
    "grad weak scalar": lambda lib, f: lib.grad(f)(2.0),
    "jit of grad": lambda lib, f: lib.jit(lib.grad(f))(X3),
    "grad of grad": lambda lib, f: lib.grad(lib.grad(f))(2.0),
    "vjp": lambda lib, f: lib.vjp(f, X3),
    "linearize": lambda lib, f: lib.linearize(f, X3),
    "jacrev": lambda lib, f: lib.jacrev(f)(X3),
    "jvp": lambda lib, f: lib.jvp(f, (X3,), (X3,)),
    "jacfwd": lambda lib, f: lib.jacfwd(f)(X3),
    "vmap": lambda lib, f: lib.vmap(f)(X23),
    "vmap in_axes=1": lambda lib, f: lib.vmap(f, in_axes=1)(X23.T),
    "jit of vmap": lambda lib, f: lib.jit(lib.vmap(f))(X23),
    "vmap of grad": lambda lib, f: lib.vmap(lib.grad(f))(X23),
    "scan body": lambda lib, f: lib.lax.scan(lambda c, a: (c + f(a), None), np.float32(0), X23),
    "cond branch": lambda lib, f: lib.lax.cond(True, f, f, X3),
}

KNOWN_DIFFERENCES = {
    "jvp": "an intermediate value's tangent is not computed while jaxprc traces: its type is shown",
    "jacfwd": "an intermediate value's tangent is not computed while jaxprc traces: its type is shown",
    "vmap in_axes=1": "an intermediate value is shown batched along its first axis; JAX's keeps axis 1",
}


def _reprs(lib, name):
    out = []
    CASES[name](lib, _recorder(out))
    return out[0]


@pytest.mark.parametrize("name", list(CASES))
def test_tracers_print_as_jaxs(name):
    ours, theirs = _reprs(jaxprc, name), _reprs(jax, name)
    assert ours[:2] == theirs[:2]                           # the argument's repr and str
    if name in KNOWN_DIFFERENCES:
        assert ours[2] != theirs[2], f"{name}: now as JAX's, drop it from KNOWN_DIFFERENCES"
    else:
        assert ours[2] == theirs[2]                         # an intermediate value's


@pytest.mark.parametrize("shape, dtype, weak", [((2, 3), np.float32, False), ((), np.int32, True),
                                                ((4,), np.bool_, False), ((1, 0), np.complex64, True)])
def test_shaped_array_str_and_repr_are_jaxs(shape, dtype, weak):
    ours = jaxprc.core.ShapedArray(shape, np.dtype(dtype), weak_type=weak)
    theirs = jax.core.ShapedArray(shape, np.dtype(dtype), weak_type=weak)
    assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
    for short in (False, True):
        assert ours.str_short(short_dtypes=short) == theirs.str_short(short_dtypes=short)
    assert str(jaxprc.typeof(jaxprc.numpy.ones(shape, dtype))) == str(jax.typeof(jax.numpy.ones(shape, dtype)))
