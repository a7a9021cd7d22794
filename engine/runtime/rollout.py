"""Latent-space autoregression with a KV cache: the engine under the runtime, eval and samples.

    roll = LatentRollout(model, theme_id, image_token=None, seed=0)
    roll.observe(z, audio_latent, inputs, frame)     # a known frame (e.g. from the simulator)
    z, a = roll.generate(inputs, frame, text)        # the model's next frame

Each generated frame costs `sampler_steps` passes of one block plus one clean pass that writes
the cache; frames already generated are never recomputed.

Projection (`project=video_ae`, on when the model's config says `project_context`): each
generated latent is decoded and encoded again before it joins the context, so drift off the
autoencoder's latent manifold (the 4x4-tile mosaic) is pulled back every frame. The decoded
picture is kept in `last_frame`, so a caller that shows it pays only the extra encode.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.model.sampler import EulerSampler
from engine.model.video_ae import VideoAE
from engine.model.world import WorldModel

MAX_TEXT_MEMORY = 4


class LatentRollout:
    def __init__(
        self,
        model: WorldModel,
        theme: int,
        image_token: torch.Tensor | None = None,
        seed: int = 0,
        steps: int | None = None,
        project: VideoAE | None = None,
    ):
        self.model = model
        self.project = project
        self.last_frame: torch.Tensor | None = None  # (1, 3, H, W) decoded, when projecting
        cfg = model.config
        self.sampler = EulerSampler(steps or cfg.sampler_steps)
        self.cache = model.new_cache()
        self.gen = torch.Generator().manual_seed(seed)
        self.theme = theme
        self.image = image_token
        self.texts: list[torch.Tensor] = []
        self.prev = torch.zeros(1, cfg.latent_channels, cfg.latent_size, cfg.latent_size)
        self._zero_text = torch.zeros(1, cfg.text_dim)
        self._rebuild_memory()

    # -- memory (sink tokens) -------------------------------------------------------------------
    def _rebuild_memory(self) -> None:
        cfg = self.model.config
        texts = self.texts[-MAX_TEXT_MEMORY:]
        text = torch.stack(texts)[None] if texts else torch.zeros(1, 0, cfg.text_dim)
        image = self.image if self.image is not None else torch.zeros(cfg.image_dim)
        mem = self.model.embed_memory(torch.tensor([self.theme]), text, image.float()[None])
        if self.image is None:
            mem = torch.cat([mem[:, :1], mem[:, 2:]], dim=1)
        self.cache.set_memory(self.model.memory_layers(mem))

    def add_text(self, embedding: np.ndarray | torch.Tensor) -> None:
        self.texts.append(torch.as_tensor(embedding, dtype=torch.float32))
        self.texts = self.texts[-MAX_TEXT_MEMORY:]
        self._rebuild_memory()

    def set_image(self, token: torch.Tensor) -> None:
        self.image = token
        self._rebuild_memory()

    # -- frames ---------------------------------------------------------------------------------
    def _text_input(self, text: np.ndarray | torch.Tensor | None) -> torch.Tensor:
        if text is None:
            return self._zero_text
        return torch.as_tensor(text, dtype=torch.float32).view(1, -1)

    def remember_around(self, latents: torch.Tensor) -> None:
        """The views around the current one: this generator keeps no view memory."""
        del latents

    def display_move(self) -> torch.Tensor | None:
        """This generator's history is where the camera is: nothing left to move."""
        return None

    def observe(
        self,
        z: torch.Tensor,
        audio: torch.Tensor,
        inputs,
        frame: int,
        text: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        """Write a clean frame (known or just generated) into the cache."""
        inp = torch.as_tensor(inputs, dtype=torch.float32).view(1, -1)
        self.model.cached_block(
            self.cache,
            z.view_as(self.prev),
            self.prev,
            torch.as_tensor(audio).float().view(1, -1),
            inp,
            self._text_input(text),
            1.0,
            frame,
            write=True,
        )
        self.prev = z.view_as(self.prev)

    def generate(
        self, inputs, frame: int, text: np.ndarray | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample frame `frame` (its inputs and any sentence typed at it) and cache it.

        A sentence passed here joins the persistent memory before the frame is generated.
        With projection the returned (and cached) latent is encode(decode(sample)).
        """
        cfg = self.model.config
        if text is not None:
            self.add_text(text)
        inp = torch.as_tensor(inputs, dtype=torch.float32).view(1, -1)
        txt = self._text_input(text)
        x = torch.randn(self.prev.shape, generator=self.gen)
        a = torch.randn(1, cfg.audio_dim, generator=self.gen)
        for s in self.sampler.levels():
            v, va = self.model.cached_block(
                self.cache, x, self.prev, a, inp, txt, s, frame, write=False
            )
            x, a = self.sampler.step(x, v[:, 0]), self.sampler.step(a, va[:, 0])
        if self.project is not None:
            self.last_frame = self.project.decode(x)
            x = self.project.encode(self.last_frame.clamp(0, 1))
        self.observe(x, a, inp, frame, text)
        return x[0], a[0]
