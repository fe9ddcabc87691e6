"""fMRI activation detection: phantom, t-test, false-alarm calibration of c, RVM / aRVM maps, ROC."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayeszoo.studies import fmri


def test_calibrated_c_matches_the_thesis():
    assert fmri.calibrated_c(0.05) == pytest.approx(1.42, abs=5e-3)     # [PhD §6.6]
    assert fmri.calibrated_c(0.01) == pytest.approx(2.82, abs=5e-3)
    with pytest.raises(ValueError, match="p_fa"):
        fmri.calibrated_c(1.5)


@pytest.mark.parametrize("noise", ["white", "coloured"])
def test_false_alarm_rate_at_calibrated_c_is_nominal(noise):
    """On activation-free phantoms a kernel enters the empty model with probability P_FA (within 3 MC s.e.)."""
    c = fmri.calibrated_c(0.05)
    n = 800 if noise == "white" else 400
    rate, se = fmri.false_alarm_rate(c, shape=(8, 8), n_studies=n, noise=noise, seed=0)
    assert abs(rate - 0.05) < 3 * np.sqrt(0.05 * 0.95 / n), (rate, se)
    # and at c = 0 the rate is P(chi2_1 > 1) = 0.317
    rate0, _ = fmri.false_alarm_rate(0.0, shape=(8, 8), n_studies=n, noise=noise, seed=0)
    assert abs(rate0 - stats.chi2.sf(1.0, 1)) < 3 * np.sqrt(0.317 * 0.683 / n)


def test_addition_statistic_is_chi2_under_h0():
    T = np.concatenate([fmri.addition_statistic(fmri.phantom((10, 10), [], seed=s), 2.0)[[0, 55]] for s in range(300)])
    assert stats.kstest(T, stats.chi2(1).cdf).pvalue > 1e-3


def test_t_map_false_alarms_and_difference_map():
    ph = fmri.phantom((20, 20), [], n_baseline=8, n_activated=8, seed=1)
    t = fmri.t_map(ph)
    crit = stats.t.isf(0.025, 14)
    rate = np.mean(np.abs(t) > crit)
    assert abs(rate - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 400)
    A_hat, sd = fmri.difference_map(ph)
    assert sd == pytest.approx(np.sqrt(2 / 8), rel=0.1)
    np.testing.assert_allclose(A_hat, ph.activated.mean(0) - ph.baseline.mean(0))


def test_coloured_noise_has_the_stated_covariance():
    ph = fmri.phantom((12, 12), [], noise="coloured", smoothing=1.5, n_baseline=200, n_activated=200, seed=2)
    E = np.concatenate([ph.baseline, ph.activated]).reshape(400, -1) - 100.0
    cov = fmri.noise_covariance((12, 12), 1.0, 1.5)
    assert np.allclose(np.diag(cov), 1.0)
    emp = E.T @ E / E.shape[0]
    assert np.max(np.abs(emp - cov)) < 5 * np.sqrt(2 / 400)
    assert cov[0, 1] > 0.5
    assert np.min(np.linalg.eigvalsh(cov)) >= 0.05 - 1e-9


def test_roc_and_partial_auc_on_known_scores():
    truth = [np.array([1, 1, 0, 0, 0], bool)]
    fpf, tpf = fmri.roc_curve([np.array([5.0, 4.0, 3.0, 2.0, 1.0])], truth)
    np.testing.assert_allclose(tpf, [0, 0.5, 1, 1, 1, 1])
    np.testing.assert_allclose(fpf, [0, 0, 0, 1 / 3, 2 / 3, 1])
    assert fmri.partial_auc(fpf, tpf, 0.1) == pytest.approx(0.1)
    fpf, tpf = fmri.roc_curve([np.array([1.0, 2.0, 3.0, 4.0, 5.0])], truth)
    assert fmri.partial_auc(fpf, tpf, 0.1) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="both"):
        fmri.roc_curve([np.ones(3)], [np.ones(3, bool)])


def test_rvm_map_beats_the_t_test():
    """One elliptical activation (the default phantom): the kernel map's partial ROC area exceeds the t-test's."""
    areas = {"t": [], "rvm": []}
    for seed in range(2):
        ph = fmri.phantom(seed=seed)
        truth = ph.truth()
        z, k = fmri.rvm_map(ph, width=2.0, c=fmri.calibrated_c(0.05))
        assert 1 <= k < 60
        areas["rvm"].append(fmri.partial_auc(*fmri.roc_curve([z], [truth])))
        areas["t"].append(fmri.partial_auc(*fmri.roc_curve([fmri.t_map(ph)], [truth])))
    assert np.mean(areas["rvm"]) > np.mean(areas["t"]) + 0.02, areas


def test_arvm_map_finds_the_activation():
    ph = fmri.phantom((16, 16), [(7.5, 7.5, 2.0, 2.5, 1.5)], seed=3)
    z, k = fmri.arvm_map(ph, c=fmri.calibrated_c(0.01), n_basis=6)
    assert k >= 1
    peak = np.unravel_index(np.argmax(z), z.shape)
    assert abs(peak[0] - 7.5) <= 2 and abs(peak[1] - 7.5) <= 2.5
    assert fmri.partial_auc(*fmri.roc_curve([z], [ph.truth()])) > 0.06


@pytest.mark.parametrize("kwargs, match", [(dict(shape=(3, 3)), "shape"), (dict(n_baseline=1), "n_baseline"),
                                           (dict(noise="pink"), "noise"), (dict(noise_sd=0.0), "noise_sd"),
                                           (dict(noise="coloured", smoothing=0.0), "smoothing")])
def test_phantom_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fmri.phantom(**kwargs)


def test_random_activations_are_apart_and_inside():
    rows = fmri.random_activations(4, (30, 30), rng=np.random.default_rng(0), min_distance=8.0)
    d = np.hypot(*(rows[:, None, :2] - rows[None, :, :2]).transpose(2, 0, 1))
    assert np.all(d[np.triu_indices(4, 1)] >= 8.0)
    assert np.all((rows[:, :2] >= 3) & (rows[:, :2] <= 26))
    np.testing.assert_allclose(rows[:, 2] * rows[:, 3:].mean(1), 2.0)      # small-strong, large-weak
    with pytest.raises(ValueError, match="cannot place"):
        fmri.random_activations(40, (12, 12), rng=np.random.default_rng(0))


@pytest.mark.slow
def test_roc_over_many_activations():
    """PhD §6.6: several activations of different sizes on each slice, ROC pooled over slices and voxels."""
    rng = np.random.default_rng(5)
    maps = {"t": [], "rvm": [], "arvm": []}
    truth = []
    for seed in range(3):
        ph = fmri.phantom(activations=fmri.random_activations(3, rng=rng), seed=seed)
        truth.append(ph.truth())
        maps["t"].append(fmri.t_map(ph))
        maps["rvm"].append(fmri.rvm_map(ph, width=2.0)[0])
        maps["arvm"].append(fmri.arvm_map(ph, n_basis=12)[0])
    area = {k: fmri.partial_auc(*fmri.roc_curve(v, truth)) for k, v in maps.items()}
    assert area["rvm"] > area["t"] and area["arvm"] > area["t"], area
