"""What the player can see this frame: labels for judges that must read state off the picture.

`LABEL_DTYPE` says what is true in the world (it rains, something burns, the creature is happy);
a judge looking at one frame can only know what was drawn. `view_labels(world)`, called right
after `SimWorld.step`, counts the pixels the rainbow and the flames drew, measures how tall the
creature and each spawned object stand on screen, and says whether the fire is within earshot.
It reads what the renderer kept of its last frame and changes nothing in the world.
"""

from __future__ import annotations

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
    ]
)


def rainbow_heading() -> float:
    """The yaw (radians, mod 2 pi) that puts the rainbow's apex in the middle of the picture."""
    return float(2 * np.pi * (RAINBOW_CENTRE - 1 / 8))  # screen column 0 shows the pano at yaw


def view_labels(world) -> np.void:
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
    for i, obj in enumerate(world.objects):
        b = boxes.get(i)
        if b is not None and i in labels_drawn:
            k = OBJECT_KINDS.index(obj.kind)
            object_px[k] = max(object_px[k], b[3] - b[1])
    record["object_px"] = object_px
    return record[()]


def _billboard_boxes(world) -> dict[int, tuple[float, float, float, float]]:
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
