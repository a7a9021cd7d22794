import json

import numpy as np
import pytest

from engine.data import GenerateConfig, WindowReader, generate
from engine.data.generate import ManifestMismatch
from engine.data.layout import finished_shards
from engine.data.stats import dataset_stats
from engine.sim import EVENT_NAMES, LABEL_DTYPE, parse_script, run_script

CONFIG = GenerateConfig(episodes=4, frames=40, resolution=64, episodes_per_shard=2, base_seed=5)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim")
    result = generate(root, CONFIG, workers=1, progress=False)
    assert result["episodes_written"] == 4 and result["shards_written"] == 2
    return root


def test_generated_shards_hold_every_frame_with_labels(dataset):
    shards = finished_shards(dataset)
    assert [p.name for p in shards] == ["shard_00000", "shard_00001"]
    frames = np.load(shards[0] / "frames.npy", mmap_mode="r")
    audio = np.load(shards[0] / "audio.npy", mmap_mode="r")
    labels = np.load(shards[0] / "labels.npy", mmap_mode="r")
    assert frames.shape == (80, 64, 64, 3) and frames.dtype == np.uint8
    assert audio.shape == (80, 800) and audio.dtype == np.int16
    assert labels.dtype == LABEL_DTYPE
    assert list(labels["frame_index"]) == list(range(40)) * 2
    assert frames[0].std() > 5 and np.abs(audio).max() > 100


def test_episode_scripts_in_the_shard_replay_the_frames_exactly(dataset):
    shard = finished_shards(dataset)[1]
    meta = json.loads((shard / "meta.json").read_text())
    episode = meta["episodes"][1]
    frames = np.load(shard / "frames.npy", mmap_mode="r")
    audio = np.load(shard / "audio.npy", mmap_mode="r")
    replay = list(run_script(parse_script(episode["script"]), resolution=64))
    rows = slice(episode["row"], episode["row"] + episode["frames"])
    assert np.array_equal(np.stack([f.rgb for f in replay]), frames[rows])
    assert np.array_equal(np.stack([f.audio for f in replay]), audio[rows])


def test_reader_windows_are_consistent_and_stay_inside_episodes(dataset):
    reader = WindowReader(dataset, window=8)
    assert reader.episodes == 4 and len(reader) == 4 * (40 - 8 + 1)
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = reader.sample(rng)
        assert w.frames.shape == (8, 64, 64, 3) and w.audio.shape == (8, 800)
        assert list(w.labels["frame_index"]) == list(range(w.start, w.start + 8))
        assert np.array_equal(w.keys, w.labels["keys"])
        for text, event in zip(w.prompts, w.events, strict=True):
            if event >= 0:
                assert text and EVENT_NAMES[event]
    whole = reader.episode(2)
    window = reader.window_at(2 * (40 - 8 + 1) + 5)  # episode 2, start 5
    assert window.episode == 2 and np.array_equal(window.frames, whole.frames[5:13])


def test_reader_batches_stack_for_training(dataset):
    batch = WindowReader(dataset, window=4).batch(6, np.random.default_rng(1))
    assert batch["frames"].shape == (6, 4, 64, 64, 3)
    assert batch["camera"].shape == (6, 4, 2) and batch["audio_features"].shape == (6, 4, 2)
    assert batch["reference"].shape == (6, 64, 64, 3) and batch["prompts"].shape == (6, 4)


def test_generation_resumes_after_an_interruption(tmp_path):
    generate(tmp_path, CONFIG, workers=1, progress=False)
    first, second = finished_shards(tmp_path)
    stamp = (first / "frames.npy").stat().st_mtime_ns
    reference = np.load(second / "frames.npy")
    # Simulate a crash mid-shard: the shard is gone, a half-written temp folder remains.
    second.rename(tmp_path / "shard_00001.tmp")
    result = generate(tmp_path, CONFIG, workers=1, progress=False)
    assert result["shards_skipped"] == 1 and result["shards_written"] == 1
    assert (first / "frames.npy").stat().st_mtime_ns == stamp  # finished shard untouched
    assert not list(tmp_path.glob("*.tmp"))
    assert np.array_equal(np.load(second / "frames.npy"), reference)  # deterministic redo


def test_generation_refuses_to_mix_settings(tmp_path):
    generate(tmp_path, CONFIG, workers=1, progress=False)
    with pytest.raises(ManifestMismatch):
        generate(
            tmp_path,
            GenerateConfig(episodes=4, frames=41, resolution=64, episodes_per_shard=2, base_seed=5),
            progress=False,
        )


def test_parallel_generation_matches_serial(tmp_path, dataset):
    generate(tmp_path, CONFIG, workers=2, progress=False)
    for a, b in zip(finished_shards(tmp_path), finished_shards(dataset), strict=True):
        assert np.array_equal(np.load(a / "frames.npy"), np.load(b / "frames.npy"))


def test_stats_report_the_dataset_size(dataset):
    stats = dataset_stats(dataset)
    assert stats["episodes"] == 4 and stats["frames"] == 160 and stats["resolution"] == 64
    assert stats["bytes"] > 160 * 64 * 64 * 3
