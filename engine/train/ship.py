"""Copy a finished run's weights into engine/weights as fp16 files (each must stay < 15 MB)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.model.audio_ae import AudioAE, AudioAEConfig
from engine.model.checkpoint import atomic_save, load_checkpoint, load_payload, save_checkpoint
from engine.model.sentence_snap import SNAP_FILE, SentenceSnap
from engine.model.video_ae import VideoAE, VideoAEConfig
from engine.model.world import WorldModel, WorldModelConfig
from engine.runtime.openings import OPENINGS_FILE

from .openings import build_openings

WEIGHTS = Path(__file__).resolve().parent.parent / "weights"
MAX_BYTES = 15 * 1024 * 1024


def ship(run: str | Path, dest: Path = WEIGHTS) -> Path:
    run = Path(run)
    ckpt = load_payload(run / "world.pt")
    tokenizers = Path(ckpt["train"]["tokenizers"])
    parts = {
        "video_ae.pt": load_checkpoint(tokenizers / "video_ae_final.pt", VideoAE, VideoAEConfig),
        "audio_ae.pt": load_checkpoint(tokenizers / "audio_ae_final.pt", AudioAE, AudioAEConfig),
        "world.pt": load_checkpoint(None, WorldModel, WorldModelConfig, ckpt=ckpt),
    }
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, model in parts.items():
        extra = {"step": ckpt["step"], "train": ckpt["train"]} if name == "world.pt" else {}
        save_checkpoint(dest / name, model, extra, half=True)
        sizes[name] = (dest / name).stat().st_size
        if sizes[name] >= MAX_BYTES:
            raise ValueError(f"{name} is {sizes[name]} bytes; shipped files must be < 15 MB")
    write_openings(dest)
    sizes[OPENINGS_FILE] = (dest / OPENINGS_FILE).stat().st_size
    print(json.dumps({"shipped": str(dest), "bytes": sizes, "generator_step": ckpt["step"]}))
    return dest


def set_sampler_steps(steps: int, weights: Path = WEIGHTS) -> Path:
    """Change the shipped generator's default sampler steps (a run-time knob, not trained)."""
    if steps < 1:
        raise ValueError("sampler steps must be >= 1")
    return _set_config(weights, {"sampler_steps": steps})


def set_guidance(text: float, image: float, weights: Path = WEIGHTS, text_frames: int = 0) -> Path:
    """Set a conv generator's run-time text and image guidance (1 = off; not trained); text
    guidance lasts `text_frames` frames after a sentence (0 = while any is remembered)."""
    if text < 0 or image < 0:
        raise ValueError("guidance weights must be >= 0 (1 turns guidance off)")
    if text_frames < 0:
        raise ValueError("the text guidance's frames must be >= 0 (0 = while remembered)")
    return _set_config(
        weights,
        {
            "text_guidance": float(text),
            "image_guidance": float(image),
            "text_guidance_frames": int(text_frames),
        },
        needs=(lambda c: c.get("arch") == "conv", "convolutional world model (guidance is for it)"),
    )


def set_sentence_snap(
    weights: Path = WEIGHTS,
    on: bool = True,
    floor: float | None = None,
    neighbours: int | None = None,
) -> Path:
    """Write (or with `on` False remove) the weights' sentence snap: every training
    paraphrase's embedding and its event, so a typed sentence reaches the model as the training
    sentences it resembles and the scene edit knows what it asks for
    (engine/model/sentence_snap.py; its defaults where a setting is None)."""
    path = Path(weights) / SNAP_FILE
    if not on:
        path.unlink(missing_ok=True)
        return path
    from .latents import training_events, training_text_table

    texts = training_text_table()
    snap = SentenceSnap(np.stack(list(texts.values())), events=training_events(list(texts)))
    snap = dataclasses.replace(
        snap,
        floor=snap.floor if floor is None else floor,
        neighbours=snap.neighbours if neighbours is None else neighbours,
    )
    return snap.save(path)


def set_code_draws(
    weights: Path = WEIGHTS,
    temperature: float | None = None,
    blur: float | None = None,
    memory: float | None = None,
    keep: float | None = None,
    residual_temperature: float | None = None,
    residual_mean: bool | None = None,
    keep_walking: bool | None = None,
) -> Path:
    """Set a code model's run-time draws: the temperature (0 = always the likeliest code), how
    its random numbers are shared across cells (`blur`) and frames (`memory`, in [0, 1)),
    see latent_codes.CodeDraws, and the nats `keep` added to each cell's code as shown
    (conv_world.kept_logits) and whether that keep also holds while the player walks
    (`keep_walking`, for the walk warp's moved ground); for a residual code model its second
    code's temperature or whether it is the expected residual (`residual_mean`). Settings
    left None keep their value."""
    if temperature is not None and temperature < 0:
        raise ValueError("the code temperature must be >= 0")
    if blur is not None and blur < 0:
        raise ValueError("the code noise blur must be >= 0 cells")
    if memory is not None and not 0 <= memory < 1:
        raise ValueError("the code noise memory must be in [0, 1)")
    if keep is not None and keep < 0:
        raise ValueError("the code keep must be >= 0 nats")
    if residual_temperature is not None and residual_temperature < 0:
        raise ValueError("the residual temperature must be >= 0")
    given = {
        "code_temperature": temperature,
        "code_noise_blur": blur,
        "code_noise_memory": memory,
        "code_keep": keep,
        "residual_temperature": residual_temperature,
    }
    values: dict[str, float | bool] = {k: float(v) for k, v in given.items() if v is not None}
    if residual_mean is not None:
        values["residual_mean"] = residual_mean
    if keep_walking is not None:
        values["keep_walking"] = keep_walking
    if not values:
        raise ValueError("nothing to set: give a temperature, a blur, a memory or a keep")
    residual = residual_temperature is not None or residual_mean is not None
    if residual:
        needs = (lambda c: bool(c.get("residual_codes")), "residual code model")
    else:
        needs = (lambda c: bool(c.get("codes")), "code model (code draws are for one)")
    return _set_config(weights, values, needs=needs)


def set_camera_warp(
    on: bool = True,
    weights: Path = WEIGHTS,
    whole_cells: bool = False,
    view_memory: bool = False,
    walk: bool = False,
) -> Path:
    """Make a conv model read its history moved by each frame's camera turn and tilt (or stop
    it); a session's warp may move whole cells only (the rest carried to the next frame),
    remember what each direction looked like (engine/model/view_memory.py) and spread the
    ground out with each step (conv_world.walk_flow). None of it has weights of its own, so
    trained weights take it as they are (conv_world.camera_shift; MODEL.md v10-v12 measure
    it)."""
    if not on and (whole_cells or view_memory or walk):
        raise ValueError(
            "whole cells, the view memory and the walk are settings of the camera warp"
        )
    return _set_config(
        weights,
        {
            "camera_warp": bool(on),
            "warp_whole_cells": bool(whole_cells),
            "view_memory": bool(view_memory),
            "walk_warp": bool(walk),
        },
        needs=(lambda c: c.get("arch") == "conv", "convolutional world model (the warp is for it)"),
    )


def _set_config(
    weights: Path,
    values: dict[str, float | bool],
    needs: tuple[Callable[[dict], bool], str] | None = None,
) -> Path:
    """Rewrite run-time settings in a weights folder's world.pt config; `needs` (a test of the
    config, and the generator a file failing it does not hold) guards settings that only one
    kind of generator reads."""
    path = weights / "world.pt"
    ckpt = load_payload(path)
    if needs is not None and not needs[0](ckpt["config"]):
        raise ValueError(f"{path} holds no {needs[1]}")
    ckpt["config"].update(values)
    atomic_save(ckpt, path)
    return path


def write_openings(weights: Path = WEIGHTS) -> Path:
    """(Re)build the opening keyframes for the tokenizers in `weights` (they must match)."""
    video = load_checkpoint(weights / "video_ae.pt", VideoAE, VideoAEConfig)
    audio = load_checkpoint(weights / "audio_ae.pt", AudioAE, AudioAEConfig)
    world = load_payload(weights / "world.pt")
    openings = build_openings(video, audio, context=world["config"]["context"])
    openings.save(weights / OPENINGS_FILE)
    return weights / OPENINGS_FILE
