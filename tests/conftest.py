"""What the test files share: the fake backends, and the small problems several files use (one definition each,
session-scoped so that a problem is built, and its kernels compiled, once). The helper modules are the package
tests/helpers (``from tests.helpers import ...``): tests/ and its folders are packages, and pyproject.toml's
``pythonpath`` puts the repository's root on the path (with benchmarks/ and gallery/, for the scripts tested there);
no test module edits sys.path (tests/test_test_imports.py)."""
from __future__ import annotations

import pytest

import bayeszoo as bz
from bayeszoo import registry

FAKE_BACKENDS = ["fake_ok", "fake_vb", "fake_em", "fake_fail"]


@pytest.fixture(scope="session")
def fakes():
    """tests/helpers/fake_backends.py, imported: the fake RVM backends are registered."""
    from tests.helpers import fake_backends

    return fake_backends


@pytest.fixture(scope="session")
def sinc():
    """20 sinc points (40 held out): the RVM problem of the generic-backend tests and of the contract, so the
    generic samplers' compiled kernels are shared through the caches."""
    return bz.datasets.load("sinc", n=20, n_test=40, seed=2)


@pytest.fixture(scope="session")
def fake_comparison(fakes):
    """An RVM comparison of the four fake backends (one fails) against fake_ok, on 40 sinc points with 100 held
    out: the report and the notebook display are checked on it."""
    data = bz.datasets.load("sinc", n=40, n_test=100)
    return bz.compare(bz.models.RVM(width=3.0), data, backends=FAKE_BACKENDS, reference="fake_ok", draws=200,
                      tune=0, chains=2, seed=3, progress=False)


@pytest.fixture(scope="module")
def fake_samplers():
    """tests/helpers/fake_samplers.py with its generic fake backends registered for one test module, then taken
    away (they apply to every model, so other modules' lists of backends must not see them)."""
    from tests.helpers import fake_samplers

    generic = dict(registry._GENERIC)
    fake_samplers.register()
    yield fake_samplers
    registry._GENERIC.clear()
    registry._GENERIC.update(generic)


@pytest.fixture
def restore_registry():
    """Whatever a test registers (bz.register_backend, registry.register) is gone afterwards."""
    generic, family = dict(registry._GENERIC), dict(registry._FAMILY)
    yield
    registry._GENERIC.clear()
    registry._GENERIC.update(generic)
    registry._FAMILY.clear()
    registry._FAMILY.update(family)


#: The default suite's slowest tests (over 4.5 s each on two cores, read off ``make test``'s ``--durations``), run
#: with ``make test-slow`` so that the default suite keeps within CI's budget. One generic backend's contract, one
#: posteriordb log-density check and one BLAS check of the kind stay in the default suite.
SLOW_BY_DURATION = frozenset({
    'tests/inference/test_generic.py::test_fit_layout[numpyro_fit]',
    'tests/diagnostics/test_accuracy.py::test_targets_of_ones_own_set_the_columns_the_verdict_and_the_report',
    'tests/diagnostics/test_accuracy.py::test_the_verdict_and_the_ranking_put_an_unconverged_sampler_last',
    'tests/diagnostics/test_accuracy.py::test_untrusted_reference_banner_in_the_report',
    'tests/inference/arvm/test_arvm.py::test_declarations_report_the_bases_sorted_by_centre',
    'tests/inference/arvm/test_arvm.py::test_larger_sparsity_gives_fewer_relevance_vectors',
    'tests/inference/arvm/test_arvm.py::test_pymc_numpyro_and_numpy_densities_agree',
    'tests/catalogue/test_arvm_reference.py::test_reference_advice_is_shown_when_a_reference_breaks_the_rules',
    'tests/test_benchmark.py::test_a_scheduler_that_does_not_answer_is_an_error_within_seconds',
    'tests/inference/bid/test_bid_vb.py::test_annealed_start_reaches_a_higher_bound_than_the_thesis_start[motion-1.0-0]',
    'tests/inference/bid/test_bid_vb.py::test_annealed_start_reaches_a_higher_bound_than_the_thesis_start[uniform-2.0-1]',
    'tests/inference/bid/test_bid_vb.py::test_student_t_image_prior_restores_blocks',
    'tests/inference/test_blackjax.py::test_pathfinder_finds_the_mean',
    'tests/inference/test_blackjax.py::test_same_seed_same_draws_and_chains_do_not_depend_on_their_number',
    'tests/inference/test_blackjax.py::test_samplers_match_the_exact_posterior_within_monte_carlo_error[blackjax_nuts]',
    'tests/catalogue/test_build_reference.py::test_an_engine_that_diverged_runs_again_at_0_99_and_both_runs_are_recorded',
    'tests/catalogue/test_catalogue.py::test_lookup_finds_the_reference_of_every_demo_problem',
    'tests/catalogue/test_catalogue.py::test_saved_comparison_keeps_its_reference',
    'tests/catalogue/test_catalogue.py::test_the_command_line_uses_the_catalogue_unless_told_otherwise',
    'tests/test_cli.py::test_a_csv_table_and_one_backend_option_form_for_fit_and_compare',
    'tests/test_cli.py::test_compare_and_report_print_the_verdict_after_the_grid',
    'tests/test_cli.py::test_compare_takes_the_ranking_targets',
    'tests/test_cli.py::test_compare_writes_fits_table_and_report',
    'tests/test_cli.py::test_python_m_bayeszoo_list',
    'tests/inference/test_compile_once.py::test_a_declarations_data_are_arguments_so_its_program_is_the_same_for_other_data_of_that_shape[pmkl]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-advi]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-blackjax_mclmc]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-blackjax_pathfinder]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-fullrank_advi]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-numpyro]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-nutpie]',
    'tests/inference/test_contract.py::test_backend_contract[rvm-nuts]',
    'tests/test_design.py::test_the_natural_image_study_measures_the_heuristic_and_designed_wavelet_coefficients',
    'tests/inference/test_generic.py::test_classification_with_pymc_nuts[probit]',
    'tests/inference/test_generic.py::test_fit_layout[nuts_fit]',
    'tests/inference/gpc/test_gpc_mcmc.py::test_gibbs_two_point_exact_moments[probit]',
    'tests/models/test_gpc_model.py::test_nuts_on_crabs_gives_a_sensible_error_rate',
    'tests/models/test_gpc_model.py::test_pymc_and_numpyro_log_densities_agree[probit-se]',
    'tests/models/test_gpc_model.py::test_two_point_exact_moments_probit_evidence_symmetry_and_monte_carlo',
    'tests/test_grid.py::test_resume_loads_saved_fits_and_completes_the_table',
    'tests/test_grid.py::test_resume_reruns_a_fit_saved_with_other_settings',
    'tests/test_grid.py::test_saved_comparison_rebuilds_the_same_table',
    'tests/test_grid_reliability.py::test_a_missing_saved_fit_is_reported_not_dropped',
    'tests/test_grid_reliability.py::test_an_unreadable_fit_is_moved_aside_and_refitted[garbage]',
    'tests/test_grid_reliability.py::test_an_unreadable_fit_is_moved_aside_and_refitted[truncated]',
    'tests/test_grid_reliability.py::test_resume_refits_when_the_model_or_the_data_changed',
    'tests/test_grid_reliability.py::test_the_cli_refits_when_a_model_option_changed_and_force_is_given',
    'tests/inference/imagervm/test_imagervm.py::test_lroc_of_the_detector_beats_chance_and_the_curve_is_monotone',
    'tests/inference/pmkl/test_pmkl_backends.py::test_compare_table_and_picture',
    'tests/inference/pmkl/test_pmkl_theta.py::test_compare_with_theta_runs_through_the_harness',
    'tests/inference/pmkl/test_pmkl_theta.py::test_irrelevant_inputs_get_small_theta[gibbs-sizes0]',
    'tests/inference/pmkl/test_pmkl_theta.py::test_numpyro_declaration_with_theta_and_rho_has_the_brute_force_log_density',
    'tests/test_properties_design.py::test_active_learning_learns_or_refuses',
    'tests/numerics/test_pytensor_blas.py::test_pytensor_gets_openblas_whatever_is_imported_first[import pymc]',
    'tests/diagnostics/test_report.py::test_a_grid_member_as_the_reference_is_a_single_run_and_its_row_says_reference',
    'tests/diagnostics/test_report.py::test_gpc_marginals_picture_against_the_reference',
    'tests/diagnostics/test_report.py::test_other_family_pictures[ripley-classification]',
    'tests/diagnostics/test_report.py::test_other_family_pictures[sinc2d-regression]',
    'tests/test_resources.py::test_cross_validate_holds_one_fold_fit_at_a_time',
    'tests/inference/rvm/test_rvm_backends.py::test_gibbs_sbc_quick',
    'tests/test_saving.py::test_a_full_disk_while_a_grid_saves_keeps_every_fit_and_the_table',
    'tests/test_saving.py::test_a_grid_interrupted_while_it_writes_resumes_on_the_next_run[writing a fit]',
    'tests/test_saving.py::test_compare_without_overwrite_refuses_before_any_work',
    'tests/test_saving.py::test_saving_another_experiment_over_a_folder_replaces_its_fits_with_a_warning',
    'tests/test_saving.py::test_the_report_command_rewrites_table_and_report_only_with_force',
    'tests/test_saving.py::test_two_processes_on_one_folder_compute_each_fit_once',
    'tests/test_sbc.py::test_a_comparison_shows_and_keeps_its_sbc',
    'tests/test_sbc.py::test_a_gibbs_step_with_doubled_conditional_variance_fails',
    'tests/test_sbc.py::test_a_model_of_ones_own_is_simulated_by_its_library_and_refitted[numpyro]',
    'tests/test_sbc.py::test_a_model_of_ones_own_is_simulated_by_its_library_and_refitted[pymc]',
    'tests/test_seeds.py::test_a_grid_with_a_fresh_seed_resumes_with_the_seed_it_started_with',
    'tests/test_sklearn.py::test_grid_search_over_a_classifier',
    'tests/test_sklearn.py::test_pmkl_classifier_fits_in_a_gib_above_its_imports',
    "tests/test_sklearn.py::test_sklearn_estimator_checks[RelevanceVectorRegressor(backend='em')-check_regressor_data_not_an_array]",
    'tests/inference/slm/test_slm_backends.py::test_gibbs_cg_matches_cholesky',
    'tests/inference/slm/test_slm_backends.py::test_gibbs_samples_the_logistic_potential_by_polya_gamma_precisions',
    'tests/inference/slm/test_slm_dloop.py::test_lanczos_k_reaches_the_fixed_point_at_k_equal_n',
    'tests/inference/slm/test_slm_dloop.py::test_perturb_and_solve_draws_follow_the_gaussian',
    'tests/inference/slm/test_slm_dloop.py::test_student_posterior_against_gibbs',
    'tests/inference/test_user_backends.py::test_a_user_sampler_recovers_an_exact_gaussian_posterior',
    'tests/inference/test_user_backends.py::test_a_sampler_that_declares_its_gradients_per_step_counts_them_as_the_built_in_ones_do',
})


@pytest.hookimpl(tryfirst=True)   # before the -m selection reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in SLOW_BY_DURATION:
            item.add_marker(pytest.mark.slow)
