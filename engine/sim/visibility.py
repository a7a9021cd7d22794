"""What the player can see this frame: labels for judges that must read state off the picture.

`LABEL_DTYPE` says what is true in the world (it rains, something burns, the creature is happy);
a judge looking at one frame can only know what was drawn. `view_labels(world)`, called right
after `SimWorld.step`, counts the pixels the rainbow and the flames drew, measures how tall the
creature and each spawned object stand on screen, and says whether the fire is within earshot.
It also counts the pixels each billboard shows in the finished picture (after terrain and
later billboards drew over it): a statue hidden behind a dragon, or one column of a lantern at
the picture's edge, is "drawn" but cannot be seen.
It reads what the renderer kept of its last frame and changes nothing in the world.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from .constants import OBJECT_KINDS
from .sky import RAINBOW_CENTRE, rainbow_arc

VIEW_DTYPE = np.dtype(
    [
        ("rainbow_pixels", np.int32),  # pixels of the rainbow's arc shown (not hidden by terrain)
        ("flame_pixels", np.int32),  # terrain pixels showing a burning cell
        ("fire_gain", np.float32),  # the fire crackle's loudness (0 = inaudible, 1 = full)
        ("creature_px", np.float32),  # the creature's height on screen (0 when not drawn)
        ("creature_box", np.int16, (4,)),  # x0, y0, x1, y1 of creature + mood icon, -1 if not drawn
        ("object_px", np.float32, (len(OBJECT_KINDS),)),  # tallest drawn object of each kind
        (
            "object_pixels",
            np.int32,
            (len(OBJECT_KINDS),),
        ),  # pixels shown of each kind (all objects)
        ("creature_pixels", np.int32),  # pixels the creature's sprite shows
        ("icon_pixels", np.int32),  # pixels its mood icon shows
    ]
)


def rainbow_heading() -> float:
    """The yaw (radians, mod 2 pi) that puts the rainbow's apex in the middle of the picture."""
    return float(2 * np.pi * (RAINBOW_CENTRE - 1 / 8))  # screen column 0 shows the pano at yaw


def view_labels(world: Any) -> np.void:
    """Visibility record (VIEW_DTYPE) of the frame `world` (a SimWorld) rendered last."""
    from .world import CREATURE_KEY, ICON_KEY  # world imports this module's neighbours

    r = world.renderer
    record = np.zeros((), VIEW_DTYPE)
    source = r.last_source
    sky_start = r.slices * r.size
    sky = source >= sky_start
    if world.rainbow and sky.any():
        _, arc = rainbow_arc(r.pano_width, r.pano_height)
        record["rainbow_pixels"] = int(arc.ravel()[source[sky] - sky_start].sum())
    if world.fire.burning:
        cells = r.last_cells.ravel()[source[~sky]]
        record["flame_pixels"] = int(np.isin(cells, world.fire.active).sum())
    record["fire_gain"] = world._audio_gains().fire
    labels_drawn = world.last_drawn
    boxes = _billboard_boxes(world)
    box = boxes.get(CREATURE_KEY)
    if box is not None and CREATURE_KEY in labels_drawn:
        record["creature_px"] = box[3] - box[1]
        icon = boxes.get(ICON_KEY, box)
        record["creature_box"] = (
            min(box[0], icon[0]),
            min(box[1], icon[1]),
            max(box[2], icon[2]),
            max(box[3], icon[3]),
        )
    else:
        record["creature_box"] = -1
    object_px = np.zeros(len(OBJECT_KINDS), np.float32)
    shown = shown_pixels(world)
    for i, obj in enumerate(world.objects):
        b = boxes.get(i)
        if b is not None and i in labels_drawn:
            k = OBJECT_KINDS.index(obj.kind)
            object_px[k] = max(object_px[k], b[3] - b[1])
            record["object_pixels"][k] += shown.get(i, 0)
    record["object_px"] = object_px
    record["creature_pixels"] = shown.get(CREATURE_KEY, 0)
    record["icon_pixels"] = shown.get(ICON_KEY, 0)
    return cast(np.void, record[()])


def shown_pixels(world: Any) -> dict[int, int]:
    """Pixels of the last frame that each billboard (by key) shows, after occlusion."""
    owner, _ = _billboard_pass(world)
    keys, counts = np.unique(owner[owner >= 0], return_counts=True)
    return {int(k): int(c) for k, c in zip(keys, counts, strict=True)}


def pixel_depth(world: Any) -> np.ndarray:
    """(H, W) float32: how far ahead of the camera (along its view axis, world units) the
    thing each pixel of the last frame shows stands; inf on the sky. What a step forward or
    sideways moves a pixel by depends on it (engine/model/depth_head.py learns it)."""
    _, depth = _billboard_pass(world)
    return depth


def _billboard_pass(world: Any) -> tuple[np.ndarray, np.ndarray]:
    """(owner (H, W) int64: the billboard key each pixel shows, -1 for terrain and sky;
    depth (H, W) float32 of what each pixel shows).

    Repeats the renderer's billboard pass without colour: a texel is drawn where it is opaque
    and nearer than the terrain behind it, and a later billboard overwrites an earlier one."""
    r = world.renderer
    cam = world.camera()
    size = r.size
    horizon = size / 2 + np.tan(cam.pitch) * r.proj
    source = r.last_source
    terrain = source < r.slices * size
    terrain_depth = r.depth[np.minimum(source // size, r.slices - 1)]
    depth = np.where(terrain, terrain_depth, np.inf).astype(np.float32)
    behind = depth.copy()  # the renderer tests each billboard against the terrain alone
    owner = np.full((size, size), -1, np.int64)
    for board in world._billboards():
        box = r._project(cam, board, horizon)
        if box is None:
            continue
        board_depth, left, top, width, height, x0, x1, y0, y1 = box
        x0c, x1c, y0c, y1c = max(x0, 0), min(x1, size), max(y0, 0), min(y1, size)
        th, tw = board.texture.shape[:2]
        us = np.clip(((np.arange(x0c, x1c) + 0.5 - left) / width * tw).astype(np.int32), 0, tw - 1)
        vs = np.clip(((np.arange(y0c, y1c) + 0.5 - top) / height * th).astype(np.int32), 0, th - 1)
        mask = (board.texture[vs[:, None], us[None, :], 3] > 0) & (
            behind[y0c:y1c, x0c:x1c] > board_depth
        )
        owner[y0c:y1c, x0c:x1c][mask] = board.key
        depth[y0c:y1c, x0c:x1c][mask] = board_depth
    return owner, depth


def _billboard_boxes(world: Any) -> dict[int, tuple[float, float, float, float]]:
    """Screen boxes (x0, y0, x1, y1, unclipped) of the billboards in front of the camera."""
    r = world.renderer
    cam = world.camera()
    horizon = r.size / 2 + np.tan(cam.pitch) * r.proj
    out = {}
    for board in world._billboards():
        box = r._project(cam, board, horizon)
        if box is not None:
            _, left, top, width, height, *_ = box
            out[board.key] = (left, top, left + width, top + height)
    return out
