"""Per-frame ground truth: one numpy structured record per frame.

Enumerated fields store indices into the vocabularies in `constants` (and `prompts.EVENT_NAMES`,
`themes.THEME_NAMES`); bitmask fields use `constants.KEY_BITS` and `constants.OBJECT_KINDS`.
"""

from __future__ import annotations

import numpy as np

LABEL_DTYPE = np.dtype(
    [
        ("keys", np.uint16),  # held keys bitmask (KEY_BITS)
        ("yaw_delta", np.float32),  # continuous camera delta applied this frame (radians)
        ("pitch_delta", np.float32),
        ("weather", np.uint8),  # WEATHERS index
        ("time_of_day", np.uint8),  # TIMES_OF_DAY index
        ("fire_present", np.bool_),  # anything burning anywhere
        ("fire_cells", np.int32),  # how many cells are burning
        ("rainbow", np.bool_),
        ("objects_present", np.uint16),  # bitmask over OBJECT_KINDS: spawned anywhere
        ("objects_in_view", np.uint16),  # bitmask over OBJECT_KINDS: drew pixels this frame
        ("creature_mood", np.uint8),  # CREATURE_MOODS index
        ("creature_relationship", np.uint8),  # RELATIONSHIPS index (the remembered gift)
        ("creature_in_view", np.bool_),
        ("creature_distance", np.float32),
        ("companion_look", np.uint8),  # COMPANION_LOOKS index
        ("theme", np.uint8),  # THEME_NAMES index
        ("event", np.int16),  # EVENT_NAMES index of a prompt event fired this frame, -1 none
        ("step_onset", np.bool_),  # a footstep starts at this frame's first audio sample
        ("step_surface", np.uint8),  # SURFACES index under the player
        ("call_onset", np.bool_),  # a creature call starts at this frame's first audio sample
        ("audio_loudness", np.float32),  # audio-input feature in effect this frame
        ("audio_onset", np.bool_),
        ("image_event", np.bool_),  # a reference image arrived this frame
        ("pose_x", np.float32),  # player position in map cells (the map wraps every 256)
        ("pose_y", np.float32),
        ("pose_yaw", np.float32),  # radians, unwrapped
        ("pose_pitch", np.float32),
        ("frame_index", np.int32),  # index within the episode
    ]
)

LABEL_FIELDS: tuple[str, ...] = LABEL_DTYPE.names or ()


def empty_labels(count: int) -> np.ndarray:
    return np.zeros(count, LABEL_DTYPE)
