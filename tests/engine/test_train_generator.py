"""Generator training pieces on synthetic latent episodes (no data set, no tokenizer run)."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.world import INPUT_FEATURES, WorldModel, WorldModelConfig
from engine.sim.labels import empty_labels
from engine.train.bank import MAX_TEXT_MEMORY, LatentBank
from engine.train.generator import flow_loss, make_memory, own_context
from engine.train.latents import LatentEpisode
from engine.train.plots import line_plot


def episode(
    frames: int = 20, prompt_rows=(3, 12), seed: int = 0, image: bool = False
) -> LatentEpisode:
    g = torch.Generator().manual_seed(seed)
    return LatentEpisode(
        video=torch.randn(frames, 8, 16, 16, generator=g).half(),
        audio=torch.randn(frames, 32, generator=g),
        inputs=torch.zeros(frames, INPUT_FEATURES),
        prompt_rows=list(prompt_rows),
        prompt_texts=[f"text {r}" for r in prompt_rows],
        theme=1,
        image=torch.ones(128) if image else None,
        labels=empty_labels(frames),
    )


def table() -> dict[str, np.ndarray]:
    return {f"text {r}": np.full(384, r / 10, np.float32) for r in (3, 5, 7, 9, 12)}


def small_model(context: int = 3) -> WorldModel:
    return WorldModel(WorldModelConfig(width=32, depth=1, heads=2, context=context))


def test_memory_holds_the_last_sentences_typed_before_the_window_ends():
    bank = LatentBank.build([episode(), episode(prompt_rows=(3, 5, 7, 9, 12), seed=1)], table())
    w = bank.windows(torch.tensor([0, 10, 20 + 10]), window=5)
    # window [0, 5) of episode 0: only the prompt at 3
    assert w["mem_valid"][0].sum() == 1 and 3 in w["mem_arrival"][0][w["mem_valid"][0]].tolist()
    # window [10, 15) of episode 0: prompts at 3 and 12
    assert sorted(w["mem_arrival"][1][w["mem_valid"][1]].tolist()) == [3, 12]
    # episode 1 typed five sentences by frame 14: memory keeps the last MAX_TEXT_MEMORY
    assert sorted(w["mem_arrival"][2][w["mem_valid"][2]].tolist()) == [5, 7, 9, 12]
    assert MAX_TEXT_MEMORY == 4
    row = w["mem_arrival"][2].tolist().index(12)
    assert torch.allclose(w["mem_text"][2, row], torch.full((384,), 1.2))
    memory = make_memory(small_model(), w)
    assert memory.tokens.shape == (3, 2 + MAX_TEXT_MEMORY, 32)
    assert memory.valid[:, 0].all() and not memory.valid[:, 1].any()  # theme; no image


def test_windows_stay_inside_episodes_and_carry_fresh_text():
    short = episode(frames=12, prompt_rows=(3,), seed=1, image=True)
    bank = LatentBank.build([episode(), short], table())
    starts = bank.sample(200, 6, torch.Generator().manual_seed(0), first_frame_share=0.3)
    ep = bank.episode[starts]
    assert torch.all(bank.local[starts] + 6 <= bank.lengths[ep])
    assert (bank.local[starts] == 0).float().mean() > 0.25  # cold starts are trained
    w = bank.windows(torch.tensor([10, 20]), 6)
    assert w["frame"][0].tolist() == list(range(10, 16))
    assert torch.equal(w["prev"][0, 0], bank.video[9].float())  # previous frame, not zeros
    assert torch.equal(w["prev"][0, 1], w["video"][0, 0])
    assert w["prev"][1, 0].abs().sum() == 0  # an episode's first frame has no previous one
    assert w["text"][0, 2].abs().sum() > 0 and w["text"][0, 1].abs().sum() == 0
    assert w["has_image"].tolist() == [False, True]


def test_a_reference_image_counts_from_the_frame_it_arrived():
    late = episode(frames=20, seed=2, image=True)
    late.labels["image_event"][9] = True  # the picture arrived at frame 9, not with the world
    bank = LatentBank.build([episode(image=True), late], table())
    assert bank.image_from.tolist() == [0, 9]
    w = bank.windows(torch.tensor([0, 20 + 6]), 6)  # [0, 6) of the first; [6, 12) of the late
    assert w["frame_has_image"][0].all() and w["has_image"][0]
    assert w["frame_has_image"][1].tolist() == [False] * 3 + [True] * 3
    assert w["has_image"][1]  # at the window's last frame
    before = bank.windows(torch.tensor([20 + 2]), 6)  # [2, 8): the picture has not come yet
    assert not before["frame_has_image"].any() and not before["has_image"].any()
    # windows whose predicted frames (positions >= 4 of 6) see the picture arrive
    starts = bank.image_event_starts(6, first=4)
    assert sorted((starts - 20).tolist()) == [4, 5]
    assert len(bank.image_event_starts(6, first=6)) == 0


def test_own_context_predicts_every_frame_without_gradients():
    torch.manual_seed(0)
    model = small_model()
    bank = LatentBank.build([episode()], table())
    w = bank.windows(torch.tensor([2, 8]), 5)
    video, audio = own_context(model, w, make_memory(model, w), rounds=2, steps=2)
    assert video.shape == w["video"].shape and audio.shape == w["audio"].shape
    assert not video.requires_grad
    assert not torch.allclose(video, w["video"])


def test_flow_loss_trains_with_and_without_own_context():
    for own_share in (0.0, 0.5):
        torch.manual_seed(0)
        model = small_model()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        bank = LatentBank.build([episode()], table())
        gen = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(15):
            w = bank.windows(bank.sample(4, 4, gen), 4)
            loss, video, audio = flow_loss(model, w, 0.5, own_share=own_share)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert np.isfinite(losses).all()
        assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_line_plot_keeps_a_series_that_goes_below_zero(tmp_path):
    """A negative log-likelihood must be drawn on a linear axis, not dropped by a log one."""
    from engine.train.plots import all_positive

    crossing = {"loss": [(0, 1.0), (10, 0.5)], "nll": [(0, 0.2), (10, -0.5)]}
    assert not all_positive(crossing)
    assert all_positive({"loss": crossing["loss"]})
    line_plot(tmp_path / "nll.png", crossing, "nll")
    assert (tmp_path / "nll.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_line_plot_writes_png(tmp_path):
    line_plot(tmp_path / "loss.png", {"loss": [(0, 1.0), (10, 0.5), (20, 0.25)]}, "loss")
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_full_context_mask_scores_only_positions_with_a_run_time_context():
    from engine.train.generator import full_context_mask

    mid = torch.arange(10, 18)[None]  # a window from the middle of an episode
    opening = torch.arange(0, 8)[None]  # a window that opens its episode
    assert full_context_mask(mid, 5)[0].tolist() == [False] * 5 + [True] * 3
    assert full_context_mask(opening, 5).all()
    # frame 2 of an episode: position p sees p frames, the episode offers p + 2 (up to 5)
    assert full_context_mask(torch.arange(2, 10)[None], 5)[0].tolist() == ([False] * 5 + [True] * 3)


def test_error_bank_histories_replace_the_context_and_only_later_frames_are_scored():
    torch.manual_seed(0)
    model = small_model(context=3)
    bank = LatentBank.build([episode()], table())
    w = bank.windows(torch.tensor([2, 8]), 6)
    rows = torch.tensor([False, True])
    history = torch.randn(2, 3, 8, 16, 16)
    audio = torch.randn(2, 3, 32)

    def loss(hist: torch.Tensor) -> float:
        torch.manual_seed(1)
        return flow_loss(model, w, 0.5, bad_context=(hist, audio, rows))[0].item()

    # A changed bad history changes the loss of the later frames (it is their context) ...
    assert loss(history) != loss(history * 3)
    # ... but a different history for a window not chosen from the bank changes nothing.
    other = history.clone()
    other[0] *= 3
    assert loss(history) == loss(other)


def test_stratified_error_bank_keeps_every_error_quartile():
    from engine.train.errorbank import stratified

    errors = torch.rand(100, generator=torch.Generator().manual_seed(1)) ** 6  # mostly small
    picks = stratified(errors, 8, buckets=4, generator=torch.Generator().manual_seed(0))
    rank = torch.argsort(torch.argsort(errors))[picks]
    assert len(set(picks.tolist())) == 8
    assert torch.bincount(rank // 25, minlength=4).tolist() == [2, 2, 2, 2]


def test_seam_ratio_finds_a_latent_tile_mosaic():
    from engine.eval.metrics import seam_ratio

    rng = np.random.default_rng(0)
    tiles = rng.integers(0, 255, (2, 4, 4, 3)).astype(np.uint8)
    mosaic = tiles.repeat(32, axis=1).repeat(32, axis=2)
    mosaic = np.clip(mosaic.astype(int) + rng.integers(-3, 4, mosaic.shape), 0, 255)
    smooth = np.clip(rng.normal(128, 20, (2, 128, 128, 3)), 0, 255)
    assert seam_ratio(mosaic.astype(np.uint8)) > 5
    assert 0.9 < seam_ratio(smooth.astype(np.uint8)) < 1.1


def test_fine_tunes_write_a_complete_weights_folder_with_only_the_tuned_part_changed(tmp_path):
    from engine.model.audio_ae import AudioAE, AudioAEConfig
    from engine.model.checkpoint import load_checkpoint, save_checkpoint
    from engine.model.video_ae import VideoAE, VideoAEConfig
    from engine.train.finetune import FinetuneConfig
    from engine.train.weights_folder import write_weights

    base = tmp_path / "base"
    video = VideoAE(VideoAEConfig(stem=8, widths=(8, 8, 8)))
    save_checkpoint(base / "video_ae.pt", video, half=True)
    save_checkpoint(base / "audio_ae.pt", AudioAE(AudioAEConfig(width=8)), half=True)
    save_checkpoint(base / "world.pt", small_model(), half=True)
    (base / "particles.pt").write_bytes(b"the rain layer")
    tuned = small_model()
    with torch.no_grad():
        tuned.video_out.bias.fill_(0.5)
    dest = write_weights(FinetuneConfig(weights=str(base)), tmp_path / "run", world=tuned, step=7)
    names = ["audio_ae.pt", "particles.pt", "video_ae.pt", "world.pt"]
    assert sorted(p.name for p in dest.iterdir()) == names
    world = load_checkpoint(dest / "world.pt", WorldModel, WorldModelConfig)
    assert torch.allclose(world.video_out.bias, torch.full_like(world.video_out.bias, 0.5))
    assert (dest / "video_ae.pt").read_bytes() == (base / "video_ae.pt").read_bytes()
    assert tuned.training  # the copy was written; the model in training was left as it was


def test_replayed_histories_start_their_window_k_frames_before_the_true_continuation():
    from engine.train.errorbank import ErrorBank, replay_batch

    bank = LatentBank.build([episode(), episode(seed=1)], table())
    n = 6
    errors = ErrorBank(
        video=torch.randn(n, 3, 8, 16, 16).half(),
        audio=torch.randn(n, 3, 32),
        row=torch.tensor([5, 10, 14, 19, 25, 38]),
        horizon=torch.full((n,), 5),
        latent_mse=torch.rand(n),
        brightness=torch.rand(n),
        sharpness=torch.rand(n),
        seams=torch.rand(n),
    )
    starts, video, audio = replay_batch(errors, bank, 50, 6, torch.Generator().manual_seed(0))
    rows = starts + 3
    # 19 and 38 end their episodes: no 3 true frames follow them
    assert set(rows.tolist()) <= {5, 10, 14, 25}
    assert torch.all(bank.local[starts] + 6 <= bank.lengths[bank.episode[starts]])
    for r, v in zip(rows.tolist(), video, strict=True):
        assert torch.equal(v, errors.video[errors.row.tolist().index(r)].float())


def test_latent_cache_round_trips_without_pickled_code_and_knows_its_tokenizers(tmp_path):
    from engine.model.checkpoint import atomic_save
    from engine.train.latents import read_latent_cache

    episodes = [episode(seed=1), episode(seed=2, image=True)]
    episodes[1].labels["theme"][:] = 3
    atomic_save(
        {
            "tokenizers": "abc",
            "episodes": [e.to_plain() for e in episodes],
            "text": {t: torch.from_numpy(v) for t, v in table().items()},
        },
        tmp_path / "cache.pt",
    )
    back, text = read_latent_cache(tmp_path / "cache.pt", "abc")
    assert torch.equal(back[1].video, episodes[1].video) and back[1].image is not None
    assert back[0].prompt_texts == episodes[0].prompt_texts
    assert (back[1].labels == episodes[1].labels).all() and back[1].labels["theme"][0] == 3
    assert np.array_equal(text["text 3"], table()["text 3"])
    assert read_latent_cache(tmp_path / "cache.pt", "other tokenizers") is None
    torch.save({"episodes": episodes}, tmp_path / "old.pt")  # pickled dataclasses: re-encode
    assert read_latent_cache(tmp_path / "old.pt", "abc") is None


def test_audio_only_fine_tune_moves_only_the_audio_projections():
    from engine.train.finetune import trained_parameters

    model = small_model()
    params = trained_parameters(model, audio_only=True)
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert names == {"audio_in.weight", "audio_in.bias", "audio_out.weight", "audio_out.bias"}
    assert len(params) == 4 and len(trained_parameters(small_model(), False)) > 4


def test_the_prompt_sheet_session_types_its_sentences_on_their_frames():
    from engine.sim.constants import KEY_BITS
    from engine.train.measure import SHEET_PROMPTS, scripted_inputs

    plain = scripted_inputs(1000)
    typed = scripted_inputs(1000, SHEET_PROMPTS)
    assert [t for t, inp in enumerate(typed) if inp.prompts] == [100, 500, 900]
    assert typed[500].prompts == ("make it night",) and not any(i.prompts for i in plain)
    assert [i.keys for i in typed] == [i.keys for i in plain]  # the walk is the same
    assert plain[0].keys == KEY_BITS["W"] and not plain[100].prompts  # nothing leaked back


def _walk_episode(steps: list[float]):
    """A SimEpisode holding W every frame whose player moves `steps[t]` along x at frame t,
    starting beside the map's wrap so a step crosses it."""
    from engine.eval.episodes import SimEpisode
    from engine.sim import FrameInputs, WorldSpec

    n = len(steps)
    ep = SimEpisode(WorldSpec(0, "ember_forest", 128), [FrameInputs.hold("W")] * n)
    labels = empty_labels(n)
    labels["keys"] = FrameInputs.hold("W").keys
    labels["pose_x"] = (255.9 + np.cumsum(steps)) % 256
    labels["pose_y"] = 10.0
    ep.labels, ep.frames = labels, np.zeros((n, 8, 8, 3), np.uint8)
    return ep


def test_stopped_share_counts_forward_steps_the_simulator_did_not_take():
    from engine.spec import WALK_SPEED
    from engine.train.measure import stopped_share

    walked = [WALK_SPEED] * 6  # crosses the wrap at 256 without reading as a jump
    assert stopped_share(_walk_episode(walked)) == 0.0
    stuck = [WALK_SPEED] * 3 + [0.0, 0.05, 0.0]  # stopped, then sliding a little, stopped
    assert stopped_share(_walk_episode(stuck)) == 0.6  # of the 5 steps after the first frame
    assert stopped_share(_walk_episode(stuck), start=4) == 1.0


def test_sheet_figures_tell_a_dissolved_session_from_the_world():
    from engine.train.measure import sheet_figures

    rng = np.random.default_rng(0)
    ep = _walk_episode([0.25] * 8)
    truth = rng.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8)
    same = sheet_figures(truth, truth, ep, 0)
    assert same["brightness_drift"] == 0.0 and same["colour_spread_late"] == 1.0
    field = np.full_like(truth, 40)
    field[:4] = truth[:4]  # the first half still the world, the second half one colour
    dissolved = sheet_figures(field, truth, ep, 0)
    assert dissolved["colour_spread_late"] < 0.001 and dissolved["sharpness_late"] < 0.001
    assert dissolved["brightness_drift"] > 0.1 and dissolved["sim_stopped_share"] == 0.0
