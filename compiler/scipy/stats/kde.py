"""Gaussian kernel density estimation (a pytree, so that it passes through jit and vmap)."""
from __future__ import annotations

import numpy as np

from ... import numpy as jnp
from ... import random
from ...ir import dtypes as dt
from ...numpy._util import located
from ...tree_util import register_pytree_node_class
from ...transformations.vmap import vmap
from ..special import logsumexp, ndtr


def _linalg():
    from ...lax import linalg     # Cholesky factorization and triangular solves
    return linalg


def _cho_solve(factor, b):
    """(L L^T)^-1 b for lower-triangular L."""
    linalg = _linalg()
    y = linalg.triangular_solve(factor, b, left_side=True, lower=True)
    return linalg.triangular_solve(factor, y, left_side=True, lower=True, transpose_a=True)


def _weighted_covariance(data, weights):
    """numpy.cov(data, aweights=weights) for normalized weights (unbiased, rows are variables)."""
    centered = data - jnp.sum(data * weights, axis=1, keepdims=True)
    return (centered * weights) @ centered.T / (1 - jnp.sum(weights * weights))


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian KDE of ``dataset`` (d variables by n points), bandwidth by Scott's or
    Silverman's rule, a scalar factor or a callable of the estimator."""

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = jnp.atleast_2d(dataset)
        if dt.is_complex(dataset.dtype):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        dtype = jnp.result_type(dataset, 1.0) if weights is None else jnp.result_type(dataset, weights, 1.0)
        dataset = dataset.astype(dtype)
        if weights is not None:
            weights = jnp.atleast_1d(jnp.asarray(weights, dtype))
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if weights.shape[0] != n:
                raise ValueError("`weights` input should be of length n")
        else:
            weights = jnp.full(n, 1.0 / n, dtype=dtype)
        self.dataset, self.weights = dataset, weights
        self.neff = 1 / jnp.sum(weights ** 2)
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = jnp.power(self.neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(self.neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")
        data_covariance = jnp.atleast_2d(_weighted_covariance(dataset, weights))
        data_inv_cov = _cho_solve(_linalg().cholesky(data_covariance), jnp.eye(d, dtype=dtype))
        self.covariance = data_covariance * factor ** 2
        self.inv_cov = data_inv_cov / factor ** 2

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov = children
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def evaluate(self, points):
        points = self._reshape_points(points)
        return _gaussian_kernel_eval(False, self.dataset.T, self.weights[:, None], points.T, self.inv_cov)[:, 0]

    __call__ = pdf = evaluate

    def logpdf(self, x):
        x = self._reshape_points(x)
        return _gaussian_kernel_eval(True, self.dataset.T, self.weights[:, None], x.T, self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times the Gaussian N(mean, cov)."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        factor = _linalg().cholesky(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diagonal(factor)))
        return _gaussian_kernel_convolve(factor, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low, high):
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (ndtr(high) - ndtr(low)))

    def integrate_kde(self, other):
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        factor = _linalg().cholesky(self.covariance + other.covariance)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diagonal(factor)))
        small, large = (self, other) if self.n < other.n else (other, self)
        per_point = vmap(lambda m: _gaussian_kernel_convolve(factor, norm, large.dataset, large.weights, m),
                         in_axes=1)(small.dataset)
        return jnp.sum(per_point * small.weights)

    def resample(self, key, shape=()):
        """Points drawn from the estimate: dataset points (by weight) plus kernel noise."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype),
                                           self.covariance, shape=shape, dtype=self.dataset.dtype).T
        return self.dataset[:, index] + noise

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        points = jnp.atleast_2d(points)
        if dt.is_complex(points.dtype):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"{located('gaussian_kde')}: points have dimension {d}, dataset has "
                             f"dimension {self.d}")
        return points


def _gaussian_kernel_convolve(factor, norm, target, weights, mean):
    diff = target - mean[:, None]
    arg = 0.5 * jnp.sum(diff * _cho_solve(factor, diff), axis=0)
    return norm * jnp.sum(jnp.exp(-arg) * weights)


def _gaussian_kernel_eval(in_log, points, values, xi, precision):
    """sum_j values_j N(xi; points_j, precision^-1) for each xi (or its log, by logsumexp)."""
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    whitening = _linalg().cholesky(precision)
    points, xi = points @ whitening, xi @ whitening
    log_norm = jnp.sum(jnp.log(jnp.diagonal(whitening))) - 0.5 * d * np.log(2 * np.pi)

    def kernel(x_test, x_train, y_train):
        arg = log_norm - 0.5 * jnp.sum(jnp.square(x_train - x_test))
        return jnp.log(y_train) + arg if in_log else y_train * jnp.exp(arg)

    reduce = logsumexp if in_log else jnp.sum
    return vmap(lambda x: reduce(vmap(kernel, in_axes=(None, 0, 0))(x, points, values), axis=0))(xi)
