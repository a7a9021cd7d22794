"""Checkpoints: weights plus the dataclass config they were built from (nanoGPT style).

save_checkpoint(path, model, extra={...}, half=True)
model = load_checkpoint(path, VideoAE, VideoAEConfig)   # Config(**ckpt["config"])
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def save_checkpoint(
    path: str | Path, model: nn.Module, extra: dict[str, Any] | None = None, half: bool = False
) -> None:
    """Write atomically (tmp + rename) so a killed run never leaves a torn checkpoint."""
    state = model.state_dict()
    if half:
        state = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    config = getattr(model, "config", None)
    if config is None or not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"{type(model).__name__} has no dataclass `config` to store")
    payload = {"config": dataclasses.asdict(config), "model": state, **(extra or {})}
    atomic_save(payload, path)


def atomic_save(payload: Any, path: str | Path) -> None:
    """torch.save to a temporary file, then rename: a killed process never leaves a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def load_checkpoint(
    path: str | Path | None,
    model_cls: type[M],
    config_cls: type,
    ckpt: dict[str, Any] | None = None,
) -> M:
    """Rebuild the model from the config stored in the checkpoint; weights come back as fp32.
    Checkpoints hold tensors and plain values only, so they load with weights_only=True."""
    if ckpt is None:
        if path is None:
            raise ValueError("load_checkpoint needs a path or an already loaded ckpt")
        ckpt = load_payload(path)
    config = config_cls(**_tuples(config_cls, ckpt["config"]))
    model = model_cls(config)
    model.load_state_dict(
        {k: v.float() if v.is_floating_point() else v for k, v in ckpt["model"].items()}
    )
    return model.eval()


def load_payload(path: str | Path) -> dict[str, Any]:
    """A checkpoint's contents, on the CPU, without running pickled code."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _tuples(config_cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """asdict() turns tuples into lists; give tuple-typed fields their tuples back."""
    out = dict(values)
    for f in dataclasses.fields(config_cls):
        if f.name in out and isinstance(out[f.name], list) and "tuple" in str(f.type):
            out[f.name] = tuple(out[f.name])
    return out
