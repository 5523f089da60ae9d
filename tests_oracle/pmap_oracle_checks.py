"""jaxprc's pmap vs jax's on 8 CPU devices, and JAX's SPMD MNIST example (both its pmap form and its
NamedSharding form) run by both libraries with the same synthetic data (run by test_pmap_oracle.py
in a process of its own, so that both clients are created with 8 devices)."""
import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ["JAXPRC_NUM_CPU_DEVICES"] = "8"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxprc as jx  # noqa: E402

X = (np.arange(48, dtype=np.float32).reshape(8, 3, 2) - 20) / 7
I = np.arange(16, dtype=np.int32).reshape(8, 2) - 5


def same(a, b, what, rtol=1e-6):
    """Same values, dtype, weak type and (for sharded results) layout spec."""
    la, lb = jax.tree_util.tree_leaves(a), jx.tree_util.tree_leaves(b)
    assert len(la) == len(lb), what
    for x, y in zip(la, lb):
        assert x.shape == y.shape and x.dtype == y.dtype, (what, x.shape, y.shape, x.dtype, y.dtype)
        assert getattr(x, "weak_type", False) == getattr(y, "weak_type", False), (what, "weak type")
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=rtol, atol=1e-6, err_msg=what)
        if hasattr(x, "sharding") and len(x.sharding.device_set) > 1:
            assert [d.id for d in x.sharding.mesh.devices.flat] == [d.id for d in y.sharding.mesh.devices.flat]
            assert tuple(x.sharding.spec) == tuple(y.sharding.spec)[:len(x.sharding.spec)], (what, x.sharding, y.sharding)


def cases(lib):
    """Each case: a function of the library (jax or jaxprc) giving the result to compare."""
    lax, jnp = lib.lax, lib.numpy
    return {
        "normalize": lambda: lib.pmap(lambda v: v / lax.psum(v, "i"), "i")(X),
        "broadcast_arg": lambda: lib.pmap(lambda v, s: (v + s, s * 2.0), in_axes=(0, None))(X, 4.0),
        "int_psum": lambda: lib.pmap(lambda v: lax.psum(v, "i") * 2 + v, "i")(I),
        "collectives": lambda: lib.pmap(lambda v: (lax.pmean(v, "i"), lax.pmax(v, "i"), lax.all_gather(v, "i"),
                                                   lax.axis_index("i"),
                                                   lax.ppermute(v, "i", [(k, (k + 3) % 8) for k in range(8)])),
                                        "i")(X),
        "in_axes_1": lambda: lib.pmap(lambda v: jnp.sin(v).sum(), in_axes=1)(X.transpose(1, 0, 2)[:, :3]),
        "out_axes_1": lambda: lib.pmap(lambda v: v * 2, out_axes=1)(X),
        "out_axes_none": lambda: lib.pmap(lambda v: lax.psum(v, "i"), "i", out_axes=None)(X),
        "static": lambda: lib.pmap(lambda v, k: v ** k, static_broadcasted_argnums=1)(X, 3),
        "few_devices": lambda: lib.pmap(lambda v: v - lax.pmin(v, "i"), "i")(X[:3]),
        "devices": lambda: lib.pmap(lambda v: lax.psum(v, "i"), "i", devices=lib.devices()[-2:])(X[:2]),
        "grad": lambda: lib.grad(lambda v: (lib.pmap(lambda a: jnp.sin(a) * lax.psum(a, "i"), "i")(v) ** 2).sum())(X),
        "grad_inside": lambda: lib.pmap(lambda w, v: lax.psum(lib.grad(lambda w: jnp.sum(jnp.tanh(w * v)))(w), "i"),
                                        "i", in_axes=(None, 0))(np.float32(0.3), X),
        "vmap_of_pmap": lambda: lib.vmap(lib.pmap(lambda a: a * lax.psum(a, "i"), "i"))(X.transpose(1, 0, 2)),
        "pmap_of_vmap": lambda: lib.pmap(lambda a: lib.vmap(lambda b: b - lax.pmean(b, "j"), axis_name="j")(a),
                                         "i")(X),
        "jit_of_pmap": lambda: lib.jit(lib.pmap(lambda a: lax.pmax(a, "i") * a, "i"))(X),
        "eager_after": lambda: lib.pmap(lambda a: a * 2)(X)[3] + 1,
    }


# ---- JAX's examples/spmd_mnist_classifier_fromscratch.py, the same code for both libraries but for
# the imports; synthetic data instead of MNIST, two epochs of two batches.

MNIST_COMMON = '''
import numpy.random as npr

def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
  return [(scale * rng.randn(m, n), scale * rng.randn(n))
          for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]

def predict(params, inputs):
  activations = inputs
  for w, b in params[:-1]:
    outputs = np.dot(activations, w) + b
    activations = np.tanh(outputs)
  final_w, final_b = params[-1]
  logits = np.dot(activations, final_w) + final_b
  return logits - logsumexp(logits, axis=1, keepdims=True)

def loss(params, batch):
  inputs, targets = batch
  preds = predict(params, inputs)
  return -np.mean(np.sum(preds * targets, axis=1))

@jit
def accuracy(params, batch):
  inputs, targets = batch
  target_class = np.argmax(targets, axis=1)
  predicted_class = np.argmax(predict(params, inputs), axis=1)
  return np.mean(predicted_class == target_class)

layer_sizes = [784, 1024, 1024, 10]
param_scale = 0.1
step_size = 0.001
num_epochs = 2
batch_size = 128
num_train = train_images.shape[0]
num_complete_batches, leftover = divmod(num_train, batch_size)
num_batches = num_complete_batches + bool(leftover)
'''

MNIST_PMAP = '''
num_devices = device_count()
def data_stream():
  rng = npr.RandomState(0)
  while True:
    perm = rng.permutation(num_train)
    for i in range(num_batches):
      batch_idx = perm[i * batch_size:(i + 1) * batch_size]
      images, labels = train_images[batch_idx], train_labels[batch_idx]
      batch_size_per_device, ragged = divmod(images.shape[0], num_devices)
      shape_prefix = (num_devices, batch_size_per_device)
      images = images.reshape(shape_prefix + images.shape[1:])
      labels = labels.reshape(shape_prefix + labels.shape[1:])
      yield images, labels
batches = data_stream()

@partial(pmap, axis_name='batch')
def spmd_update(params, batch):
  grads = grad(loss)(params, batch)
  grads = [(lax.psum(dw, 'batch'), lax.psum(db, 'batch')) for dw, db in grads]
  return [(w - step_size * dw, b - step_size * db)
          for (w, b), (dw, db) in zip(params, grads)]

init_params = init_random_params(param_scale, layer_sizes)
replicate_array = lambda x: onp.broadcast_to(x, (num_devices,) + x.shape)
replicated_params = tree_map(replicate_array, init_params)
for epoch in range(num_epochs):
  for _ in range(num_batches):
    replicated_params = spmd_update(replicated_params, next(batches))
  params = tree_map(lambda x: x[0], replicated_params)
  train_acc = accuracy(params, (train_images, train_labels))
  test_acc = accuracy(params, (test_images, test_labels))
  results.append((train_acc, test_acc))
final = params
'''

MNIST_SHARDED = '''
mesh = jax.make_mesh((jax.device_count(),), ('batch',))
replicated_sharding = NamedSharding(mesh, P())
data_sharding = NamedSharding(mesh, P('batch'))

def data_stream():
  rng = npr.RandomState(0)
  while True:
    perm = rng.permutation(num_train)
    for i in range(num_batches):
      batch_idx = perm[i * batch_size:(i + 1) * batch_size]
      images, labels = train_images[batch_idx], train_labels[batch_idx]
      images = jax.device_put(images, data_sharding)
      labels = jax.device_put(labels, data_sharding)
      yield images, labels
batches = data_stream()

@jit
def spmd_update(params, batch):
  grads = grad(loss)(params, batch)
  return [(w - step_size * dw, b - step_size * db)
          for (w, b), (dw, db) in zip(params, grads)]

params = init_random_params(param_scale, layer_sizes)
replicated_params = jax.device_put(params, replicated_sharding)
for epoch in range(num_epochs):
  for _ in range(num_batches):
    replicated_params = spmd_update(replicated_params, next(batches))
  train_acc = accuracy(replicated_params, (train_images, train_labels))
  test_acc = accuracy(replicated_params, (test_images, test_labels))
  results.append((train_acc, test_acc))
final = replicated_params
'''

IMPORTS = {
    "jax": '''
from functools import partial
import numpy as onp
import jax
from jax import jit, grad, pmap, lax
from jax.scipy.special import logsumexp
from jax.tree_util import tree_map
from jax import device_count
from jax.sharding import NamedSharding, PartitionSpec as P
import jax.numpy as np
''',
    "jaxprc": '''
from functools import partial
import numpy as onp
import jaxprc as jax
from jaxprc import jit, grad, pmap, lax
from jaxprc.scipy.special import logsumexp
from jaxprc.tree_util import tree_map
from jaxprc import device_count
from jaxprc.sharding import NamedSharding, PartitionSpec as P
import jaxprc.numpy as np
''',
}


def synthetic_mnist():
    rng = np.random.RandomState(1)
    labels = rng.randint(0, 10, 256 + 128)
    images = (rng.rand(labels.size, 784) * (1 + labels[:, None] / 5)).astype(np.float32)   # learnable
    onehot = np.eye(10, dtype=np.float32)[labels]
    return images[:256], onehot[:256], images[256:], onehot[256:]


def run_mnist(lib: str, body: str):
    tr_x, tr_y, te_x, te_y = synthetic_mnist()
    env = {"train_images": tr_x, "train_labels": tr_y, "test_images": te_x, "test_labels": te_y, "results": []}
    exec(IMPORTS[lib] + MNIST_COMMON + body, env)    # noqa: S102
    return env["results"], env["final"]


def partial_manual(lib):
    """shard_map manual over "x" only; XLA partitions along "y"."""
    lax, jnp = lib.lax, lib.numpy
    mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
    P = lib.sharding.PartitionSpec
    A = np.arange(32, dtype=np.float32).reshape(8, 4) / 9
    f = lib.shard_map(lambda a: (lax.psum(a, "x"), a * lax.axis_index("x"), jnp.sin(a) @ jnp.ones((4, 3))),
                      mesh=mesh, in_specs=P("x"), out_specs=(P(), P("x"), P("x")), axis_names={"x"})
    grad = lib.grad(lambda a: (f(a)[0] ** 2).sum() + (f(a)[1] * f(a)[2][:, :1]).sum())(A)
    return lib.jit(f)(A), grad


def result_specs(lib):
    """The specs of results whose layout XLA chose, as JAX spells them (Explicit meshes give every
    dimension, Auto meshes drop trailing Nones)."""
    out = []
    for kind in ("Explicit", "Auto"):
        mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=(getattr(lib.sharding.AxisType, kind),) * 2)
        for spec in [(), ("x",), (None, "y")]:
            a = lib.device_put(np.ones((8, 4), np.float32), lib.sharding.NamedSharding(mesh, lib.P(*spec)))
            out += [tuple(lib.jit(lambda v: v * 3)(a).sharding.spec), tuple(lib.jit(lambda v: v.sum(1))(a).sharding.spec)]
    return out


def pcast_case(lib):
    """A replicated argument cast to varying: values, the gradient, and a loop carry (JAX needs the
    cast there under check_vma)."""
    lax, jnp, P = lib.lax, lib.numpy, lib.P
    mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
    f = lib.shard_map(lambda a: lax.pcast(a, "x", to="varying") * (lax.axis_index("x") + 1), mesh=mesh,
                      in_specs=P(), out_specs=P("x"))
    loop = lib.shard_map(lambda a, b: lax.fori_loop(0, 3, lambda i, c: c + b, lax.pcast(a, "x", to="varying")),
                         mesh=mesh, in_specs=(P(), P("x")), out_specs=P("x"))
    A = np.arange(8, dtype=np.float32) / 3
    ct = np.arange(32, dtype=np.float32)
    return f(A), lib.vjp(f, A)[1](ct), loop(A, np.ones(32, np.float32))


def reshard_case(lib):
    """jax.reshard eagerly, under jit and with a PartitionSpec under set_mesh (Explicit axes)."""
    X = np.arange(32, dtype=np.float32).reshape(8, 4)
    m = lib.make_mesh((4, 2), ("x", "y"))
    a = lib.device_put(X, lib.NamedSharding(m, lib.P("x")))
    b = lib.reshard(a, lib.NamedSharding(m, lib.P(None, "y")))
    c = lib.jit(lambda v: lib.reshard(v * 2, lib.NamedSharding(m, lib.P("y", "x"))))(a)
    with lib.set_mesh(m):
        d = lib.reshard({"k": a}, lib.P("y"))["k"]
    return b, c, d


def vma_verdicts(lib):
    """Whether shard_map (check_vma=True) accepts each out_specs, on an Auto mesh."""
    lax, jnp, P = lib.lax, lib.numpy, lib.P
    mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
    ring = [(i, (i + 1) % 4) for i in range(4)]
    cases = [(lambda a: a, P("x"), P()), (lambda a: lax.psum(a, "x"), P("x"), P()),
             (lambda a: lax.psum(a, "x"), P("x", "y"), P()), (lambda a: lax.psum(a, ("x", "y")), P("x", "y"), P()),
             (lambda a: a * 0 + lax.axis_index("y"), P(), P()), (lambda a: lax.ppermute(a, "x", ring), P(), P()),
             (lambda a: lax.all_gather(a, "x", tiled=True), P("x"), P()),
             (lambda a: lib.jit(lambda b: lax.pmax(b * 2, "x"))(a), P("x"), P()),
             (lambda a: lib.jit(lambda b: b * 2)(a), P("x"), P()), (lambda a: jnp.sin(a), P(), P()),
             (lambda a: lax.psum(a, "x"), P("x", "y"), P(None, "y")),
             (lambda a: (lax.pmin(a, "x"), a), P("x"), (P(), P("x"))), (lambda a: (lax.pmin(a, "x"), a), P("x"), P()),
             (lambda a: lax.fori_loop(0, 3, lambda i, c: c + a, jnp.zeros_like(a)), P("x"), P()),
             (lambda a: lax.fori_loop(0, 3, lambda i, c: c * 2, a), P(), P()),
             (lambda a: lax.cond(True, lambda v: v, lambda v: lax.psum(v, "x"), a), P("x"), P()),
             (lambda a: lax.cond(True, lambda v: lax.pmax(v, "x"), lambda v: lax.psum(v, "x"), a), P("x"), P())]
    out = []
    for f, i, o in cases:
        try:
            lib.make_jaxpr(lib.shard_map(f, mesh=mesh, in_specs=i, out_specs=o))(np.ones((8, 4), np.float32))
            out.append(True)
        except ValueError as e:
            assert "out_specs" in str(e), e
            out.append(False)
        except TypeError as e:       # jax: branch or carry types that differ in their varying axes
            assert lib is jax and "vma" in str(e).lower() or "varying" in str(e), e
            out.append(False)
    return out


def main():
    assert jax.device_count() == jx.device_count() == 8
    for name in cases(jax):
        same(cases(jax)[name](), cases(jx)[name](), name, rtol=2e-5)
    same(partial_manual(jax), partial_manual(jx), "partially manual shard_map", rtol=2e-5)
    assert result_specs(jax) == result_specs(jx), (result_specs(jax), result_specs(jx))
    assert vma_verdicts(jax) == vma_verdicts(jx), (vma_verdicts(jax), vma_verdicts(jx))
    same(pcast_case(jax), pcast_case(jx), "lax.pcast(to='varying')")
    for a, b in zip(reshard_case(jax), reshard_case(jx)):
        same(a, b, "reshard")
        assert tuple(a.sharding.spec) == tuple(b.sharding.spec), (a.sharding, b.sharding)
    for name, body in (("pmap", MNIST_PMAP), ("NamedSharding", MNIST_SHARDED)):
        (ja, jp), (xa, xp) = run_mnist("jax", body), run_mnist("jaxprc", body)
        for (jt, js), (xt, xs) in zip(ja, xa):
            assert abs(float(jt) - float(xt)) < 1e-6 and abs(float(js) - float(xs)) < 1e-6, (name, ja, xa)
        same(jp, xp, f"MNIST {name}: trained parameters", rtol=1e-4)
        print(name, "accuracies", [(float(a), float(b)) for a, b in xa])
    print("ok")


if __name__ == "__main__":
    main()
    sys.exit(0)
