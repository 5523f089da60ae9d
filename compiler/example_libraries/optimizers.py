"""Optimizers as (init_fun, update_fun, get_params) triples over pytrees of parameters, to the
API of ``jax.example_libraries.optimizers``.

An optimizer is written for one array (``init(x0) -> state``, ``update(i, g, state) -> state``,
``get_params(state) -> x``); the ``optimizer`` decorator lifts it to pytrees, keeping the states
flattened in an ``OptimizerState`` (itself a pytree, so it crosses jit boundaries).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

import jaxprc.numpy as jnp
from jaxprc import tree, tree_util

__all__ = ["OptimizerState", "Optimizer", "optimizer", "sgd", "momentum", "nesterov", "adagrad", "rmsprop",
           "rmsprop_momentum", "adam", "adamax", "sm3", "constant", "exponential_decay", "inverse_time_decay",
           "polynomial_decay", "piecewise_constant", "make_schedule", "l2_norm", "clip_grads", "JoinPoint",
           "unpack_optimizer_state", "pack_optimizer_state", "Array", "InitFn", "Params", "ParamsFn", "State",
           "Step", "UpdateFn", "Updates", "Schedule"]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
# The flat states are the children; the tree structures are static.
tree_util.register_pytree_node(OptimizerState,
                               lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                               lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

# JAX's annotation aliases (its Array, Params, State and Updates are Any as well).
Array = Any
Params = Any
State = Any
Updates = Params
Step = int
InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], Any]


class Optimizer(NamedTuple):
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_all(trees):
    pairs = [tree.flatten(t) for t in trees]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def optimizer(opt_maker):
    """Lift an optimizer written for single arrays to pytrees of parameters."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            leaves, treedef = tree.flatten(x0_tree)
            states, subtrees = _flatten_all([init(x0) for x0 in leaves])
            return OptimizerState(states, treedef, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, treedef, subtrees = opt_state
            grads, grad_def = tree.flatten(grad_tree)
            if grad_def != treedef:
                raise TypeError("optimizer update function was passed a gradient tree that did not match the "
                                f"parameter tree structure with which it was initialized: parameter tree "
                                f"{treedef} and grad tree {grad_def}.")
            states = [tree.unflatten(s, flat) for s, flat in zip(subtrees, states_flat)]
            new_flat, new_subtrees = _flatten_all([update(i, g, s) for g, s in zip(grads, states)])
            for old, new in zip(subtrees, new_subtrees):
                if old != new:
                    raise TypeError("optimizer update function produced an output structure that did not "
                                    f"match its input structure: input {old} and output {new}.")
            return OptimizerState(new_flat, treedef, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, treedef, subtrees = opt_state
            params = [get_params(tree.unflatten(s, flat)) for s, flat in zip(subtrees, states_flat)]
            return tree.unflatten(treedef, params)

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: x <- x - step_size(i) g."""
    step_size = make_schedule(step_size)
    return Optimizer(lambda x0: x0, lambda i, g, x: x - step_size(i) * g, lambda x: x)


def _with_velocity(step_size, mass, nesterov_step):
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g if nesterov_step else velocity), velocity
    return init, update, lambda state: state[0]


@optimizer
def momentum(step_size: Schedule, mass: float):
    """SGD with momentum ``mass``."""
    return _with_velocity(step_size, mass, nesterov_step=False)


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """SGD with Nesterov momentum ``mass``."""
    return _with_velocity(step_size, mass, nesterov_step=True)


def _first(state):
    return state[0]


def _inverse_sqrt_or_zero(accum):
    return jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0.0)


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al. 2011) with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        m = (1. - momentum) * (g * _inverse_sqrt_or_zero(g_sq)) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return init, update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: the gradient scaled by a running RMS of gradients."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return init, update, _first


def _bias_correction(b, like, i):
    return 1 - jnp.asarray(b, like.dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma & Ba 2014) with bias-corrected moment estimates."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / _bias_correction(b1, m, i)
        vhat = v / _bias_correction(b2, m, i)
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v
    return init, update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: Adam with an exponentially weighted infinity norm."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        return x - (step_size(i) / _bias_correction(b1, m, i)) * m / (u + eps), m, u
    return init, update, _first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019): one accumulator per dimension, their minimum bounding each entry's."""
    step_size = make_schedule(step_size)

    def along(ndim, v, axis):
        """``v`` (one dimension) broadcastable against rank ``ndim`` along ``axis``."""
        return v[tuple(slice(None) if d == axis else None for d in range(ndim))]

    def init(x0):
        shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape], shape

    def update(i, g, state):
        x, m, vs, shape = state
        accum = functools.reduce(jnp.minimum, [along(g.ndim, v, k) for k, v in enumerate(vs)]) + jnp.square(g)
        m = (1. - momentum) * (g * jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(d for d in range(x.ndim) if d != j)) for j in range(x.ndim)]
        return x, m, vs, shape
    return init, update, lambda state: state[0].reshape(state[3])


# ---------------------------------------------------------------- schedules

def constant(step_size) -> Schedule:
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate):
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        return (1 - step_num / decay_steps) ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule) -> Schedule:
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# ---------------------------------------------------------------- utilities

def l2_norm(params):
    """The l2 norm of a pytree of arrays."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tree.leaves(params)))


def clip_grads(grad_tree, max_norm):
    """Gradients scaled down to l2 norm ``max_norm`` when above it."""
    norm = l2_norm(grad_tree)
    return tree.map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """Marks where an outer pytree (of parameters) meets an inner one (an optimizer state)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """The OptimizerState as the parameter pytree with a JoinPoint holding each leaf's state
    (for serialization)."""
    states_flat, treedef, subtree_defs = opt_state
    return tree.unflatten(treedef, [JoinPoint(tree.unflatten(s, f)) for s, f in zip(subtree_defs, states_flat)])


def pack_optimizer_state(marked_pytree):
    """The inverse of ``unpack_optimizer_state``."""
    sentinels, treedef = tree.flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (from unpack_optimizer_state)")
    states_flat, subtree_defs = _flatten_all([s.subtree for s in sentinels])
    return OptimizerState(states_flat, treedef, subtree_defs)
