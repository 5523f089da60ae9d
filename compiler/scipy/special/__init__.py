"""jax.scipy.special: special functions with JAX's algorithms, numerics at the tails and
derivatives (custom rules where differentiating the formula would be unstable)."""
from ._gamma import (bernoulli, beta, betainc, betaln, comb, digamma, factorial, gamma, gammainc,  # noqa: F401
                     gammaincc, gammaln, gammasgn, loggamma, multigammaln, poch, polygamma, zeta)
from ._error import (dawsn, erf, erfc, erfcx, erfinv, log_ndtr, ndtr, ndtri, owens_t, wofz)  # noqa: F401
from ._integrals import exp1, expi, expn, fresnel, sici, spence  # noqa: F401
from ._bessel import bessel_jn, i0, i0e, i1, i1e, sph_harm_y  # noqa: F401
from ._hyper import hyp1f1, hyp2f1  # noqa: F401
from ._logs import (boxcox, boxcox1p, entr, expit, kl_div, log_softmax, logit, logsumexp,  # noqa: F401
                    rel_entr, softmax, xlog1py, xlogy)
