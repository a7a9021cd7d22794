"""The runtime API: chunks, timestamps, dynamic chunk lengths, event handling and errors."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from engine.model.audio_ae import AudioAE, AudioAEConfig
from engine.model.checkpoint import save_checkpoint
from engine.model.video_ae import VideoAE, VideoAEConfig
from engine.model.world import WorldModel, WorldModelConfig
from engine.runtime import Action, AudioIn, EventError, Image, Prompt, World, parse_event
from engine.runtime.session import LONG_CHUNK_FRAMES


class FakeText:
    """Deterministic stand-in for MiniLM (loading the real one takes ~10 s)."""

    def encode(self, texts):
        return np.stack(
            [
                np.frombuffer(hashlib.sha256(t.encode()).digest() * 48, np.uint8)[:384].astype(
                    np.float32
                )
                / 255
                for t in texts
            ]
        )


def tiny_world() -> World:
    torch.manual_seed(0)
    video = VideoAE(VideoAEConfig(stem=8, widths=(8, 8, 8)))
    audio = AudioAE(AudioAEConfig(width=8))
    model = WorldModel(WorldModelConfig(width=32, depth=1, heads=2, context=2, sampler_steps=2))
    return World(video, audio, model, text_encoder=FakeText())


@pytest.fixture(scope="module")
def world():
    return tiny_world()


def test_chunk_shapes_dtypes_and_timestamps(world):
    session = world.start({"seed": 3, "theme": "frost_valley"})
    first = session.next_chunk()
    second = session.next_chunk()
    assert first.video.shape == (1, 128, 128, 3) and first.video.dtype == np.uint8
    assert first.audio.shape == (800,) and first.audio.dtype == np.int16
    assert first.sample_rate == 16_000 and first.fps == 20
    assert first.pts.tolist() == [0.0] and second.pts.tolist() == [0.05]
    assert second.first_frame == 1 and session.frame_index == 2


def test_action_answered_next_frame_sentence_opens_long_chunk(world):
    session = world.start({"seed": 1, "theme": "ember_forest"})
    action_id = session.push(Action(keys=("W", "LEFT"), yaw=0.1))
    chunk = session.next_chunk()
    assert len(chunk.pts) == 1 and chunk.answered == [action_id]
    prompt_id = session.push(Prompt("make it rain"))
    chunk = session.next_chunk()
    assert len(chunk.pts) == LONG_CHUNK_FRAMES and chunk.answered == [prompt_id]
    assert chunk.audio.shape == (LONG_CHUNK_FRAMES * 800,)
    assert len(session.next_chunk(max_frames=1).pts) == 1
    assert len(session.rollout.texts) == 1  # the sentence persists in memory


def test_same_seed_same_inputs_same_output(world):
    outs = []
    for _ in range(2):
        s = world.start({"seed": 9, "theme": "misty_coast"})
        s.push({"kind": "action", "keys": ["W"]})
        s.push({"kind": "audio", "loudness": 0.7, "onset": True})
        outs.append(np.concatenate([s.next_chunk().video for _ in range(3)]))
    assert np.array_equal(outs[0], outs[1])


def test_image_event_and_reference_image_in_spec(world):
    palette = {"sky": [10, 20, 200], "foliage": [0, 200, 0], "ground": [120, 80, 40]}
    session = world.start({"seed": 2, "theme": "ember_forest", "reference_image": palette})
    assert len(session.next_chunk().pts) == LONG_CHUNK_FRAMES
    assert session.rollout.image is not None
    session.push(Image(np.zeros((32, 48, 3), np.uint8)))
    assert len(session.next_chunk().pts) == LONG_CHUNK_FRAMES


def test_audio_samples_become_features():
    loud, onset = AudioIn(samples=(np.ones(800) * 8000).astype(np.int16)).features(0.0)
    assert 0.9 <= loud <= 1.0 and onset
    quiet, onset = AudioIn(samples=np.zeros(800, np.int16)).features(0.0)
    assert quiet == 0.0 and not onset


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"kind": "action", "keys": ["Q"]}, "unknown"),
        ({"kind": "action", "keys": "W"}, "list of key names"),
        ({"kind": "action", "keys": [], "yaw": float("nan")}, "yaw"),
        ({"kind": "action", "keys": [], "pitch": 10.0}, "pitch"),
        ({"kind": "prompt", "text": "   "}, "non-empty"),
        ({"kind": "prompt", "text": "x" * 600}, "longer"),
        ({"kind": "audio", "loudness": 1.5}, "loudness"),
        ({"kind": "audio", "loudness": 0.5, "onset": "yes"}, "onset"),
        ({"kind": "teleport"}, "kind"),
        ({"kind": "action", "keys": [], "speed": 2}, "unknown fields"),
        ("W", "dict"),
    ],
)
def test_bad_events_raise_a_clear_error(world, bad, message):
    session = world.start({"seed": 0})
    with pytest.raises(EventError, match=message):
        session.push(bad)


def test_bad_images_and_specs_and_closed_sessions(world):
    session = world.start({"seed": 0})
    with pytest.raises(EventError, match="uint8"):
        session.push(Image(np.zeros((8, 8), np.float32)))
    with pytest.raises(EventError, match="reference_image"):
        session.push(Image({"sky": [1, 2, 3]}))
    with pytest.raises(EventError, match="theme"):
        world.start({"seed": 0, "theme": "mars"})
    session.close()
    with pytest.raises(EventError, match="closed"):
        session.push(Action())
    with pytest.raises(EventError, match="closed"):
        session.next_chunk()


def test_parse_event_accepts_script_inputs():
    assert parse_event({"t": 5, "kind": "action", "keys": ["W"], "yaw": 0.2}) == Action(
        ("W",), 0.2, 0.0
    )
    assert parse_event({"kind": "prompt", "text": "make it rain"}) == Prompt("make it rain")


def test_load_from_weights_folder_and_missing_weights(tmp_path):
    w = tiny_world()
    save_checkpoint(tmp_path / "video_ae.pt", w.video_ae, half=True)
    save_checkpoint(tmp_path / "audio_ae.pt", w.audio_ae, half=True)
    save_checkpoint(tmp_path / "world.pt", w.model, half=True)
    loaded = World.load(tmp_path)
    loaded.text = FakeText()
    assert loaded.model.config == w.model.config
    assert loaded.start({"seed": 1}).next_chunk().video.shape == (1, 128, 128, 3)
    with pytest.raises(FileNotFoundError, match="world.pt"):
        World.load(tmp_path / "nowhere")


def test_sessions_open_from_their_themes_keyframes_when_the_weights_carry_them(tmp_path):
    from engine.runtime.openings import Openings
    from engine.train.openings import build_openings

    w = tiny_world()
    openings = build_openings(w.video_ae, w.audio_ae, context=2, per_theme=2)
    assert openings.video["frost_valley"].shape[:2] == (2, 2)
    assert openings.around["frost_valley"].shape == (2, 3, 8, 16, 16)  # the rest of a turn
    openings.save(tmp_path / "openings.pt")
    loaded = Openings.load(tmp_path / "openings.pt")
    assert torch.allclose(loaded.video["frost_valley"], openings.video["frost_valley"].half())
    assert torch.allclose(loaded.around["frost_valley"], openings.around["frost_valley"].half())
    opened = World(w.video_ae, w.audio_ae, w.model, FakeText(), openings=loaded)
    session = opened.start({"seed": 3, "theme": "frost_valley"})
    assert session.rollout.cache.frames == [-2, -1]  # history before frame 0
    assert session.frame_index == 0
    assert session.next_chunk().pts.tolist() == [0.0]
    other = opened.start({"seed": 4, "theme": "frost_valley"})  # the seed picks the spawn point
    assert not torch.equal(
        other.rollout.prev, opened.start({"seed": 3, "theme": "frost_valley"}).rollout.prev
    )
    assert opened.start({"seed": 3}, opening=False).rollout.cache.frames == []
    assert w.start({"seed": 3}).rollout.cache.frames == []  # no openings file: empty history


def test_openings_written_before_the_views_around_still_open_sessions(tmp_path):
    from engine.runtime.openings import Openings

    w = tiny_world()
    video, audio = torch.zeros(1, 2, 8, 16, 16), torch.zeros(1, 2, 32)
    torch.save(
        {"video": {"frost_valley": video}, "audio": {"frost_valley": audio}}, tmp_path / "o.pt"
    )
    old = Openings.load(tmp_path / "o.pt")
    assert old.pick("frost_valley", 5)[2] is None
    opened = World(w.video_ae, w.audio_ae, w.model, FakeText(), openings=old)
    assert opened.start({"seed": 5, "theme": "frost_valley"}).rollout.cache.frames == [-2, -1]


def tiny_code_model():
    """A tiny conv code model with the camera warp, whole-cell moves and a view memory."""
    from engine.model.conv_world import ConvWorldConfig, ConvWorldModel

    torch.manual_seed(0)
    cfg = ConvWorldConfig(
        width=16,
        width_low=16,
        cond_dim=16,
        context=2,
        codes=32,
        camera_warp=True,
        view_memory=True,
        warp_whole_cells=True,
    )
    model = ConvWorldModel(cfg).eval()
    model.codebook.copy_(torch.randn(32, 8))
    return model


def test_a_code_session_knows_the_whole_turn_from_its_opening_or_its_priming():
    from engine.runtime.openings import Openings

    w = tiny_world()
    model = tiny_code_model()
    around = torch.randn(1, 3, 8, 16, 16)
    openings = Openings(
        {"misty_coast": torch.randn(1, 2, 8, 16, 16)},
        {"misty_coast": torch.zeros(1, 2, 32)},
        {"misty_coast": around},
    )
    conv = World(w.video_ae, w.audio_ae, model, FakeText(), openings=openings)
    views = conv.start({"seed": 0, "theme": "misty_coast"}).rollout.views
    frame_rows = slice(views.pad, views.pad + 16)
    assert views.seen[frame_rows].all() and not views.seen[: views.pad].any()
    assert torch.equal(views.latent[:, frame_rows, 16:32], model.snap(around[0])[0])

    primed = conv.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    frames = np.zeros((2, 128, 128, 3), np.uint8)
    primed.prime(frames, around=np.full((3, 128, 128, 3), 200, np.uint8))
    assert primed.rollout.views.seen[frame_rows].all()
    with pytest.raises(EventError, match="around frames must be"):
        primed.prime(frames, around=np.zeros((3, 64, 64, 3), np.uint8))
    alone = conv.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    alone.prime(frames)  # no views around: only the frame's own quarter is known
    assert alone.rollout.views.seen[frame_rows].sum() == 16 * 16


def test_a_primed_session_counts_its_reference_picture_as_settled():
    """Known pictures already show the world with the picture: the code keep holds at once.
    A session opened without them, or given a picture later, recolours in the window."""
    from engine.model.conv_world import PICTURE_SETTLE_FRAMES

    w = tiny_world()
    conv = World(w.video_ae, w.audio_ae, tiny_code_model(), FakeText())
    palette = {"sky": [250, 20, 20], "foliage": [20, 250, 20], "ground": [20, 20, 250]}
    spec = {"seed": 0, "theme": "misty_coast", "reference_image": palette}

    def image_age(session) -> float:
        roll = session.rollout
        return float(roll._conditioning(np.zeros(13), roll.frame, None).image_age[0])

    primed = conv.start(spec, opening=False)
    primed.prime(np.zeros((2, 128, 128, 3), np.uint8))
    assert image_age(primed) >= PICTURE_SETTLE_FRAMES
    unprimed = conv.start(spec, opening=False)
    unprimed.next_chunk()  # the picture arrives with the first generated frame
    assert image_age(unprimed) < PICTURE_SETTLE_FRAMES
    primed.rollout.set_image(torch.zeros(primed.rollout.image.shape[1]))
    assert image_age(primed) == 0  # a picture given later recolours the world
    plain = conv.start({"seed": 0, "theme": "misty_coast"}, opening=False)
    plain.prime(np.zeros((2, 128, 128, 3), np.uint8))
    assert plain.rollout.image_since is None


def test_openings_that_do_not_match_the_tokenizers_are_refused():
    from engine.runtime.openings import Openings

    w = tiny_world()
    wrong = Openings(
        {"frost_valley": torch.zeros(1, 2, 8, 8, 8)}, {"frost_valley": torch.zeros(1, 2, 32)}
    )
    with pytest.raises(ValueError, match="rebuild"):
        World(w.video_ae, w.audio_ae, w.model, FakeText(), openings=wrong)


def test_projection_reencodes_generated_frames_and_shows_the_decoded_picture():
    world = tiny_world()
    world.model.config.project_context = True
    try:
        roll = world.new_rollout(0, seed=3)
        assert roll.project is world.video_ae
        z, _ = roll.generate(np.zeros(13, np.float32), 0)
        with torch.inference_mode():
            again = world.video_ae.encode(roll.last_frame.clamp(0, 1))[0]
        assert torch.allclose(z, again, atol=1e-5)  # the cached latent is on the AE manifold
        chunk = world.start(seed=1, theme="frost_valley").next_chunk()
        assert chunk.video.shape == (1, world.resolution, world.resolution, 3)
    finally:
        world.model.config.project_context = False
    assert world.new_rollout(0).project is None


class CountingText(FakeText):
    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return super().encode(texts)


def test_prepare_encodes_a_sentence_once_and_the_prepared_push_is_the_same_input():
    base = tiny_world()
    text = CountingText()
    world = World(base.video_ae, base.audio_ae, base.model, text_encoder=text)
    prepared_session, plain_session = (
        world.start({"seed": 4, "theme": "misty_coast"}) for _ in "ab"
    )
    prepared = prepared_session.prepare({"kind": "prompt", "text": "make it rain"})
    assert isinstance(prepared, Prompt) and prepared.text == "make it rain" and text.calls == 1
    prepared_session.push(prepared)
    assert text.calls == 1  # pushing the prepared sentence encodes nothing more
    plain_session.push(Prompt("make it rain"))
    assert text.calls == 2
    for session in (prepared_session, plain_session):
        session.next_chunk()
    assert torch.equal(prepared_session.rollout.texts[0], plain_session.rollout.texts[0])
    action = Action(keys=("W",))
    assert prepared_session.prepare(action) is action  # nothing slow to do
    with pytest.raises(EventError, match="prompt.text"):
        prepared_session.prepare({"kind": "prompt", "text": "  "})


def test_a_session_draws_its_particle_code_over_the_picture_and_nothing_else_changes():
    """The particle layer only draws over the decoded picture: with a rest code the frames are
    the same as without the layer, and after the sentence that turns it on, the frames
    differ only where its overlay drew."""
    from engine.model.particles import Particles, ParticlesConfig

    layer = Particles(ParticlesConfig(codes=2)).eval()
    with torch.no_grad():
        layer.style[2].bias[: layer.config.filters] = 1.0
    layer.set_codebook(torch.stack([torch.full((4,), -1.0), torch.ones(4)]))
    layer.drawn[0] = False  # code 0: a clear sky
    layer.next_code = lambda previous, text: 1 if text is not None else previous  # type: ignore
    plain, drawn = tiny_world(), tiny_world()
    drawn.particles = layer
    sessions = [w.start({"seed": 4}) for w in (plain, drawn)]
    first = [s.next_chunk().video for s in sessions]
    assert np.array_equal(first[0], first[1]) and sessions[1].particle_code == 0
    for s in sessions:
        s.push(Prompt("make it rain"))
    rainy = [s.next_chunk().video for s in sessions]
    assert sessions[1].particle_code == 1
    changed = np.any(rainy[0] != rainy[1], axis=-1).mean()
    assert 0.005 < changed < 0.9


def test_the_bench_can_measure_a_session_in_the_weather_a_sentence_asked_for():
    from engine.bench import bench

    world = tiny_world()
    typed = []
    start = world.start

    def spying_start(spec):
        session = start(spec)
        push = session.push
        session.push = lambda event: typed.append(event) or push(event)  # type: ignore
        return session

    world.start = spying_start  # type: ignore
    result = bench(world, frames=5, warmup=1, prompt="make it rain")
    assert result["prompt"] == "make it rain" and result["fps"] > 0
    assert isinstance(typed[0], Prompt) and typed[0].text == "make it rain"
