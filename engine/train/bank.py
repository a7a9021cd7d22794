"""Every latent episode as flat tensors on one device, so training windows are gathered by index.

A window is `window` consecutive frames of one episode, named by its first row. Gathering a
batch is a handful of tensor indexing ops (no Python loop per window), which keeps a GPU busy
and is also faster on the CPU than stacking per-episode slices.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from engine.model.sound_cues import sound_cues
from engine.model.text import TEXT_DIM

from .latents import LatentEpisode

MAX_TEXT_MEMORY = 4  # sentences a frame remembers (the runtime keeps the same number)


def image_arrival(labels: np.ndarray) -> int:
    """The frame an episode's reference image (the one in effect at its end) arrived: the
    last image event, 0 when it came with the world at the start."""
    events = np.nonzero(labels["image_event"])[0]
    return int(events[-1]) if len(events) else 0


@dataclass
class LatentBank:
    video: torch.Tensor  # (N, C, S, S) float16 normalised latents
    audio: torch.Tensor  # (N, A)
    inputs: torch.Tensor  # (N, 13)
    cues: torch.Tensor  # (N, SOUND_CUES) the sound cues a session keeps (keys, weather)
    text: torch.Tensor  # (N, 384) the sentence typed at that frame, zeros if none
    local: torch.Tensor  # (N,) frame index within its episode
    episode: torch.Tensor  # (N,) episode index
    memory_rows: torch.Tensor  # (N, K) rows of the last K sentences typed at or before, -1 none
    theme: torch.Tensor  # (E,)
    image: torch.Tensor  # (E, image_dim) pooled reference latent (zeros if none)
    has_image: torch.Tensor  # (E,) bool
    image_from: torch.Tensor  # (E,) the frame that image arrived (0: from the start)
    lengths: torch.Tensor  # (E,)

    @classmethod
    def build(
        cls,
        episodes: list[LatentEpisode],
        text_table: dict[str, np.ndarray],
        device: torch.device | str = "cpu",
        image_dim: int = 128,
    ) -> LatentBank:
        offsets = np.cumsum([0] + [len(ep.video) for ep in episodes])
        n = int(offsets[-1])
        text = torch.zeros(n, TEXT_DIM)
        memory_rows = torch.full((n, MAX_TEXT_MEMORY), -1, dtype=torch.long)
        local, episode = [], []
        for e, ep in enumerate(episodes):
            first, length = int(offsets[e]), len(ep.video)
            local.append(torch.arange(length))
            episode.append(torch.full((length,), e, dtype=torch.long))
            rows = np.asarray(ep.prompt_rows, np.int64)
            for r, t in zip(ep.prompt_rows, ep.prompt_texts, strict=True):
                text[first + r] = torch.from_numpy(np.asarray(text_table[t], np.float32))
            if len(rows):
                count = np.searchsorted(rows, np.arange(length), side="right")  # typed so far
                slot = count[:, None] - MAX_TEXT_MEMORY + np.arange(MAX_TEXT_MEMORY)
                got = slot >= 0
                mem = np.where(got, first + rows[np.clip(slot, 0, None)], -1)
                memory_rows[first : first + length] = torch.from_numpy(mem)
        image = torch.zeros(len(episodes), image_dim)
        has_image = torch.zeros(len(episodes), dtype=torch.bool)
        image_from = torch.zeros(len(episodes), dtype=torch.long)
        for e, ep in enumerate(episodes):
            if ep.image is not None:
                image[e] = ep.image.float().cpu()
                has_image[e] = True
                image_from[e] = image_arrival(ep.labels)
        bank = cls(
            video=torch.cat([ep.video.half() for ep in episodes]),
            audio=torch.cat([ep.audio.float() for ep in episodes]),
            inputs=torch.cat([ep.inputs.float() for ep in episodes]),
            cues=torch.cat([sound_cues(ep.inputs, ep.labels["weather"]) for ep in episodes]),
            text=text,
            local=torch.cat(local),
            episode=torch.cat(episode),
            memory_rows=memory_rows,
            theme=torch.tensor([ep.theme for ep in episodes]),
            image=image,
            has_image=has_image,
            image_from=image_from,
            lengths=torch.tensor([len(ep.video) for ep in episodes]),
        )
        return bank.to(device)

    def to(self, device: torch.device | str) -> LatentBank:
        return LatentBank(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    @property
    def device(self) -> torch.device:
        return self.video.device

    def window_starts(self, window: int) -> torch.Tensor:
        """Rows where a `window`-frame window fits inside its episode (computed once per size:
        `sample` asks every training step)."""
        cache = self.__dict__.setdefault("_starts", {})
        if window not in cache:
            fits = self.local + window <= self.lengths[self.episode]
            cache[window] = torch.nonzero(fits).flatten()
        return cache[window]

    def sample(
        self, n: int, window: int, generator: torch.Generator, first_frame_share: float = 0.1
    ) -> torch.Tensor:
        """n random window starts; about `first_frame_share` of them open an episode (frame 0),
        so the model learns to draw a first frame from the theme alone (a session's cold start)."""
        starts = self.window_starts(window)
        pick = starts[torch.randint(len(starts), (n,), generator=generator).to(starts.device)]
        opening = (torch.rand(n, generator=generator) < first_frame_share).to(pick.device)
        return torch.where(opening, pick - self.local[pick], pick)

    def image_event_starts(self, window: int, first: int) -> torch.Tensor:
        """Starts of every `window`-frame window in which a reference image arrives at a
        position >= `first` (a predicted frame, not the history): the frames that show a
        model how a picture recolours the world."""
        cache = self.__dict__.setdefault("_image_starts", {})
        if (window, first) not in cache:
            event = self.image_from[self.episode]
            arrives = self.has_image[self.episode] & (event > 0)
            offset = event - self.local  # where in a window starting here the image arrives
            fits = self.local + window <= self.lengths[self.episode]
            cache[(window, first)] = torch.nonzero(
                arrives & fits & (offset >= first) & (offset < window)
            ).flatten()
        return cache[(window, first)]

    def sentence_event_starts(
        self, window: int, first: int, last: int | None = None
    ) -> torch.Tensor:
        """Starts of every `window`-frame window in which a sentence is typed at a position
        >= `first` (a predicted frame) and < `last` (default: the window's end): the frames
        that show a model what a sentence does (a random window holds one about a quarter of
        the time). `last = first + 1` picks chains that open on the sentence."""
        end = window if last is None else last
        cache = self.__dict__.setdefault("_sentence_starts", {})
        if (window, first, end) not in cache:
            typed = (self.text.abs().sum(dim=1) > 0).long()
            so_far = torch.cat([typed.new_zeros(1), torch.cumsum(typed, dim=0)])  # before row i
            starts = self.window_starts(window)
            cache[(window, first, end)] = starts[so_far[starts + end] > so_far[starts + first]]
        return cache[(window, first, end)]

    def windows(self, starts: torch.Tensor, window: int) -> dict[str, torch.Tensor]:
        """Stacked windows: video/prev (B, T, C, S, S) float, audio, inputs, sound cues, text,
        frame (local index), and the memory at the window's last frame (theme, image, last
        sentences). The reference image counts from the frame it arrived: `frame_has_image`
        (B, T) per frame, `has_image` at the window's last frame."""
        rows = starts[:, None] + torch.arange(window, device=starts.device)
        video = self.video[rows].float()
        before = self.video[(starts - 1).clamp(min=0)].float()
        before = torch.where(
            (self.local[starts] == 0)[:, None, None, None], torch.zeros_like(before), before
        )
        prev = torch.cat([before[:, None], video[:, :-1]], dim=1)
        episode = self.episode[starts]
        arrived = self.local[rows] >= self.image_from[episode][:, None]
        seen = self.has_image[episode][:, None] & arrived  # (B, T) the picture in effect
        mem_rows = self.memory_rows[rows[:, -1]]
        mem_valid = mem_rows >= 0
        safe = mem_rows.clamp(min=0)
        return {
            "video": video,
            "prev": prev,
            "audio": self.audio[rows],
            "inputs": self.inputs[rows],
            "cues": self.cues[rows],
            "text": self.text[rows],
            "frame": self.local[rows],
            "theme": self.theme[episode],
            "image": self.image[episode],
            "has_image": seen[:, -1],
            "frame_has_image": seen,
            "mem_text": self.text[safe] * mem_valid[..., None],
            "mem_arrival": torch.where(mem_valid, self.local[safe], 0),
            "mem_valid": mem_valid,
        }
