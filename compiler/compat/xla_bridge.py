"""What JAX's ``jax._src.xla_bridge._backends`` says, for jaxprc's backend: the platforms whose
client has been made (none until the first computation), read by chex's ``set_n_cpu_devices``
to refuse a device count that comes too late to take effect."""
from collections.abc import Mapping

from jaxprc.runtime import client as _client


class StartedBackends(Mapping):
    """platform -> client, for the clients that exist now (read when asked, never cached)."""

    def _current(self) -> dict:
        if not _client.backend_started():
            return {}
        backend = _client.backend()
        return {backend.platform: backend.client}

    def __getitem__(self, platform):
        return self._current()[platform]

    def __iter__(self):
        return iter(self._current())

    def __len__(self):
        return len(self._current())


started_backends = StartedBackends()
