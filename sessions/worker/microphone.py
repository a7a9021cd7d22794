"""Turns the player's microphone into the engine's audio-input features (loudness, onsets)."""

import math

import numpy as np

SILENCE_DB = -60.0
ONSET_JUMP_DB = 12.0  # a clap: this much louder than the recent average


class MicrophoneFeatures:
    """Accumulates incoming PCM and yields one (loudness, onset) per engine frame.

    Loudness is RMS in dBFS mapped to [0, 1] (-60 dB -> 0, 0 dB -> 1); an onset is a frame more
    than ONSET_JUMP_DB above the running average of the previous frames.
    """

    def __init__(self, sample_rate: int, frame_seconds: float) -> None:
        self.samples_per_frame = max(1, int(round(sample_rate * frame_seconds)))
        self._pending = np.zeros(0, np.float32)
        self._average_db = SILENCE_DB

    def feed(self, pcm: np.ndarray) -> list[tuple[float, bool]]:
        """Add samples (int16 or float in [-1, 1]); return features for each completed frame."""
        if pcm.dtype == np.int16:
            pcm = pcm.astype(np.float32) / 32768.0
        self._pending = np.concatenate([self._pending, pcm.astype(np.float32).ravel()])
        features = []
        while self._pending.size >= self.samples_per_frame:
            frame = self._pending[: self.samples_per_frame]
            self._pending = self._pending[self.samples_per_frame :]
            features.append(self._frame_features(frame))
        return features

    def _frame_features(self, frame: np.ndarray) -> tuple[float, bool]:
        rms = float(np.sqrt(np.mean(frame**2))) if frame.size else 0.0
        level_db = max(SILENCE_DB, 20 * math.log10(rms)) if rms > 0 else SILENCE_DB
        onset = level_db - self._average_db > ONSET_JUMP_DB and level_db > -30.0
        self._average_db = 0.8 * self._average_db + 0.2 * level_db
        loudness = (level_db - SILENCE_DB) / -SILENCE_DB
        return round(min(1.0, max(0.0, loudness)), 3), onset
