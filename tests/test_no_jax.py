"""The product never imports the jax package: a full workload in a fresh process leaves it out."""
import subprocess
import sys
import textwrap

WORKLOAD = textwrap.dedent("""
    import sys
    import numpy as np
    import jaxprc, jaxprc.numpy as jnp
    from jaxprc import lax, random
    from jaxprc.ir import parse, verify

    @jaxprc.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2 * jnp.cos(x) * t

    @jaxprc.custom_vjp
    def g(x):
        return jnp.tanh(x)
    g.defvjp(lambda x: (jnp.tanh(x), x), lambda x, ct: (ct * 3.0,))

    def loss(w, x):
        h = jnp.tanh(x @ w)
        c, ys = lax.scan(lambda c, y: (c + y.sum(), c), 0.0, h)
        return c + f(h).sum() + g(h).sum()

    w, x = jnp.ones((3, 2)), jnp.arange(12.0).reshape(4, 3) / 10
    eager = jnp.sin(x) + 1                                     # eager
    value = jaxprc.jit(loss)(w, x)                             # jit
    dw = jaxprc.grad(loss)(w, x)                               # grad (custom rules inside)
    batched = jaxprc.vmap(jaxprc.grad(f))(jnp.arange(3.0))     # vmap of a custom_jvp's grad
    program = jaxprc.make_jaxpr(jaxprc.grad(loss))(w, x)
    verify(parse(str(program)))                                # text round trip
    keys = random.split(random.key(0))
    text = jaxprc.jit(loss).lower(w, x).as_text()
    np.testing.assert_allclose(np.asarray(batched), 2 * np.cos(np.arange(3.0)), rtol=1e-6)
    halves = np.asarray(jnp.ones(3, jnp.bfloat16) / 2)         # bfloat16 and device memory:
    from jaxprc.runtime.array import _copy_to_host             # jaxlib's copy to host
    assert halves.dtype.name == "bfloat16" and (halves == 0.5).all()
    np.testing.assert_array_equal(_copy_to_host(eager._buf), np.asarray(eager))
    from jaxprc.tools import cli                               # the command line
    assert cli.main(["demo"]) == 0
    assert "jax" not in sys.modules, sorted(m for m in sys.modules if m.split(".")[0] == "jax")
    print("no-jax workload ok")
""")


def test_full_workload_never_imports_jax():
    proc = subprocess.run([sys.executable, "-c", WORKLOAD], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no-jax workload ok" in proc.stdout
