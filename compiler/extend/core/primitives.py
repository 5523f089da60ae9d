"""``jaxprc.extend.core.primitives``: the primitives under the names JAX's module gives them.

Most are ``jaxprc.lax``'s by the same name. A few of JAX's are jaxprc primitives under another name:
jaxprc stages every call (JAX's ``call_p``, ``closed_call_p`` and ``jit_p``) as its one call
primitive ``jit``, and names remat, custom derivatives and linear solves after their params.
"""
from jaxprc.lax import (  # noqa: F401
    abs_p, acos_p, acosh_p, add_p, after_all_p, all_gather_p, all_to_all_p, and_p, argmax_p,
    argmin_p, asin_p, asinh_p, atan2_p, atan_p, atanh_p, axis_index_p, bessel_i0e_p, bessel_i1e_p,
    bitcast_convert_type_p, broadcast_in_dim_p, cbrt_p, ceil_p, cholesky_p, clamp_p, clz_p,
    complex_p, concatenate_p, cond_p, conj_p, conv_general_dilated_p, convert_element_type_p,
    copy_p, cos_p, cosh_p, create_token_p, cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p,
    custom_lin_p, digamma_p, div_p, dot_general_p, dynamic_slice_p, dynamic_update_slice_p, eig_p,
    eigh_p, eq_p, erf_inv_p, erf_p, erfc_p, exp2_p, exp_p, expm1_p, fft_p, floor_p, gather_p, ge_p,
    gt_p, hessenberg_p, householder_product_p, igamma_grad_a_p, igamma_p, igammac_p, imag_p,
    integer_pow_p, iota_p, is_finite_p, jit_p, le_p, lgamma_p, log1p_p, log_p, logistic_p, lt_p,
    lu_p, max_p, min_p, mul_p, name_p, ne_p, neg_p, nextafter_p, not_p, or_p, pad_p, pmax_p,
    pmin_p, polygamma_p, population_count_p, pow_p, ppermute_p, psum_p, qr_p, ragged_all_to_all_p,
    real_p, reduce_and_p, reduce_max_p, reduce_min_p, reduce_or_p, reduce_p,
    reduce_precision_p, reduce_prod_p, reduce_sum_p, reduce_window_max_p, reduce_window_min_p,
    reduce_window_p, reduce_window_sum_p, reduce_xor_p, regularized_incomplete_beta_p, rem_p,
    reshape_p, rev_p, rng_bit_generator_p, rng_uniform_p, round_p, rsqrt_p, scan_p, scatter_add_p,
    scatter_max_p, scatter_min_p, scatter_mul_p, scatter_p, schur_p, select_and_gather_add_p,
    select_and_scatter_add_p, select_n_p, sharding_constraint_p, shift_left_p,
    shift_right_arithmetic_p, shift_right_logical_p, sign_p, sin_p, sinh_p, slice_p, sort_p,
    sqrt_p, square_p, squeeze_p, stop_gradient_p, sub_p, svd_p, tan_p, tanh_p, top_k_p,
    transpose_p, triangular_solve_p, tridiagonal_solve_p, while_p, xor_p, zeta_p)
from jaxprc.lax import checkpoint_p as remat_p  # noqa: F401
from jaxprc.random import random_gamma_p  # noqa: F401  (jax.random's, as in JAX)
from jaxprc.transformations.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p  # noqa: F401
from jaxprc.lax import custom_linear_solve_p as linear_solve_p  # noqa: F401

call_p = closed_call_p = jit_p
