"""The eval's own judges, trained once on sim data and cached (small, fast, CPU).

- StateClassifier: one frame -> weather, time of day, fire, rainbow, creature mood, objects.
- InverseDynamics: two consecutive frames -> the action class between them.
- AudioEventClassifier: one frame of audio -> footstep / rain / fire / strong wind / creature call.
Each reports its own accuracy on held-out sim frames so a reader can trust it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from engine.model.audio_ae import log_spectrogram
from engine.sim.audio import STRONG_WIND, wind_gain
from engine.sim.constants import CREATURE_MOODS, KEY_BITS, OBJECT_KINDS, TIMES_OF_DAY, WEATHERS
from engine.sim.themes import THEMES

STATE_HEADS = {"weather": len(WEATHERS), "time_of_day": len(TIMES_OF_DAY), "fire_present": 2,
               "rainbow": 2, "creature_mood": len(CREATURE_MOODS)}
ACTIONS = ("idle", "forward", "back", "strafe_left", "strafe_right", "turn_left", "turn_right")
AUDIO_EVENTS = ("footstep", "rain", "fire", "wind", "creature")  # DESIGN.md's five
JUDGES_VERSION = 2  # bump when a head or a target changes: cached judges are rebuilt
SIDE = 64  # judges look at 64x64 downsampled frames: cheap and enough for these labels


def to_input(frames: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, 64, 64) float."""
    x = torch.as_tensor(np.asarray(frames)).permute(0, 3, 1, 2).float() / 255.0
    return F.interpolate(x, size=(SIDE, SIDE), mode="area")


def state_targets(labels: np.ndarray) -> dict[str, np.ndarray]:
    out = {k: labels[k].astype(np.int64) for k in STATE_HEADS}
    out["objects"] = np.stack([(labels["objects_in_view"] >> i) & 1
                               for i in range(len(OBJECT_KINDS))], 1).astype(np.float32)
    return out


def action_class(keys: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Turning dominates (it moves the whole picture), then the movement key."""
    k = KEY_BITS
    out = np.zeros(len(keys), np.int64)
    turn_left = ((keys & k["LEFT"]) > 0) | (yaw < -0.02)
    turn_right = ((keys & k["RIGHT"]) > 0) | (yaw > 0.02)
    for name, bit in (("forward", "W"), ("back", "S"), ("strafe_left", "A"),
                      ("strafe_right", "D")):
        out[(keys & k[bit]) > 0] = ACTIONS.index(name)
    out[turn_left & ~turn_right] = ACTIONS.index("turn_left")
    out[turn_right & ~turn_left] = ACTIONS.index("turn_right")
    return out


def audio_targets(labels: np.ndarray) -> np.ndarray:
    """(N, 5) multi-label: a footstep sounds in this frame, it rains, something burns, the wind
    is strong (its bed's gain >= STRONG_WIND), a creature call sounds (calls last ~0.2-0.4 s)."""
    step = _sounding(labels["step_onset"], 2)  # a step grain lasts ~2 frames
    call = _sounding(labels["call_onset"], 5)
    weather = [WEATHERS[w] for w in labels["weather"]]
    wind = np.array([wind_gain(THEMES[t].wind, w) >= STRONG_WIND
                     for t, w in zip(labels["theme"], weather, strict=True)], bool)
    return np.stack([step, labels["weather"] == WEATHERS.index("rain"),
                     labels["fire_present"], wind, call], 1).astype(np.float32)


def _sounding(onsets: np.ndarray, frames: int) -> np.ndarray:
    """True where an onset happened in this frame or the `frames - 1` before it."""
    onsets = onsets.astype(bool)
    out = onsets.copy()
    for k in range(1, frames):
        out[k:] |= onsets[:-k]
    return out


def _cnn(in_ch: int, width: int = 32) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, width, 3, 2, 1), nn.ReLU(),  # 32
        nn.Conv2d(width, width * 2, 3, 2, 1), nn.ReLU(),  # 16
        nn.Conv2d(width * 2, width * 2, 3, 2, 1), nn.ReLU(),  # 8
        nn.Conv2d(width * 2, width * 2, 3, 2, 1), nn.ReLU(),  # 4
        nn.Flatten(), nn.Linear(width * 2 * 16, 128), nn.ReLU())


class StateClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _cnn(3)
        self.heads = nn.ModuleDict({k: nn.Linear(128, n) for k, n in STATE_HEADS.items()})
        self.objects = nn.Linear(128, len(OBJECT_KINDS))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.body(x)
        out = {k: head(h) for k, head in self.heads.items()}
        out["objects"] = self.objects(h)
        return out


class InverseDynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _cnn(6)
        self.head = nn.Linear(128, len(ACTIONS))

    def forward(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(torch.cat([before, after - before], dim=1)))


class AudioEventClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.LazyLinear(128), nn.ReLU(),
                                 nn.Linear(128, len(AUDIO_EVENTS)))

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(N, 800) float in [-1, 1] -> (N, 3) logits."""
        return self.net(log_spectrogram(audio, 128))


@dataclass
class Judges:
    state: StateClassifier
    idm: InverseDynamics
    audio: AudioEventClassifier
    accuracy: dict[str, float]  # each judge's accuracy on held-out sim frames


def _fit(model: nn.Module, loss_fn, n: int, steps: int, batch: int, desc: str) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(0)
    model.train()
    for step in tqdm(range(steps), desc=desc, leave=False):
        for g in opt.param_groups:
            g["lr"] = 2e-3 * 0.5 * (1 + np.cos(np.pi * step / steps))
        idx = torch.from_numpy(rng.integers(0, n, batch))
        loss = loss_fn(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()


def train_judges(frames: np.ndarray, audio: np.ndarray, labels: np.ndarray,
                 episode_start: np.ndarray, steps: int = 1500) -> Judges:
    """Train on the first 80% of rows, report accuracy on the last 20% (other episodes)."""
    n = len(frames)
    split = int(n * 0.8)
    x = to_input(frames)
    a = torch.from_numpy(audio.astype(np.float32) / 32768.0)
    st = {k: torch.from_numpy(v) for k, v in state_targets(labels).items()}
    act = torch.from_numpy(action_class(labels["keys"], labels["yaw_delta"]))
    aud = torch.from_numpy(audio_targets(labels))
    has_prev = torch.from_numpy(~episode_start)

    state = StateClassifier()

    def state_loss(i):
        out = state(x[i])
        loss = sum(F.cross_entropy(out[k], st[k][i]) for k in STATE_HEADS)
        return loss + F.binary_cross_entropy_with_logits(out["objects"], st["objects"][i])

    _fit(state, lambda i: state_loss(i % split), split, steps, 64, "state judge")

    pairs = torch.nonzero(has_prev[:split]).flatten()
    idm = InverseDynamics()
    _fit(idm, lambda i: F.cross_entropy(idm(x[pairs[i] - 1], x[pairs[i]]), act[pairs[i]]),
         len(pairs), steps, 64, "inverse dynamics")

    audio_judge = AudioEventClassifier()
    audio_judge(a[:2])  # materialise the lazy layer
    _fit(audio_judge, lambda i: F.binary_cross_entropy_with_logits(audio_judge(a[i]), aud[i]),
         split, steps, 128, "audio judge")

    with torch.inference_mode():
        test = torch.arange(split, n)
        out = state(x[test])
        acc = {f"state_{k}": float((out[k].argmax(1) == st[k][test]).float().mean())
               for k in STATE_HEADS}
        tp = torch.nonzero(has_prev[split:]).flatten() + split
        acc["inverse_dynamics"] = float((idm(x[tp - 1], x[tp]).argmax(1) == act[tp])
                                        .float().mean())
        from .metrics import balanced_accuracy

        per_class = balanced_accuracy((audio_judge(a[test]) > 0).numpy(), aud[test].numpy())
        acc["audio_events_balanced"] = float(np.mean([v for v in per_class if v is not None]))
    return Judges(state, idm, audio_judge, acc)


def save_judges(path: Path, judges: Judges) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": judges.state.state_dict(), "idm": judges.idm.state_dict(),
                "audio": judges.audio.state_dict(), "accuracy": judges.accuracy}, path)


def load_judges(path: Path) -> Judges:
    ckpt = torch.load(path, weights_only=False)
    judges = Judges(StateClassifier(), InverseDynamics(), AudioEventClassifier(),
                    ckpt["accuracy"])
    judges.audio(torch.zeros(1, 800))
    judges.state.load_state_dict(ckpt["state"])
    judges.idm.load_state_dict(ckpt["idm"])
    judges.audio.load_state_dict(ckpt["audio"])
    for m in (judges.state, judges.idm, judges.audio):
        m.eval()
    return judges
