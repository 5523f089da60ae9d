"""Keys and the basic draws of jaxprc.random: JAX's counter-based PRNGs, bit for bit.

Implementations (JAX's ``PRNGImpl``: a key's uint32 data shape, and seed /
split / fold_in / random_bits on one key's data), selectable per key
(``key(seed, impl=...)``), by key dtype, or by default
(``jax_default_prng_impl``); ``define_prng_impl`` makes new ones:

- ``threefry2x32`` (the default; ``key<fry>``, ``uint32[2]``): the threefry2x32
  hash with ``jax_threefry_partitionable=True`` (JAX 0.10's default), so a
  key's bits of shape ``s`` hash the 64-bit counters ``0 .. prod(s)-1`` (split
  into high and low uint32 halves) and xor the two output words. Threefry is
  written with ``jaxprc.lax`` (uint32 add, xor, shifts, or), so it runs
  eagerly, under ``jit``, ``vmap`` and ``grad`` like any other program.
- ``rbg`` (``key<rbg>``, ``uint32[4]``): bits from XLA's RngBitGenerator,
  split and fold_in by threefry on each half of the key.
- ``unsafe_rbg`` (``key<urbg>``, ``uint32[4]``): RngBitGenerator for bits and
  for split and fold_in too.

Each sampler's body is a ``jit`` with its shape and dtype static, as in JAX:
eagerly it compiles once per signature; inside a trace it is a nested call.

Keys. ``PRNGKey(seed)`` gives raw key data. ``key(seed)`` gives a typed key:
a ``PRNGKeyArray`` wrapping ``uint32[..., *key_shape]`` key data, registered
as a pytree with that data as its one leaf and the implementation as its
static part. Its ``shape`` is the data's shape without the key words, so
``jit`` passes it through, ``vmap`` over axis ``k >= 0`` of a key array maps
axis ``k`` of its data, and split / index / iterate work on the leading axes.
(A negative ``in_axes`` counts from the end of the data, key words included:
use non-negative axes.) Every function takes either kind, raw data being keys
of the default implementation; ``split`` and ``fold_in`` return the kind
they were given.

The distributions built on these draws (gamma, beta, poisson, binomial, ...)
are in ``distributions``; the package (``jaxprc.random``) exports both, as ``jax.random``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import pickle
import warnings
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..api import jit
from ..dtypes import ExtendedDType, prng_key
from ..ir import dtypes as dt
from ..ir.config import OPTIONS, config
from ..ir.tracing import get_aval
from ..ir.tree_util import register_pytree_node
from ..numpy.creation import _shape_tuple

__all__ = ["threefry2x32", "PRNGKey", "PRNGKeyArray", "key", "key_data", "key_dtype", "key_impl", "wrap_key_data",
           "split", "fold_in", "clone",
           "bits", "uniform", "normal", "bernoulli", "randint", "categorical", "permutation", "choice",
           "truncated_normal", "gumbel"]

_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
_u32 = np.uint32


def _static(*names):
    """``jit`` with the named arguments static (shapes, dtypes, modes)."""
    return functools.partial(jit, static_argnames=names)


# ------------------------------------------------------------- threefry2x32

_ROTATIONS = (np.array([13, 15, 26, 6], np.uint32), np.array([17, 29, 16, 24], np.uint32))


def _rotate_left(x, d):
    return lax.bitwise_or(lax.shift_left(x, d), lax.shift_right_logical(x, lax.sub(_u32(32), d)))


def _threefry_rounds(i, state):
    """Four rounds and a key injection; the key schedule and the rotations rotate by one each time."""
    x, ks, rotations = state
    for j in range(4):
        x0 = lax.add(x[0], x[1])
        x = [x0, lax.bitwise_xor(x0, _rotate_left(x[1], lax.index_in_dim(rotations[0], j, keepdims=False)))]
    x = [lax.add(x[0], ks[0]), lax.add(lax.add(x[1], ks[1]), lax.convert_element_type(lax.add(i, 1), np.uint32))]
    return x, [*ks[1:], ks[0]], [*rotations[1:], rotations[0]]


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 block cipher (20 rounds) of counters ``(x1, x2)`` under key ``(k1, k2)``.

    uint32 arrays of one shape, or scalar keys. The rounds are a 5-step loop, as JAX emits them on
    CPU: XLA then fuses the float code that consumes the bits as it does JAX's, rounding alike.
    """
    ks = [k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), _u32(0x1BD11BDA))]
    x = [lax.add(x1, ks[0]), lax.add(x2, ks[1])]
    x, _, _ = lax.fori_loop(0, 5, _threefry_rounds, (x, [*ks[1:], ks[0]], list(_ROTATIONS)))
    return x[0], x[1]


def _unstack2(x):
    """The two entries of ``x``'s leading axis (of size 2): key words, key pairs, paired draws."""
    if isinstance(x, PRNGKeyArray):
        return x[0], x[1]
    return lax.index_in_dim(x, 0, keepdims=False), lax.index_in_dim(x, 1, keepdims=False)


def _counters(shape):
    """The 64-bit counters 0 .. prod(shape)-1 laid out in ``shape``, as (high, low) uint32 halves."""
    size = math.prod(shape)
    if type(size) is int and size >= 2 ** 32:       # (a symbolic size is checked by nothing, as in JAX)
        raise NotImplementedError(f"random bits of shape {shape}: more than 2**32 values")
    low = lax.reshape(lax.iota(np.uint32, size), shape)
    return lax.full(shape, _u32(0)), low


def _hash_counters(key, shape):
    """Threefry of the counters 0 .. prod(shape)-1 laid out in ``shape`` under one key (``uint32[2]``)."""
    k1, k2 = (lax.broadcast(w, shape) for w in _unstack2(key))
    return threefry2x32(k1, k2, *_counters(shape))


def _hash_counter_range(key, n: int):
    """``jax_threefry_partitionable=False``: threefry of the counters 0 .. n-1 (an odd count padded
    with a 0), hashing the first half against the second; the two output halves joined, the first
    n kept."""
    count = lax.iota(np.uint32, n)
    if n % 2:
        count = lax.concatenate([count, lax.full((1,), _u32(0))], 0)
    half = (n + n % 2) // 2
    k1, k2 = (lax.broadcast(w, (half,)) for w in _unstack2(key))
    y1, y2 = threefry2x32(k1, k2, lax.slice(count, (0,), (half,)), lax.slice(count, (half,), (2 * half,)))
    return lax.slice(lax.concatenate([y1, y2], 0), (0,), (n,))


def _threefry_random_bits_original(key, bit_width: int, shape):
    """The original threefry bits: ``ceil(bit_width * size / 32)`` hashed words, viewed as
    ``bit_width``-bit ints (little-endian; 64 bits: the first half high, the second low)."""
    size = math.prod(shape)
    words = -(-bit_width * size // 32)
    bits = _hash_counter_range(key, words)
    dtype = _UINT[bit_width]
    if bit_width == 64:
        hi, lo = (lax.convert_element_type(lax.slice(bits, (s,), (s + size,)), dtype) for s in (0, size))
        bits = lax.bitwise_or(lax.shift_left(hi, np.uint64(32)), lo)
    elif bit_width < 32:
        per_word = 32 // bit_width
        shifts = lax.mul(_u32(bit_width), lax.broadcasted_iota(np.uint32, (words, per_word), 1))
        parts = lax.shift_right_logical(lax.broadcast_in_dim(bits, (words, per_word), (0,)), shifts)
        bits = lax.convert_element_type(lax.reshape(parts, (words * per_word,)), dtype)
        bits = lax.slice(bits, (0,), (size,))
    return lax.reshape(bits, shape)


def _threefry_random_bits(key, bit_width: int, shape):
    """Uniform unsigned ints of ``bit_width`` bits from a threefry key (partitionable: the xor of
    the two hash words; 64 bits: the two words side by side)."""
    if not config.jax_threefry_partitionable:
        return _threefry_random_bits_original(key, bit_width, shape)
    bits1, bits2 = _hash_counters(key, shape)
    dtype = _UINT[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(bits1, dtype)
        return lax.bitwise_or(lax.shift_left(hi, np.uint64(32)), lax.convert_element_type(bits2, dtype))
    bits = lax.bitwise_xor(bits1, bits2)
    return bits if bit_width == 32 else lax.convert_element_type(bits, dtype)


def _threefry_split(key, shape):
    if not config.jax_threefry_partitionable:
        return lax.reshape(_hash_counter_range(key, 2 * math.prod(shape)), (*shape, 2))
    return jnp.stack(_hash_counters(key, shape), axis=len(shape))


def _threefry_fold_in(key, data):
    return jnp.stack(threefry2x32(*_unstack2(key), _u32(0), data))


@jit
def _seed(seed):
    """A threefry key from an integer scalar: its high and low 32 bits."""
    dtype = get_aval(seed).dtype
    word = lambda x: lax.broadcast(lax.convert_element_type(x, np.uint32), (1,))
    hi = word(lax.shift_right_logical(seed, np.array(32, dtype))) if dtype.itemsize == 8 else \
        lax.full((1,), _u32(0))
    return lax.concatenate([hi, word(seed)], 0)


# ------------------------------------------------------------------ rbg

# XLA's RngBitGenerator makes the bits from a uint32[4] key. rbg derives keys with threefry
# applied to each half of the key; unsafe_rbg derives them from RngBitGenerator's own output.

def _rbg_seed(seed):
    half = _seed(seed)
    return lax.concatenate([half, half], 0)


def _rbg_halves(key):
    return _unstack2(lax.reshape(key, (2, 2)))


def _rbg_split(key, shape):
    return jnp.concatenate([_threefry_split(half, shape) for half in _rbg_halves(key)], axis=len(shape))


def _rbg_fold_in(key, data):
    return lax.concatenate([_threefry_fold_in(half, data) for half in _rbg_halves(key)], 0)


def _rbg_random_bits(key, bit_width: int, shape):
    return lax.rng_bit_generator(key, shape, dtype=_UINT[bit_width])[1]


def _unsafe_rbg_split(key, shape):
    # Every tenth of 10 * n generated words-of-four: XLA's generator used as a hash.
    n = math.prod(shape)
    _, words = lax.rng_bit_generator(key, (10 * n, 4), dtype=np.uint32)
    return lax.reshape(lax.slice(words, (0, 0), (10 * n, 4), (10, 1)), (*shape, 4))


def _unsafe_rbg_fold_in(key, data):
    _, words = lax.rng_bit_generator(_rbg_seed(data), (10, 4), dtype=np.uint32)
    return lax.bitwise_xor(key, lax.index_in_dim(words, 9, keepdims=False))


# ------------------------------------------------------ implementations

class PRNGImpl(NamedTuple):
    """A PRNG implementation (JAX's ``PRNGImpl``): the shape of one key's uint32 data and its
    functions on the data of one key: ``seed(int scalar)``, ``split(key, shape)``,
    ``random_bits(key, bit_width, shape)``, ``fold_in(key, uint32 scalar)``."""
    key_shape: tuple
    seed: Callable
    split: Callable
    random_bits: Callable
    fold_in: Callable
    name: str = "<unnamed>"
    tag: str = "?"

    def __str__(self):
        return self.tag

    def __repr__(self):
        return f"PRNGImpl({self.name})"

    def __reduce__(self):
        # pickled by name (its functions are jit objects, not importable by reference): keys and key
        # dtypes of registered implementations pickle, as JAX's
        if prngs.get(self.name) is not self:
            raise pickle.PicklingError(f"cannot pickle the unregistered PRNG implementation {self.name}")
        return _registered_impl, (self.name,)


prngs: dict[str, PRNGImpl] = {}


def _registered_impl(name: str) -> PRNGImpl:
    return prngs[name]


def register_prng(impl: PRNGImpl) -> PRNGImpl:
    """Makes ``impl`` selectable by its name (``key(seed, impl=name)``, ``jax_default_prng_impl``)."""
    if impl.name in prngs:
        raise ValueError(f"PRNG implementation with name {impl.name} already registered: {prngs[impl.name]}")
    prngs[impl.name] = impl
    return impl


def define_prng_impl(*, key_shape, seed, split, random_bits, fold_in, name="<unnamed>", tag="?") -> PRNGImpl:
    """A user-defined PRNG implementation, usable as ``impl=`` (``jax.extend.random.define_prng_impl``)."""
    return PRNGImpl(tuple(key_shape), seed, split, random_bits, fold_in, name=name, tag=tag)


threefry_prng_impl = register_prng(PRNGImpl((2,), _seed, _threefry_split, _threefry_random_bits,
                                            _threefry_fold_in, name="threefry2x32", tag="fry"))
rbg_prng_impl = register_prng(PRNGImpl((4,), _rbg_seed, _rbg_split, _rbg_random_bits, _rbg_fold_in,
                                       name="rbg", tag="rbg"))
unsafe_rbg_prng_impl = register_prng(PRNGImpl((4,), _rbg_seed, _unsafe_rbg_split, _rbg_random_bits,
                                              _unsafe_rbg_fold_in, name="unsafe_rbg", tag="urbg"))


def _check_impl_name(name):
    if name not in prngs:
        raise ValueError(f"jax_default_prng_impl: unrecognized PRNG implementation {name!r}; "
                         f"registered: {sorted(prngs)}")
    return name


_check_impl_name(config.jax_default_prng_impl)
OPTIONS["jax_default_prng_impl"] = dataclasses.replace(OPTIONS["jax_default_prng_impl"], validator=_check_impl_name)


# --------------------------------------------------------------------- keys

class PRNGKeyDType(ExtendedDType):
    """The dtype of typed keys of one implementation, shown as ``key<tag>`` (``key<fry>``)."""
    type = prng_key

    def __init__(self, impl: PRNGImpl):
        self._impl = impl

    name = property(lambda self: f"key<{self._impl.tag}>")
    itemsize = property(lambda self: 4 * math.prod(self._impl.key_shape))

    def __eq__(self, other):
        return isinstance(other, PRNGKeyDType) and other._impl == self._impl

    def __hash__(self):
        return hash(self._impl)

    def __repr__(self):
        return self.name

    __str__ = __repr__


KEY_DTYPE = PRNGKeyDType(threefry_prng_impl)


class KeyArrayType:
    """The type ``jaxprc.typeof`` gives a typed key array: its shape and key dtype. (Inside the IR
    a key array is its uint32 key data; this type is only for inspection.)"""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: PRNGKeyDType):
        self.shape, self.dtype = shape, dtype

    ndim = property(lambda self: len(self.shape))
    weak_type = False

    def __eq__(self, other):
        return isinstance(other, KeyArrayType) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def str_short(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"


def _moving_method(name: str):
    """The array method ``name`` of key arrays: jnp's key-moving function (``key_moves``)."""
    def method(self, *args, **kwargs):
        return getattr(jnp, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


class PRNGKeyArray:
    """An array of typed keys over ``uint32[*shape, *impl.key_shape]`` key data: a pytree whose one
    leaf is that data, the implementation its static part (so ``jit`` caches per implementation)."""
    __slots__ = ("_base", "_impl")

    def __init__(self, base, impl: PRNGImpl = threefry_prng_impl):
        self._base = base          # no checks: pytree machinery rebuilds it around any leaf
        self._impl = impl

    shape = property(lambda self: tuple(get_aval(self._base).shape[:-len(self._impl.key_shape)]))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: PRNGKeyDType(self._impl))
    aval = property(lambda self: KeyArrayType(self.shape, self.dtype))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __array__(self, dtype=None, copy=None):
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. Use "
                        "jaxprc.random.key_data(arr) if you wish to extract the underlying integer array.")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of an unsized key array (shape ())")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def _key_words(self):
        return (slice(None),) * len(self._impl.key_shape)

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        return PRNGKeyArray(self._base[(*idx, *self._key_words())], self._impl)

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if -1 in shape:         # resolved here: the key words must not take part
            known = math.prod(d for d in shape if d != -1)
            shape = tuple(self.size // known if d == -1 else d for d in shape)
        return PRNGKeyArray(jnp.reshape(self._base, (*shape, *self._impl.key_shape)), self._impl)

    def transpose(self, *axes):
        """The keys' axes permuted (the key words stay last), as an array's ``transpose``."""
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        axes = tuple(reversed(range(self.ndim))) if not axes else tuple(a % self.ndim for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise TypeError(f"transpose: axes {axes} are not a permutation of the key array's {self.ndim} axes")
        words = tuple(range(self.ndim, self.ndim + len(self._impl.key_shape)))
        return PRNGKeyArray(jnp.transpose(self._base, (*axes, *words)), self._impl)

    T = property(lambda self: self.transpose())
    copy, squeeze, swapaxes, take = map(_moving_method, ("copy", "squeeze", "swapaxes", "take"))

    def block_until_ready(self):
        self._base.block_until_ready()
        return self

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    @property
    def at(self):
        """``keys.at[idx].get()`` / ``.set(other_keys)``: the keys' index updates (on their data)."""
        return _KeyIndexUpdateHelper(self)

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        if other._impl != self._impl:
            raise TypeError(f"cannot compare keys of types {self.dtype} and {other.dtype}")
        words = tuple(range(-len(self._impl.key_shape), 0))
        return jnp.all(jnp.equal(self._base, other._base), axis=words)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else jnp.logical_not(eq)

    __hash__ = None

    def __repr__(self):
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(self._base)}"


register_pytree_node(PRNGKeyArray, lambda k: ((k._base,), k._impl), lambda impl, kids: PRNGKeyArray(kids[0], impl))


class _KeyIndexUpdateHelper:
    __slots__ = ("keys",)

    def __init__(self, keys):
        self.keys = keys

    def __getitem__(self, idx):
        return _KeyIndexUpdateRef(self.keys, idx if isinstance(idx, tuple) else (idx,))


class _KeyIndexUpdateRef:
    __slots__ = ("keys", "idx")

    def __init__(self, keys, idx):
        self.keys, self.idx = keys, idx

    def get(self, **kwargs):
        keys = self.keys
        return PRNGKeyArray(keys._base.at[(*self.idx, *keys._key_words())].get(**kwargs), keys._impl)

    def set(self, values, **kwargs):
        keys = self.keys
        if not isinstance(values, PRNGKeyArray) or values._impl != keys._impl:
            raise TypeError(f"key array .at[].set: the values must be keys of type {keys.dtype}, "
                            f"got {getattr(values, 'dtype', type(values).__name__)}")
        return PRNGKeyArray(keys._base.at[(*self.idx, *keys._key_words())].set(values._base, **kwargs), keys._impl)


def _default_impl() -> PRNGImpl:
    return prngs[config.jax_default_prng_impl]


def _legacy_key_used():
    message = ("Legacy uint32 key array passed as key to jax.random function. Please create keys using "
               "jax.random.key(). If use of a raw key array was intended, set jax_legacy_prng_key=\"allow\".")
    if config.jax_legacy_prng_key == "error":
        raise ValueError(message)
    warnings.warn(message, stacklevel=4)


def _check_key(name: str, key, allow_batched: bool = False):
    """(typed keys, whether the key was typed): raw key data is read as keys of the default
    implementation (``jax_default_prng_impl``). One key unless ``allow_batched``."""
    typed = isinstance(key, PRNGKeyArray)
    if not typed and config.jax_legacy_prng_key != "allow":
        _legacy_key_used()
    impl = key._impl if typed else _default_impl()
    base = key._base if typed else key
    if isinstance(base, (list, tuple)):
        base = np.asarray(base)
    try:
        aval = get_aval(base)
    except TypeError:
        raise TypeError(f"{name}: expected a PRNG key (from jaxprc.random.key or PRNGKey), got "
                        f"{type(key).__name__}") from None
    nwords = len(impl.key_shape)
    if aval.dtype != np.uint32 or aval.shape[aval.ndim - nwords:] != impl.key_shape:
        raise TypeError(f"{name}: expected a PRNG key: a typed key, or raw {impl.name} key data of type "
                        f"uint32{list(impl.key_shape)}; got {aval.str_short()}")
    if not allow_batched and aval.ndim != nwords:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{aval.shape[:-nwords]} != (). Use jaxprc.vmap for batching.")
    return PRNGKeyArray(base, impl), typed


def _seed_value(name: str, seed):
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, int) and not isinstance(seed, bool):
        # Like JAX: a Python int is an int64, narrowed (wrapping) to int32 without x64.
        return np.asarray(np.int64(seed)).astype(dt.default_int_dtype())
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape {aval.shape} "
                        f"!= (). Use jaxprc.vmap for batching")
    if not dt.is_int(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {aval.str_short()}")
    return seed


def _resolve_impl(impl=None, dtype=None) -> PRNGImpl:
    """The implementation named by ``impl`` (a name, a ``PRNGImpl``) or by a key ``dtype``; the
    default (``jax_default_prng_impl``) when neither is given."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments")
    spec = impl if dtype is None else dtype
    if spec is None:
        return _default_impl()
    if isinstance(spec, PRNGKeyDType):
        return spec._impl
    if isinstance(spec, PRNGImpl):
        return spec
    if isinstance(spec, str):
        if spec not in prngs:
            raise ValueError(f"unrecognized PRNG implementation {spec!r}; registered: {sorted(prngs)}")
        return prngs[spec]
    raise TypeError(f"unrecognized type {type(spec)} for specifying PRNG implementation: expected a "
                    "registered name, a PRNGImpl or a key dtype")


def key_dtype(impl=None) -> PRNGKeyDType:
    """The dtype of typed keys of a PRNG implementation (``key<fry>``)."""
    return PRNGKeyDType(_resolve_impl(impl))


def key_impl(keys):
    """The PRNG implementation of (typed or raw) keys: its name if it is registered."""
    typed_keys, _ = _check_key("key_impl", keys, allow_batched=True)
    impl = typed_keys._impl
    return impl.name if prngs.get(impl.name) == impl else impl


def PRNGKey(seed, *, impl=None) -> "jnp.ndarray":
    """Raw key data (``uint32[2]`` for threefry2x32, ``uint32[4]`` for rbg) from an integer seed."""
    return _resolve_impl(impl).seed(_seed_value("PRNGKey", seed))


def key(seed, *, impl=None, dtype=None) -> PRNGKeyArray:
    """A typed key (shape ``()``) from an integer seed."""
    impl = _resolve_impl(impl, dtype)
    return PRNGKeyArray(impl.seed(_seed_value("key", seed)), impl)


def key_data(keys):
    """The ``uint32[..., *key_shape]`` data of typed (or raw) keys."""
    typed_keys, _ = _check_key("key_data", keys, allow_batched=True)
    return typed_keys._base


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys of an implementation over its ``uint32[..., *key_shape]`` key data."""
    impl = _resolve_impl(impl, dtype)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("wrap_key_data expects uint32 key data, got typed keys")
    base, _ = _check_key("wrap_key_data", PRNGKeyArray(key_bits_array, impl), allow_batched=True)
    return base


def _rewrap(typed: bool, keys: PRNGKeyArray):
    return keys if typed else keys._base


def _random_bits(key: PRNGKeyArray, bit_width: int, shape):
    """Uniform unsigned ints of ``bit_width`` bits from one key."""
    return key._impl.random_bits(key._base, bit_width, shape)


@_static("shape")
def _split(key: PRNGKeyArray, shape):
    return PRNGKeyArray(key._impl.split(key._base, shape), key._impl)


@jit
def _fold_in(key: PRNGKeyArray, data):
    return PRNGKeyArray(key._impl.fold_in(key._base, data), key._impl)


def split(key, num: int | tuple[int, ...] = 2):
    """``num`` (or ``shape``) new keys along new leading axes."""
    keys, typed = _check_key("split", key)
    return _rewrap(typed, _split(keys, shape=_shape(num)))


def fold_in(key, data):
    """A new key from ``key`` and a 32-bit integer ``data``."""
    keys, typed = _check_key("fold_in", key)
    if isinstance(data, int) and not isinstance(data, bool):
        data = _u32(data % 2 ** 32)
    if get_aval(data).shape:
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape {get_aval(data).shape} "
                        f"!= (). Use jaxprc.vmap for batching.")
    return _rewrap(typed, _fold_in(keys, lax.convert_element_type(data, np.uint32)))


def clone(key):
    """The same key (keys are immutable values here)."""
    return key


# ----------------------------------------------------------------- samplers

def _shape(shape) -> tuple[int, ...]:
    """A shape argument (an int or a sequence of ints, a numpy array too) as a tuple of ints."""
    return _shape_tuple(shape, "random")


def _check_shape(name: str, shape, *param_shapes):
    if param_shapes and jnp.broadcast_shapes(shape, *param_shapes) != shape:
        raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape argument, and "
                         f"the result of broadcasting the shapes must equal the shape argument, but got "
                         f"parameter shapes {list(param_shapes)} for shape argument {shape}.")


def _float_dtype(name: str, dtype, kinds=("float",)):
    dtype = dt.default_float_dtype() if dtype is None else dt.canonicalize_dtype(dtype)
    if not (dt.is_float(dtype) or ("complex" in kinds and dt.is_complex(dtype))):
        raise ValueError(f"dtype argument to `{name}` must be a {' or '.join(kinds)} dtype, got {dtype}")
    return dtype


@_static("bit_width", "shape")
def _bits(key, bit_width, shape):
    return _random_bits(key, bit_width, shape)


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned ints (default uint32; uint64 with x64)."""
    base, _ = _check_key("bits", key)
    dtype = dt.canonicalize_dtype(np.uint64) if dtype is None else dt.canonicalize_dtype(dtype)
    if not dt.is_unsigned(dtype):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return _bits(base, bit_width=dtype.itemsize * 8, shape=_shape(shape))


@_static("shape", "dtype")
def _uniform(key, minval, maxval, shape, dtype):
    minval = jnp.broadcast_to(lax.convert_element_type(minval, dtype), shape)
    maxval = jnp.broadcast_to(lax.convert_element_type(maxval, dtype), shape)
    finfo = dt.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    # Random mantissa bits under the exponent of 1.0 give a float in [1, 2); shift it to [0, 1).
    rng_bits = 8 if nmant < 8 else nbits
    uint = _UINT[nbits]
    raw = _random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        raw = lax.convert_element_type(raw, uint)
    float_bits = lax.bitwise_or(lax.shift_right_logical(raw, np.array(rng_bits - nmant, uint)),
                                np.array(1.0, dtype).view(uint))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), np.array(1.0, dtype))
    return lax.max(minval, lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval))


def uniform(key, shape=(), dtype=None, minval=0., maxval=1.):
    """Uniform floats in [minval, maxval)."""
    base, _ = _check_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    shape = _shape(shape)
    _check_shape("uniform", shape, get_aval(minval).shape, get_aval(maxval).shape)
    return _uniform(base, minval, maxval, shape=shape, dtype=dtype)


def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = _uniform(key, lo, np.array(1.0, dtype), shape=shape, dtype=dtype)
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


@_static("shape", "dtype")
def _normal(key, shape, dtype):
    if not dt.is_complex(dtype):
        return _normal_real(key, shape, dtype)
    real_dtype = np.finfo(dtype).dtype
    key_re, key_im = _unstack2(_split(key, shape=(2,)))
    re = lax.convert_element_type(_normal_real(key_re, shape, real_dtype), dtype)
    im = lax.convert_element_type(_normal_real(key_im, shape, real_dtype), dtype)
    return (re + 1j * im) / np.array(np.sqrt(2), dtype)


def normal(key, shape=(), dtype=None):
    """Standard normal samples: ``sqrt(2) * erf_inv(u)`` for ``u`` uniform in (-1, 1)."""
    base, _ = _check_key("normal", key)
    return _normal(base, shape=_shape(shape), dtype=_float_dtype("normal", dtype, ("float", "complex")))


@_static("shape", "dtype")
def _truncated_normal(key, lower, upper, shape, dtype):
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    out = lax.mul(sqrt2, lax.erf_inv(_uniform(key, a, b, shape=shape, dtype=dtype)))
    # Keep rounding (or u == a) from reaching the bounds: the support is the open interval.
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples restricted to the open interval (lower, upper)."""
    base, _ = _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    param_shapes = (get_aval(lower).shape, get_aval(upper).shape)
    if shape is None:
        shape = jnp.broadcast_shapes(*param_shapes)
    else:
        shape = _shape(shape)
        _check_shape("truncated_normal", shape, *param_shapes)
    return _truncated_normal(base, lower, upper, shape=shape, dtype=dtype)


@_static("shape", "mode")
def _bernoulli(key, p, shape, mode):
    dtype = get_aval(p).dtype
    if mode == "high":
        u1, u2 = _unstack2(_uniform(key, 0., 1., shape=(2, *shape), dtype=dtype))
        u2 = lax.mul(u2, np.array(2.0 ** -dt.finfo(dtype).nmant, dtype))   # u2's bits below u1's
        return lax.lt(u2, jnp.subtract(p, u1))
    return lax.lt(_uniform(key, 0., 1., shape=shape, dtype=dtype), jnp.broadcast_to(p, shape))


def bernoulli(key, p=0.5, shape=None, mode: str = "low"):
    """Booleans that are True with probability ``p``."""
    base, _ = _check_key("bernoulli", key)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    aval = get_aval(p)
    dtype = dt.canonicalize_dtype(aval.dtype)
    if not dt.is_float(dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = lax.convert_element_type(p, dtype)
    if shape is None:
        shape = aval.shape
    else:
        shape = _shape(shape)
        _check_shape("bernoulli", shape, aval.shape)
    return _bernoulli(base, p, shape=shape, mode=mode)


def _convert_and_clip_integer(val, dtype):
    """``val`` as ``dtype``, saturating at its bounds instead of wrapping."""
    src = get_aval(val).dtype
    lo = np.array(max(dt.iinfo(dtype).min, dt.iinfo(src).min), src)
    hi = np.array(min(dt.iinfo(dtype).max, dt.iinfo(src).max), src)
    return lax.convert_element_type(lax.clamp(lo, val, hi), dtype)


@_static("shape", "dtype")
def _randint(key, minval, maxval, shape, dtype):
    # Like JAX: 2 * nbits random bits per value reduced modulo the span (biased unless it is a power of 2).
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not dt.is_int(minval.dtype):
        minval = minval.astype(dt.default_int_dtype())
    if not dt.is_int(maxval.dtype):
        maxval = maxval.astype(dt.default_int_dtype())
    maxval_out_of_range = jnp.broadcast_to(lax.gt(maxval, _convert_and_clip_integer(
        np.array(dt.iinfo(dtype).max, dtype), maxval.dtype)), shape)
    minval = jnp.broadcast_to(_convert_and_clip_integer(minval, dtype), shape)
    maxval = jnp.broadcast_to(_convert_and_clip_integer(maxval, dtype), shape)
    nbits = dt.iinfo(dtype).bits
    higher_bits, lower_bits = (_random_bits(k, nbits, shape) for k in _unstack2(_split(key, shape=(2,))))

    unsigned = _UINT[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), unsigned)
    one = np.array(1, unsigned)
    span = lax.select(lax.le(maxval, minval), lax.full_like(span, one), span)   # maxval <= minval: minval
    # maxval past the dtype's range: the span is one larger (wrapping to 0 = the whole range).
    span = lax.select(lax.bitwise_and(maxval_out_of_range, lax.gt(maxval, minval)), lax.add(span, one), span)
    # (hi * 2**nbits + lo) % span, with 2**nbits % span computed without overflow.
    multiplier = lax.rem(lax.full_like(span, np.array(2 ** (nbits // 2), unsigned)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier), lax.rem(lower_bits, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


def randint(key, shape, minval, maxval, dtype=None):
    """Integers uniform in [minval, maxval) (modulo-biased as in JAX)."""
    base, _ = _check_key("randint", key)
    dtype = dt.default_int_dtype() if dtype is None else dt.canonicalize_dtype(dtype)
    if not dt.is_int(dtype) or dt.is_bool(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    shape = _shape(shape)
    _check_shape("randint", shape, get_aval(minval).shape, get_aval(maxval).shape)
    info = dt.iinfo(dtype)
    sampling_dtype = dtype
    if info.bits < 32:    # sample narrow ints in 32 bits, as JAX does, to reduce the bias
        sampling_dtype = np.dtype(np.int32)
        minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
    out = _randint(base, minval, maxval, shape=shape, dtype=sampling_dtype)
    return out if sampling_dtype == dtype else lax.convert_element_type(out, dtype)


@_static("axis")
def _shuffle(key, x, axis):
    # Sort by random 32-bit keys, repeated often enough that all elements get distinct key strings
    # with high probability (JAX's heuristic).
    size = math.prod(get_aval(x).shape)
    num_rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        key, subkey = _unstack2(_split(key, shape=(2,)))
        sort_keys = _random_bits(subkey, 32, get_aval(x).shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def _concrete_int(name: str, x) -> int:
    try:
        return int(x)
    except (TypeError, ValueError) as e:     # a tracer's ConcretizationTypeError is a TypeError
        raise TypeError(f"{name}: the integer argument must be concrete (a Python int or an array "
                        f"outside of tracing), got {x!r}") from e


def permutation(key, x, axis: int = 0, independent: bool = False):
    """A random permutation of ``arange(x)`` (int ``x``) or of ``x`` along ``axis``."""
    base, _ = _check_key("permutation", key)
    if not isinstance(x, (int, np.integer)):
        x = jnp.asarray(x)
    ndim = np.ndim(x) if isinstance(x, (int, np.integer)) else x.ndim
    if not ndim:
        if not dt.is_int(get_aval(x).dtype):
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(base, jnp.arange(_concrete_int("permutation", x)), axis=0)
    axis = _canonical_axis(axis, ndim)
    if independent or ndim == 1:
        return _shuffle(base, x, axis=axis)
    ind = _shuffle(base, jnp.arange(x.shape[axis]), axis=0)
    return jnp.take(x, ind, axis)


def _canonical_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _top_k_indices(x, k: int):
    """Indices of the ``k`` largest entries along the last axis, largest first (lower index on ties)."""
    n = get_aval(x).shape[-1]
    iota = lax.broadcasted_iota(np.int32, get_aval(x).shape, get_aval(x).ndim - 1)
    _, order = lax.sort_key_val(lax.neg(x), iota, dimension=-1)
    return lax.slice_in_dim(order, 0, k, axis=-1) if k < n else order


def choice(key, a, shape: Sequence[int] = (), replace: bool = True, p=None, axis: int = 0, mode=None):
    """A random sample of ``a`` (or of ``arange(a)``) of ``shape`` along ``axis``."""
    base, _ = _check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jaxprc.random.choice must be a sequence, got {shape}")
    shape = _shape(shape)
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = _concrete_int("choice", a)
    else:
        axis = _canonical_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size {n_inputs}) "
                         "when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(base, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            perm = permutation(base, n_inputs if arr.ndim == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis if arr.ndim else 0)
    else:
        p_arr = jnp.asarray(p)
        if not dt.is_inexact(p_arr.dtype):
            p_arr = p_arr.astype(dt.default_float_dtype())
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(base, shape, dtype=p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(dt.default_int_dtype())
        else:   # Gumbel top-k
            g = gumbel(base, (n_inputs,), dtype=p_arr.dtype, mode=mode) + jnp.log(p_arr)
            ind = _top_k_indices(g, n_draws).astype(dt.default_int_dtype())
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return jnp.reshape(result, shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:])


@_static("shape", "dtype", "mode")
def _gumbel(key, shape, dtype, mode):
    info = dt.finfo(dtype)
    if mode == "high":
        high, low = _unstack2(_uniform(key, 0., 1., shape=(2, *shape), dtype=dtype))
        # Below 0.5, refine with a second draw's bits to resolve small values.
        refined = lax.add(lax.add(high, lax.mul(np.array(2.0 ** -info.nmant, dtype), low)),
                          np.array(info.tiny, dtype))
        x = lax.select(lax.ge(high, np.array(0.5, dtype)), high, refined)
        return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    u = _uniform(key, np.array(info.tiny, dtype), 1., shape=shape, dtype=dtype)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples ``-log(-log(u))``; ``mode="high"`` uses two draws for small ``u``."""
    base, _ = _check_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    mode = "low" if mode is None else mode
    if mode not in ("high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel ('high' or 'low'), got: {mode}")
    return _gumbel(base, shape=_shape(shape), dtype=dtype, mode=mode)


def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True, mode=None):
    """Indices drawn from ``softmax(logits, axis)`` (Gumbel max; Gumbel top-k without replacement)."""
    base, _ = _check_key("categorical", key)
    logits = jnp.asarray(logits)
    ndim = logits.ndim
    axis = _canonical_axis(axis, ndim)
    batch_shape = logits.shape[:axis] + logits.shape[axis + 1:]
    if shape is None:
        shape = batch_shape
    else:
        shape = _shape(shape)
        _check_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        sample_shape = list(shape[len(prefix):])
        sample_shape.insert(axis, logits.shape[axis])
        noise = gumbel(base, (*prefix, *sample_shape), logits.dtype, mode=mode)
        return jnp.argmax(noise + jnp.expand_dims(logits, tuple(range(len(prefix)))), axis=axis + len(prefix))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[axis]}).")
    perturbed = logits + gumbel(base, logits.shape, logits.dtype, mode=mode)
    indices = _top_k_indices(jnp.moveaxis(perturbed, axis, -1), k)      # int32 batch_shape + (k,)
    return lax.reshape(indices, shape, (indices.ndim - 1, *range(indices.ndim - 1)))
