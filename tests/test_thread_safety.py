"""The engine's caches between calls are bounded and safe to share between threads."""
import threading

import numpy as np

import jaxprc
from jaxprc import sharding, spmd
from jaxprc.caches import BoundedCache
from jaxprc.lax import parallel


def test_bounded_cache_keeps_the_most_recently_used():
    cache = BoundedCache(maxsize=3)
    made = []
    for key in [1, 2, 3, 1, 4, 2]:       # 1 is used again before 4 comes: 2 goes first, then 3
        cache.get(key, lambda k=key: made.append(k) or k * 10)
    assert made == [1, 2, 3, 4, 2] and len(cache) == 3
    assert cache.get(1, lambda: "missed") == 10


def test_bounded_cache_from_many_threads_makes_one_value_per_key():
    cache, results = BoundedCache(maxsize=8), {}
    barrier = threading.Barrier(8)

    def worker(i):
        barrier.wait()
        results[i] = [cache.get(k % 4, lambda: object()) for k in range(i, i + 50)]
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = {k: cache.get(k, lambda: None) for k in range(4)}
    assert all(v is first[k % 4] for i, row in results.items() for k, v in zip(range(i, i + 50), row))


def test_engine_caches_are_bounded():
    for cache in (sharding._RESHARD, spmd._EAGER_ON_DEVICES, parallel._EAGER):
        assert isinstance(cache, BoundedCache) and cache.maxsize > 0
    x = jaxprc.device_put(np.arange(4.0), sharding.SingleDeviceSharding(jaxprc.devices()[0]))
    assert np.array_equal(np.asarray(x), np.arange(4.0))


def test_without_jax_import_blocks_jax_in_its_own_thread_only():
    from jaxprc.runtime.array import without_jax_import
    inside, leave, seen = threading.Event(), threading.Event(), {}

    def call():
        try:
            import jax  # noqa: F401
            seen["import in the call"] = "imported"
        except ImportError:
            seen["import in the call"] = "refused"
        inside.set()
        leave.wait(30)

    t = threading.Thread(target=without_jax_import, args=(call,))
    t.start()
    inside.wait(30)
    # another thread meanwhile sees sys.modules as it was (once jax=None there: its imports failed)
    import sys
    seen["jax in sys.modules elsewhere"] = "jax" in sys.modules
    leave.set()
    t.join()
    assert seen == {"import in the call": "refused", "jax in sys.modules elsewhere": False}
