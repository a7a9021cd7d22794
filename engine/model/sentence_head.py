"""A second reader of the newest sentence, for a code model (MODEL.md "v19").

The conv code model hears a sentence only through one linear layer summed into the single
vector that modulates every block, and it reads little of it (v13-v15: 0.05-0.08 nats of
3.3 on the cells a sentence changes). This head reads the newest sentence again, cell by
cell: its MiniLM embedding and age modulate a small conv stack over the trunk's features
(and where each cell sits, so "in front of me" has a place), and its output is added to the
code logits. It acts only on rows whose newest sentence is younger than `frames`, so
everything a sentence does not govern is the trunk's alone and unchanged: the head can be
trained by itself, hard, on sentence windows, without unlearning stillness (the price every
sentence fine-tune of the whole network paid). Its last layer starts at zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .sound_flow import level_features


def newest_sentence(
    memory: torch.Tensor, memory_age: torch.Tensor, memory_valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(embedding (B, D), age (B,) in frames, present (B,) bool) of the newest remembered
    sentence (the last memory slot; a sentence typed at this frame is remembered at age 0)."""
    return memory[:, -1], memory_age[:, -1].float(), memory_valid[:, -1]


class SentenceHead(nn.Module):
    def __init__(self, text_dim: int, width: int, hidden: int, codes: int, frames: int):
        super().__init__()
        self.frames = frames
        self.sentence_in = nn.Sequential(
            nn.Linear(text_dim + 16, hidden), nn.SiLU(), nn.Linear(hidden, 2 * hidden)
        )
        self.cells_in = nn.Conv2d(width + 2, hidden, 1)
        self.mix1 = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.mix2 = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.out = nn.Conv2d(hidden, codes, 1)
        assert self.out.bias is not None
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def active(self, age: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """(B,) bool: the rows the head speaks in."""
        return present & (age < self.frames)

    def forward(
        self,
        features: torch.Tensor,
        memory: torch.Tensor,
        memory_age: torch.Tensor,
        memory_valid: torch.Tensor,
    ) -> torch.Tensor:
        """features (B, W, S, S) -> (B, codes, S, S) nats to add to the code logits (zero in
        rows no recent sentence governs)."""
        text, age, present = newest_sentence(memory, memory_age, memory_valid)
        on = self.active(age, present)
        b, _, s, _ = features.shape
        out = features.new_zeros(b, self.out.out_channels, s, s)
        if not bool(on.any()):
            return out
        rows = on.nonzero().squeeze(1)
        axis = torch.linspace(-1.0, 1.0, s, device=features.device)
        ys, xs = torch.meshgrid(axis, axis, indexing="ij")
        where = torch.stack([xs, ys])[None].expand(len(rows), 2, s, s)
        h = self.cells_in(torch.cat([features[rows], where], dim=1))
        told = torch.cat([text[rows], level_features(age[rows] / self.frames)], dim=-1)
        scale, shift = self.sentence_in(told)[:, :, None, None].chunk(2, dim=1)
        h = F.silu(h * (1 + scale) + shift)
        h = h + F.silu(self.mix1(h))
        h = h + F.silu(self.mix2(h))
        return out.index_copy(0, rows, self.out(h).to(out.dtype))
