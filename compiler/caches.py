"""The caches the engine keeps between calls: bounded and safe to share between threads.

``BoundedCache`` keeps the most recently used entries (least recently used out
first) under a lock; ``make`` runs outside the lock, since making an entry may
trace and compile (and so use other caches, or this one). Two threads missing
the same key at once both make it; the first stored wins, as with JAX's caches.
``ByIdentity`` keys on an object's identity and drops the entry when it dies.
"""
from __future__ import annotations

import collections
import threading
import weakref

__all__ = ["BoundedCache", "ByIdentity"]


class BoundedCache:
    def __init__(self, maxsize: int = 256):
        self.maxsize = maxsize
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, make):
        """The entry of ``key``, made with ``make()`` on a miss."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = make()
        with self._lock:
            value = self._entries.setdefault(key, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value

    def __len__(self):
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class ByIdentity:
    """Cache keyed on an object's identity, dropped when the object dies."""

    def __init__(self):
        self._entries: dict[int, tuple] = {}
        self._lock = threading.Lock()

    def get(self, obj, make):
        hit = self._entries.get(id(obj))
        if hit is not None and hit[0]() is obj:
            return hit[1]
        value = make()
        with self._lock:
            hit = self._entries.get(id(obj))
            if hit is not None and hit[0]() is obj:
                return hit[1]
            self._entries[id(obj)] = (weakref.ref(obj, lambda _, k=id(obj): self._entries.pop(k, None)), value)
        return value
