"""What the camera last saw in every direction: a session's latents pinned to the world's yaw
and pitch, so a turn that uncovers a direction seen before starts from what was there.

Why: the camera warp (conv_world.camera_shift) slides the history with a turn, and the cells
the turn uncovers repeat the frame's border for the network to paint. The network has no way
to know what is there, so it paints the theme's bands, and a full turn in place ends on a
different scene from the one it started at. The simulator's world stays put when the player
only turns, so the newest latent of each direction is the best start the network can have.

The canvas is a full turn wide (`FULL_TURN_CELLS` columns, wrapping) and a frame plus
`pad_rows` above and below tall. A frame's cell (row i, column j) sits at canvas row
i - round(y) + pad_rows and column j - round(x) (mod the turn), where (x, y) is the sum of the
camera shifts so far (in cells, as `camera_shift` gives them): rounding to whole cells keeps
every remembered cell a real latent (a code model's history is codes), at most half a cell off.
Walking is not tracked: what was seen from further back is still where it was, only smaller or
larger, and the network repaints it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from engine.spec import TURN_CELLS_PER_RADIAN

FULL_TURN_CELLS = round(2 * math.pi * TURN_CELLS_PER_RADIAN)  # 64: four frame widths


class ViewMemory:
    def __init__(self, channels: int, size: int, pad_rows: int | None = None):
        self.size = size
        self.pad = size // 2 if pad_rows is None else pad_rows
        rows = size + 2 * self.pad
        self.latent = torch.zeros(channels, rows, FULL_TURN_CELLS)
        self.seen = torch.zeros(rows, FULL_TURN_CELLS, dtype=torch.bool)
        self.told = torch.zeros(rows, FULL_TURN_CELLS, dtype=torch.bool)  # from write_around
        self.offset = [0.0, 0.0]  # the camera shifts so far, cells (x right, y down)

    def move(self, dx: float, dy: float) -> None:
        """The camera slid the picture by (dx, dy) cells (`camera_shift`'s sign)."""
        self.offset = [self.offset[0] + dx, self.offset[1] + dy]

    def _view(
        self, offset: tuple[float, float] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The canvas rows and columns of the current view's cells (or of the view at camera
        shifts `offset`), and which rows of the view the canvas holds (a tilt beyond
        `pad_rows` leaves the canvas)."""
        x, y = self.offset if offset is None else offset
        n = torch.arange(self.size)
        columns = (n - math.floor(x + 0.5)) % FULL_TURN_CELLS
        rows = n - math.floor(y + 0.5) + self.pad
        inside = (rows >= 0) & (rows < self.seen.shape[0])
        return rows, columns, inside

    def write(self, latent: torch.Tensor) -> None:
        """The current view (C, S, S), known or just drawn, becomes what each of its
        directions looks like."""
        self._put(latent, told=False)

    def _put(
        self, latent: torch.Tensor, told: bool, offset: tuple[float, float] | None = None
    ) -> None:
        """`latent` into the cells of the current view (or the view at `offset`): all of
        them, or, for a view the session was told of, only those never seen (marked told)."""
        rows, columns, inside = self._view(offset)
        r, c = rows[inside][:, None], columns[None, :]
        new = latent.detach().float()[:, inside]
        if told:
            fresh = ~self.seen[r, c]
            new = torch.where(fresh, new, self.latent[:, r, c])
            self.told[r, c] |= fresh
        else:
            self.told[r, c] = False
        self.latent[:, r, c] = new
        self.seen[r, c] = True

    def write_around(self, views: torch.Tensor) -> None:
        """`views` (n, C, S, S): the rest of a full turn from the current view in n + 1 equal
        steps to the right (`SimWorld.look_around`), seen at the same moment. They fill the
        directions never seen yet, so a session that starts knowing its surroundings turns
        into them instead of into the bands the network paints for the unknown."""
        x, y = self.offset
        step = FULL_TURN_CELLS / (len(views) + 1)
        for q, view in enumerate(views, start=1):
            self._put(view, told=True, offset=(x - q * step, y))  # a right turn slides it left

    def forget_told(self) -> None:
        """Forget the directions known only from `write_around`: the world was told to change
        (a sentence, a reference picture), and they show it as it was. What the session
        itself showed stays."""
        self.seen &= ~self.told
        self.latent[:, self.told] = 0.0
        self.told.zero_()

    def rewrite(self, change: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Every remembered direction changed by `change` ((n, C, S, S) -> the same), as the
        history is when the whole world changes at once (night, a reference picture): the
        canvas at the current tilt goes through it as the frames a full turn in place would
        show, and keeps what it had seen, changed. They are then the changed world's, no longer
        only told of; rows beyond the frames (tilted far) are forgotten."""
        x, y = self.offset
        offsets = [(x - q * self.size, y) for q in range(FULL_TURN_CELLS // self.size)]
        places = [self._view(offset) for offset in offsets]
        frames = torch.stack(
            [self.latent[:, r.clamp(0, len(self.seen) - 1)][:, :, c] for r, c, _ in places]
        )
        changed = change(frames).detach().float()
        seen = self.seen.clone()
        self.forget_all()
        for (rows, columns, inside), frame in zip(places, changed, strict=True):
            r, c = rows[inside][:, None], columns[None, :]
            kept = seen[r, c]
            self.latent[:, r, c] = torch.where(kept, frame[:, inside], 0.0)
            self.seen[r, c] = kept

    def forget_all(self) -> None:
        """Forget every direction: the whole world changed (night fell, rain came)."""
        self.seen.zero_()
        self.told.zero_()
        self.latent.zero_()

    def recall(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current view as remembered: (C, S, S) latents and an (S, S) bool of the cells
        ever seen (zeros where never)."""
        rows, columns, inside = self._view()
        r, c = rows.clamp(0, self.seen.shape[0] - 1)[:, None], columns[None, :]
        seen = self.seen[r, c] & inside[:, None]
        return self.latent[:, r, c] * seen, seen
