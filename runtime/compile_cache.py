"""The persistent compilation cache: compiled executables kept in a directory.

A process that compiles a program XLA has already compiled, in this or an
earlier process with the same directory, loads the executable from disk instead
of running XLA (``jaxprc_compilation_cache_dir`` / ``JAXPRC_COMPILATION_CACHE_DIR``;
off by default). Everything except programs that call back into Python is
cached, however small or quick to compile: jaxprc has no minimum compile time
or entry size (JAX's ``jax_persistent_cache_min_*`` thresholds), and no size
limit or eviction (delete the directory to empty it).

An entry is one file named by the key (``key``): a header carrying the format,
the jaxlib version, the payload's length and SHA-256, then the payload, the
executable as jaxlib serialises it. jaxlib's deserialiser is not meant for
damaged bytes, so an entry is handed to it only after its header and checksum
are verified; a corrupt, truncated or stale entry is ignored with a warning and
the program compiled (and the entry rewritten). Entries are written to a
temporary file then renamed over the key, so concurrent writers and readers
never see a partial file. A directory that cannot be written costs a warning,
never the computation.
"""
from __future__ import annotations

import collections
import functools
import hashlib
import io
import json
import os
import secrets
import threading
import warnings

import jaxlib
from jaxlib import _jax, xla_client as xc
from jaxlib.mlir.passmanager import PassManager

from . import monitoring

_MAGIC = b"jaxprc-executable\n"
_FORMAT = 1

# What happened, for tests and tools: "compiles" (XLA ran), "hits", "writes", "rejected".
stats: collections.Counter = collections.Counter()

_warned_unwritable: set[str] = set()
_checked = False      # whether this process has reported if it uses the cache (once, as JAX)


def reset() -> None:
    """Back to the state of a fresh process: no statistics, an unwritable directory warns again,
    and the next compile reports again whether the cache is used. Entries on disk stay (delete
    the directory to empty it)."""
    global _checked
    stats.clear()
    _warned_unwritable.clear()
    _checked = False


def report_use_once(cache_dir) -> None:
    """JAX's once-per-process event: whether this process compiles with the cache."""
    global _checked
    if not _checked:
        _checked = True
        monitoring.record_event(monitoring.CACHE_USED_EVENT if cache_dir else monitoring.CACHE_DISABLED_EVENT)


def directory(value) -> str:
    """The cache directory a config value names (a path, ``~`` expanded)."""
    try:
        return os.path.expanduser(os.fspath(value))
    except TypeError:
        raise TypeError(f"jaxprc_compilation_cache_dir must be a directory path (str or os.PathLike) "
                        f"or None, got {value!r}") from None


def module_bytes(module) -> bytes:
    """The bytes of a program as given to ``compile``: text, bytecode, or an ``ir.Module``'s bytecode
    without its locations (as JAX's key: a program moved in its file still hits; the executable keeps
    the locations of the process that compiled it, in its metadata)."""
    if isinstance(module, bytes):
        return module
    if isinstance(module, str):
        return module.encode()
    with module.context:
        stripped = module.operation.clone()
        PassManager.parse("builtin.module(strip-debuginfo)").run(stripped)
    buf = io.BytesIO()
    stripped.write_bytecode(buf)
    return buf.getvalue()


@functools.lru_cache(maxsize=None)
def _environment(backend) -> tuple[bytes, ...]:
    """What, besides the program and options, changes the executable in this process: jaxlib, the
    platform, the devices (their topology where the backend describes it) and XLA_FLAGS."""
    devices = list(backend.device_list)
    try:
        topology = str(xc.get_topology_for_devices(devices).fingerprint())
    except _jax.JaxRuntimeError:      # a backend without topologies: the device kinds say enough
        topology = ""
    return (b"jaxprc-cache", str(_FORMAT).encode(), jaxlib.__version__.encode(), backend.platform.encode(),
            backend.client.platform_version.encode(), str(len(devices)).encode(),
            *[d.device_kind.encode() for d in devices], topology.encode(),
            os.environ.get("XLA_FLAGS", "").encode())


def key(program: bytes, options: bytes, backend) -> str:
    """The entry name for ``program`` compiled with serialised ``options`` on ``backend``."""
    h = hashlib.sha256()
    for p in (*_environment(backend), options, program):   # length-prefixed: no two part lists hash alike
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def load(cache_dir: str, name: str, entry_key: str, backend, options):
    """The loaded executable stored under ``entry_key``, or None (absent, or rejected with a warning)."""
    path = os.path.join(cache_dir, entry_key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):     # no entry (or no directory) yet
        return None
    except OSError as e:
        _warn(f"could not read the compilation cache entry {path} for '{name}' ({e}); compiling instead")
        return None
    payload = _verified_payload(data, path, name)
    if payload is None:
        stats["rejected"] += 1
        return None
    try:
        loaded = backend.client.deserialize_executable(payload, backend.device_list, options)
    except _jax.JaxRuntimeError as e:
        stats["rejected"] += 1
        _warn(f"jaxlib could not load the compilation cache entry {path} for '{name}' ({e}); compiling instead")
        return None
    stats["hits"] += 1
    return loaded


def _verified_payload(data: bytes, path: str, name: str) -> bytes | None:
    """The payload of an entry whose header and checksum hold; None, with a warning, otherwise."""
    def reject(why):
        _warn(f"ignoring the compilation cache entry {path} for '{name}': {why}; compiling instead")

    if not data.startswith(_MAGIC):
        return reject("not a jaxprc cache entry (corrupt)")
    end = data.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(data[len(_MAGIC):end]) if end >= 0 else None
        fmt, version, size, digest = header["format"], header["jaxlib"], header["size"], header["sha256"]
    except (ValueError, TypeError, KeyError):
        return reject("its header is unreadable (corrupt or truncated)")
    if fmt != _FORMAT or version != jaxlib.__version__:
        return reject(f"written by another version (format {fmt}, jaxlib {version}; this is format "
                      f"{_FORMAT}, jaxlib {jaxlib.__version__})")
    payload = data[end + 1:]
    if len(payload) != size:
        return reject(f"{len(payload)} bytes of payload where its header says {size} (truncated)")
    if hashlib.sha256(payload).hexdigest() != digest:
        return reject("its checksum does not match (corrupt)")
    return payload


def store(cache_dir: str, name: str, entry_key: str, backend, loaded) -> None:
    """Write ``loaded`` under ``entry_key``, atomically; a failure is a warning."""
    try:
        payload = backend.client.serialize_executable(loaded)
    except _jax.JaxRuntimeError as e:     # a backend that cannot serialise: nothing to keep
        _warn(f"could not serialise the executable of '{name}' for the compilation cache ({e})")
        return
    header = json.dumps({"format": _FORMAT, "jaxlib": jaxlib.__version__, "size": len(payload),
                         "sha256": hashlib.sha256(payload).hexdigest()}).encode()
    tmp = None
    try:
        os.makedirs(cache_dir, exist_ok=True)
        # A name no other writer uses; mode 0o666 less the umask, as for any file (mkstemp's 0o600
        # would hide entries from the other users of a shared directory).
        tmp = os.path.join(cache_dir, f".{entry_key[:16]}-{os.getpid()}-{threading.get_ident()}-"
                                      f"{secrets.token_hex(4)}.tmp")
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            f.write(_MAGIC + header + b"\n" + payload)
        os.replace(tmp, os.path.join(cache_dir, entry_key))   # atomic: readers see all or nothing
        tmp = None
        stats["writes"] += 1
    except OSError as e:
        if cache_dir not in _warned_unwritable:     # once per directory, not once per program
            _warned_unwritable.add(cache_dir)
            _warn(f"could not write to the compilation cache directory {cache_dir} ({e}); "
                  "programs are compiled but not cached")
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _warn(msg: str) -> None:
    warnings.warn(f"jaxprc compilation cache: {msg}", RuntimeWarning, stacklevel=4)
