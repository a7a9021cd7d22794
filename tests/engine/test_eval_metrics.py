"""Eval metrics on synthetic cases whose answers are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.eval import metrics as M
from engine.eval.classifiers import (
    ACTIONS,
    SHIFT_X,
    SHIFT_Y,
    AudioJudge,
    InverseDynamics,
    action_class,
    action_targets,
    audio_targets,
    shift_costs,
    without_particles,
)
from engine.sim.labels import empty_labels


def test_pooled_psnr_known_value_and_pooling():
    truth = np.zeros((2, 8, 8, 3))
    gen = np.full((2, 8, 8, 3), 0.1)  # MSE 0.01 -> 20 dB
    assert M.pooled_psnr(gen, truth) == pytest.approx(20.0)
    # One perfect frame and one off by 0.1: pooled MSE 0.005 -> 23.01 dB (a per-frame mean
    # would be infinite).
    gen[0] = 0.0
    assert M.pooled_psnr(gen, truth) == pytest.approx(10 * np.log10(1 / 0.005))
    assert (
        M.pooled_psnr(np.full((1, 2, 2, 3), 255, np.uint8), np.zeros((1, 2, 2, 3), np.uint8)) == 0.0
    )


def test_ssim_identity_and_ordering():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (2, 32, 32, 3)).astype(np.uint8)
    assert M.ssim(frames, frames) == pytest.approx(1.0)
    little = np.clip(frames + rng.normal(0, 5, frames.shape), 0, 255).astype(np.uint8)
    lots = np.clip(frames + rng.normal(0, 60, frames.shape), 0, 255).astype(np.uint8)
    assert 1.0 > M.ssim(little, frames) > M.ssim(lots, frames)
    # constant images with a known mean shift: SSIM = (2 mx my + c1) / (mx^2 + my^2 + c1)
    a, b = np.full((1, 16, 16, 3), 0.5), np.full((1, 16, 16, 3), 0.25)
    c1 = 0.01**2
    assert M.ssim(a, b) == pytest.approx((2 * 0.5 * 0.25 + c1) / (0.5**2 + 0.25**2 + c1))


def test_sharpness_ratio_detects_blur():
    rng = np.random.default_rng(1)
    sharp = rng.random((3, 32, 32, 3))
    blurred = (
        sharp + np.roll(sharp, 1, 1) + np.roll(sharp, 1, 2) + np.roll(sharp, (1, 1), (1, 2))
    ) / 4
    assert M.sharpness_ratio(sharp, sharp) == pytest.approx(1.0)
    assert M.sharpness_ratio(blurred, sharp) < 0.5


def test_frechet_distance_known_values():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(4000, 3))
    assert M.frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    # Same covariance, mean shifted by (3, 0, 0): distance = 9.
    assert M.frechet_distance(a, a + [3, 0, 0]) == pytest.approx(9.0, abs=1e-6)
    # 1-D: N(0, 1) vs N(0, 4): (1 - 2)^2 = 1.
    x = rng.normal(size=(20000, 1))
    assert M.frechet_distance(x, 2 * x) == pytest.approx(1.0, rel=0.02)


def test_flicker_ratio_tells_boiling_from_frozen():
    rng = np.random.default_rng(0)
    truth = np.repeat(np.linspace(0, 255, 10, dtype=np.uint8)[:, None, None, None], 8, 1)
    truth = np.broadcast_to(truth, (10, 8, 8, 3)).copy()
    assert M.flicker_ratio(truth, truth) == pytest.approx(1.0)
    frozen = np.repeat(truth[:1], 10, axis=0)
    assert M.flicker_ratio(frozen, truth) == 0.0
    boiling = rng.integers(0, 256, truth.shape, dtype=np.uint8)
    assert M.flicker_ratio(boiling, truth) > 2.0


def test_brightness_drift_known_value():
    gen = np.full((4, 8, 8, 3), 0.6)
    truth = np.full((4, 8, 8, 3), 0.5)
    assert M.brightness_drift(gen, truth) == pytest.approx(0.1)


def test_colour_spread_ratio_falls_as_the_picture_dissolves_into_one_colour():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    assert M.colour_spread_ratio(truth, truth) == pytest.approx(1.0)
    field = np.full_like(truth, 90)
    assert M.colour_spread_ratio(field, truth) == pytest.approx(0.0, abs=1e-9)
    faded = (truth.astype(np.float64) * 0.5 + 64).astype(np.uint8)
    assert M.colour_spread_ratio(faded, truth) == pytest.approx(0.5, abs=0.02)


def test_av_sync_recovers_a_known_delay_and_ignores_random_bursts():
    rng = np.random.default_rng(3)
    frames = 400
    steps = np.sort(rng.choice(np.arange(5, frames - 5), 40, replace=False))
    audio = rng.normal(0, 0.001, frames * 800)
    delay = 480  # samples = 30 ms at 16 kHz
    for f in steps:
        s = f * 800 + delay
        audio[s : s + 400] += rng.normal(0, 0.5, 400)
    sync = M.av_sync([(audio, steps)])
    assert sync["synced"] and sync["lag_ms"] == pytest.approx(30.0, abs=5.0)
    unrelated = np.sort(rng.choice(np.arange(5, frames - 5), 40, replace=False))
    assert not M.av_sync([(audio, unrelated)])["synced"]
    assert M.av_sync([(np.zeros(4000), np.array([], int))])["lag_ms"] is None


def test_seam_ratio_sees_a_tile_mosaic():
    rng = np.random.default_rng(4)
    smooth = rng.random((2, 128, 128, 3)) * 0.2 + 0.4
    tiles = np.kron(rng.random((2, 4, 4, 3)), np.ones((1, 32, 32, 1))) + smooth * 0.1
    assert M.seam_ratio(smooth) == pytest.approx(1.0, abs=0.1)
    assert M.seam_ratio(tiles) > 2


def test_bootstrap_interval_contains_the_mean_and_narrows_with_n():
    rng = np.random.default_rng(5)
    small, large = rng.random(20) < 0.7, rng.random(2000) < 0.7
    lo, hi = M.bootstrap_ci(small)
    assert lo <= small.mean() <= hi
    lo2, hi2 = M.bootstrap_ci(large)
    assert hi2 - lo2 < (hi - lo) / 4


def test_balanced_accuracy_ignores_trivial_negatives():
    target = np.array([[1, 0], [0, 0], [0, 0], [0, 0]], bool)
    always_no = np.zeros_like(target)
    assert M.balanced_accuracy(always_no, target) == [0.5, None]
    assert M.balanced_accuracy(target, target) == [1.0, None]
    assert M.balanced_accuracy_multiclass(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 1])) == 1.0
    assert M.balanced_accuracy_multiclass(np.zeros(4, int), np.array([0, 0, 0, 1])) == 0.5


def test_action_classes_and_audio_targets_from_labels():
    labels = empty_labels(5)
    labels["keys"] = [0, 1, 1 | 16, 8, 0]
    labels["yaw_delta"] = [0, 0, 0, 0, 0.1]
    names = [ACTIONS[i] for i in action_class(labels["keys"], labels["yaw_delta"])]
    assert names == ["idle", "forward", "turn_left", "strafe_right", "turn_right"]
    labels["step_onset"] = [0, 1, 0, 0, 0]
    labels["weather"] = [1, 1, 0, 0, 0]
    labels["theme"] = [4, 4, 0, 0, 4]  # misty_coast (wind 0.8), ember_forest (0.3)
    labels["call_onset"] = [0, 0, 1, 0, 0]
    t = audio_targets(labels)
    assert t[:, 0].tolist() == [0, 1, 1, 0, 0] and t[:, 1].tolist() == [1, 1, 0, 0, 0]
    assert t[:, 3].tolist() == [1, 1, 0, 0, 1]  # strong wind: misty coast, not ember forest
    assert t[:, 4].tolist() == [0, 0, 1, 1, 1]  # a call sounds for a few frames


def test_actions_the_picture_cannot_tell_are_not_scored():
    labels = empty_labels(7)
    labels["keys"] = [0, 1, 1, 0, 0, 1 | 2, 64]  # -, W, W, -, -, W+A, UP
    labels["yaw_delta"] = [0, 0, 0.01, 0.001, 3.1, 0, 0]
    labels["pose_x"] = np.arange(7)  # moving every frame
    first = np.array([True] + [False] * 6)
    names = [ACTIONS[i] if i >= 0 else None for i in action_targets(labels, first)]
    # episode start; forward; a slight turn while walking; (almost) still; a jump round;
    # two movement keys; looking up
    assert names == [None, "forward", None, "idle", None, None, None]


def test_shift_costs_find_the_shift_between_two_frames():
    before = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    before = torch.nn.functional.avg_pool2d(before, 3, 1, 1)  # some texture, not pixel noise
    after = torch.roll(before, shifts=(0, 4), dims=(2, 3))  # the picture moved 4 px right
    cost = shift_costs(before, after)
    best = cost.mean((2, 3)).argmin(1).item()
    dy, dx = divmod(best, 2 * SHIFT_X + 1)
    assert (dy - SHIFT_Y, dx - SHIFT_X) == (0, 2)  # at half resolution: 2 of its pixels


def test_particles_are_filtered_out_before_the_shift_search():
    grey = torch.zeros(1, 1, 16, 16)
    grey[..., 4, 4] = 1.0  # a snowflake
    grey[..., 2:9, 10] = 1.0  # a rain streak, one pixel wide
    grey[..., 10:14, 2:8] = 0.5  # something solid
    clean = without_particles(grey)
    assert clean[..., :9, :].abs().max() == 0  # flake and streak gone
    assert torch.equal(clean[..., 11:13, 3:7], grey[..., 11:13, 3:7])  # the solid stays
    before = torch.nn.functional.avg_pool2d(
        torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(1)), 3, 1, 1
    )
    after = torch.roll(before, shifts=(0, 4), dims=(2, 3)).clone()
    flakes = torch.rand(1, 1, 128, 128, generator=torch.Generator().manual_seed(2)) < 0.03
    after = torch.where(flakes, torch.ones_like(after), after)  # snow: the filtered search
    # still finds the 4-pixel move (a filter that moved edges would not)
    best = shift_costs(before, after).mean((2, 3)).argmin(1).item()
    assert divmod(best, 2 * SHIFT_X + 1) == (SHIFT_Y, SHIFT_X + 2)


def test_judges_train_on_the_inputs_they_read():
    """Training feeds precomputed shift costs and spectrograms to the judges' `net`; reading
    goes through `forward`: both must see the same input."""
    torch.manual_seed(0)
    before, after = torch.rand(3, 3, 128, 128), torch.rand(3, 3, 128, 128)
    idm = InverseDynamics().eval()
    assert torch.allclose(idm(before, after), idm.net(idm.features(before, after)))
    audio = torch.rand(3, 800) * 2 - 1
    judge = AudioJudge().eval()
    assert torch.allclose(judge(audio), judge.net(AudioJudge.features(audio)))


def test_move_fraction_all_the_way_none_half_and_away():
    base, target = np.array([100.0, 50.0, 0.0]), np.array([200.0, 250.0, 40.0])
    assert M.move_fraction(target, base, target) == pytest.approx(1.0)
    assert M.move_fraction(base, base, target) == pytest.approx(0.0)
    assert M.move_fraction((base + target) / 2, base, target) == pytest.approx(0.5)
    assert M.move_fraction(base - (target - base), base, target) == pytest.approx(-1.0)
    # a change across the line to the target counts against: it ends farther from the colour
    across = np.cross(target - base, [0.0, 0.0, 1.0])
    assert M.move_fraction(base + across, base, target) < 0
    # so does overshooting to some other colour that still has a part along the line
    assert M.move_fraction(base + 1.5 * (target - base) + across, base, target) < 0.5
    assert np.isnan(M.move_fraction(target, target, target))


def test_band_means_read_their_rows_of_every_frame():
    frames = np.zeros((2, 10, 4, 3), np.uint8)
    frames[:, :3] = (200, 100, 0)  # sky rows 0..2
    frames[:, 7:] = (0, 50, 250)
    frames[1, 7:] = (0, 150, 250)  # the ground brightens in the second frame
    assert M.band_mean(frames, (0.0, 0.3)).tolist() == [200.0, 100.0, 0.0]
    assert M.band_mean(frames, (0.7, 1.0)).tolist() == [0.0, 100.0, 250.0]


def test_recolour_summary_medians_and_ratio():
    model = [{"sky": 0.1, "ground": 0.2}, {"sky": 0.3, "ground": float("nan")}]
    sim = [{"sky": 0.5, "ground": 0.6}, {"sky": 0.7, "ground": 0.4}]
    out = M.reference_recolour_summary(model, sim)
    assert out["reference_recolour"] == pytest.approx(0.2)  # nan (no line) left out
    assert out["reference_recolour_sim"] == pytest.approx(0.55)
    assert out["reference_recolour_ratio"] == pytest.approx(0.2 / 0.55)
    assert out["reference_recolour_by_band"] == {"sky": pytest.approx(0.2), "ground": 0.2}
    assert out["reference_recolour_sim_by_band"]["ground"] == pytest.approx(0.5)
    assert out["reference_recolour_cases"] == 2
    lo, hi = out["reference_recolour_ratio_ci"]
    assert lo <= out["reference_recolour_ratio"] <= hi
    still = M.reference_recolour_summary(model, [{"sky": 0.0, "ground": -0.1}] * 2)
    assert still["reference_recolour_ratio"] is None  # a simulator that did not move: no ratio
