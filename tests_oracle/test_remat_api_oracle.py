"""checkpoint's API against JAX: what print_saved_residuals reports (less the column JAX adds to
source locations; with policies applied inside cond and scan), where optimization barriers are,
and the errors for removed options."""
import re

import jax
import jax.ad_checkpoint  # noqa: F401 - a submodule jax does not import itself
import numpy as np
import pytest

import jaxprc

C = np.arange(3.0, dtype=np.float32)


def _dots(lib):
    def f(x):
        for _ in range(3):
            x = lib.numpy.sin(lib.numpy.dot(x, x))
        return x
    return lib.checkpoint(f, policy=lib.checkpoint_policies.checkpoint_dots), (np.ones((3, 3), np.float32),)


def _names(lib):
    name = lib.ad_checkpoint.checkpoint_name

    def g(x):
        return lib.numpy.sin(name(lib.numpy.cos(name(lib.numpy.sin(x), "a")), "b")) * x
    return lib.checkpoint(g, policy=lib.checkpoint_policies.save_any_names_but_these("a")), (1.0,)


W = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
X = np.array([0.3, -0.2, 0.5], np.float32)


def _dots_in_cond(lib):
    np_, lax = lib.numpy, lib.lax

    def f(x, w):
        return np_.sin(lax.cond(x.sum() > 0, lambda v: np_.sin(np_.sin(v @ w) @ w), lambda v: np_.cos(v * 2.0), x)).sum()
    return lib.checkpoint(f, policy=lib.checkpoint_policies.checkpoint_dots), (X, W)


def _dots_in_switch(lib):
    np_, lax = lib.numpy, lib.lax

    def f(i, x, w):
        return lax.switch(i, [lambda v: np_.sin(v @ w), lambda v: np_.cos(v) @ w @ w, lambda v: v], x).sum()
    return lib.checkpoint(f, policy=lib.checkpoint_policies.checkpoint_dots), (1, X, W)


def _names_in_nested_cond(lib):
    np_, lax, name = lib.numpy, lib.lax, lib.ad_checkpoint.checkpoint_name

    def f(x):
        inner = lambda u: lax.cond(u[0] > 0, lambda v: np_.sin(name(np_.sin(v), "a")), np_.cos, u)
        return lax.cond(x.sum() > 0, inner, np_.cos, x).sum()
    return lib.checkpoint(f, policy=lib.checkpoint_policies.save_only_these_names("a")), (X,)


WS = np.stack([W, W.T, W * 0.5, -W])


def _dots_in_scan(lib):
    np_, lax = lib.numpy, lib.lax

    def f(x, w, ws):        # a constant (w), two carries, scanned inputs and outputs
        def body(c, wi):
            h = np_.sin(c[0] @ wi) + np_.cos(c[1] @ w)
            return (h, np_.tanh(h @ w)), np_.sin(h) @ wi
        (a, b), ys = lax.scan(body, (x, x * 2), ws)
        return (a * b).sum() + ys.sum()
    return lib.checkpoint(f, policy=lib.checkpoint_policies.checkpoint_dots), (X, W, WS)


def _scan_in_cond_in_scan(lib):
    np_, lax = lib.numpy, lib.lax

    def f(x, w, ws):
        def outer(c, wi):
            inner = lambda v: lax.scan(lambda d, _: (np_.sin(d @ wi), None), v, None, length=2)[0]
            return lax.cond(c.sum() > 0, inner, lambda v: np_.cos(v @ w), c), None
        return lax.scan(outer, x, ws)[0].sum()
    return lib.checkpoint(f, policy=lib.checkpoint_policies.checkpoint_dots), (X, W, WS)


def _named_dots(lib, make_policy):
    np_, name = lib.numpy, lib.ad_checkpoint.checkpoint_name

    def f(x, w):
        h = name(np_.sin(x @ w), "a")
        return (np_.cos(name(h @ w, "b")) @ np_.stack([w, w]).sum(0)).sum()
    return lib.checkpoint(f, policy=make_policy(lib.checkpoint_policies)), (X, W)


CASES = {
    "offload_dot_with_no_batch_dims": lambda lib: _named_dots(
        lib, lambda p: p.offload_dot_with_no_batch_dims("device", "pinned_host")),
    "save_and_offload_only_these_names": lambda lib: _named_dots(lib, lambda p: p.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"], offload_src="device",
        offload_dst="pinned_host")),
    "save_from_both_policies": lambda lib: _named_dots(lib, lambda p: p.save_from_both_policies(
        p.save_only_these_names("b"), p.checkpoint_dots)),
    "checkpoint_dots": _dots,
    "names": _names,
    "default_policy": lambda lib: (lib.checkpoint(lambda x, y: lib.numpy.sin(x) * y), (1.0, 2.0)),
    "no_checkpoint": lambda lib: (lambda x, y: lib.numpy.sin(x) * y, (1.0, 2.0)),
    "constant_and_path": lambda lib: (lambda x: (lib.numpy.sin(x[0]) * x[1], lib.numpy.exp(C * x[1])), ((1.0, 2.0),)),
    "varargs": lambda lib: (lambda x, *a: lib.numpy.sin(x) * a[0], (1.0, 2.0)),
    "dots_in_cond": _dots_in_cond,
    "dots_in_switch": _dots_in_switch,
    "names_in_nested_cond": _names_in_nested_cond,
    "dots_in_scan": _dots_in_scan,
    "scan_in_cond_in_scan": _scan_in_cond_in_scan,
}


def _report(lib, case, capsys):
    fun, args = CASES[case](lib)
    lib.ad_checkpoint.print_saved_residuals(fun, *args)
    lines = capsys.readouterr().out.splitlines()
    # the kinds and types, less the source locations (JAX writes file:line:column, jaxprc file:line)
    # JAX names the values a scan saves "output of closed_call" (its scan's inner call), jaxprc "output of scan"
    return [re.sub(r" from (/.*)?$", "", line).replace("output of closed_call", "output of scan") for line in lines]


# JAX moves offloaded residuals to host memory ("f32<host>[3] output of device_put"); jaxprc keeps
# them in device memory, so there the same residuals are compared by type only.
OFFLOADING = {"offload_dot_with_no_batch_dims", "save_and_offload_only_these_names"}


@pytest.mark.parametrize("case", list(CASES))
def test_print_saved_residuals_as_jax(case, capsys):
    ours, theirs = _report(jaxprc, case, capsys), _report(jax, case, capsys)
    if case in OFFLOADING:
        assert any("<host>" in line for line in theirs)
        ours, theirs = ([line.split(" ")[0].replace("<host>", "") for line in r] for r in (ours, theirs))
    assert ours == theirs


def test_barriers_where_jax_puts_them():
    def barriers(lib, transform, **kwargs):
        f = lib.checkpoint(lambda x, y: lib.numpy.sin(x) * y, **kwargs)
        return "optimization_barrier" in lib.jit(transform(lib, f)).lower(1.0, 2.0).as_text()
    for transform in (lambda lib, f: f, lambda lib, f: lib.grad(f)):
        for kwargs in ({}, {"prevent_cse": False}):
            assert barriers(jaxprc, transform, **kwargs) == barriers(jax, transform, **kwargs)


def test_removed_and_refused_options_as_jax():
    def concrete(lib):
        lib.checkpoint(lambda x: x, concrete=True)

    def pytree_prevent_cse(lib):
        lib.checkpoint(lambda d: d["a"], prevent_cse={"a": True})({"a": 1.0})
    for make in (concrete, pytree_prevent_cse):
        errors = []
        for lib in (jax, jaxprc):
            with pytest.raises(Exception) as e:
                make(lib)
            errors.append((type(e.value), str(e.value)))
        assert errors[0] == errors[1]


def test_policy_helpers_refuse_as_jax():
    def errors(lib):
        p = lib.checkpoint_policies
        out = []
        for make in (lambda: p.save_and_offload_only_these_names(
                         names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
                         offload_src="device", offload_dst="pinned_host"),
                     lambda: lib.grad(lib.checkpoint(lib.numpy.sin, policy=p.save_from_both_policies(
                         p.checkpoint_dots, lambda *a, **k: "save")))(1.0)):
            with pytest.raises(ValueError) as e:
                make()
            out.append(str(e.value).split(". Got")[0])
        return out
    assert errors(jaxprc) == errors(jax)
