"""Per-frame input features shared by training and the runtime (one definition, no drift)."""

from __future__ import annotations

import numpy as np

from .world import INPUT_FEATURES

KEY_ORDER = ("W", "A", "S", "D", "LEFT", "RIGHT", "UP", "DOWN")  # engine.sim KEY_BITS order
CAMERA_SCALE = 10.0  # radians per frame -> roughly unit scale (arrow keys turn 0.06/frame)
YAW_FEATURE, PITCH_FEATURE = 8, 9  # where the scaled camera deltas sit (after the key bits)


def input_features(
    keys: int, yaw: float, pitch: float, loudness: float, onset: bool, image_event: bool
) -> np.ndarray:
    """(INPUT_FEATURES,) float32: key bits, scaled camera deltas, audio-input features."""
    out = np.zeros(INPUT_FEATURES, np.float32)
    out[:8] = [(int(keys) >> i) & 1 for i in range(8)]
    out[YAW_FEATURE] = np.clip(yaw * CAMERA_SCALE, -5, 5)
    out[PITCH_FEATURE] = np.clip(pitch * CAMERA_SCALE, -5, 5)
    out[10] = loudness
    out[11] = float(onset)
    out[12] = float(image_event)
    return out


def input_features_from_label(r: np.void) -> np.ndarray:
    """One LABEL_DTYPE record -> (INPUT_FEATURES,)."""
    return input_features(
        r["keys"],
        r["yaw_delta"],
        r["pitch_delta"],
        r["audio_loudness"],
        r["audio_onset"],
        r["image_event"],
    )


def input_features_from_labels(labels: np.ndarray) -> np.ndarray:
    """(N,) LABEL_DTYPE records -> (N, INPUT_FEATURES)."""
    return np.stack([input_features_from_label(r) for r in labels])
