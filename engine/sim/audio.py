"""Per-frame audio synthesis from precomputed loops and one-shot grains.

Everything expensive (filtered noise, tones) is made once per world from the seed; a frame
then only sums 800-sample slices, so audio costs a few microseconds. Loops are whole numbers of
frames long, so a slice never wraps. One-shot grains (footsteps, calls) start at sample 0 of the
frame that triggers them: a footstep onset lands exactly at its step frame's first sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constants import SAMPLE_RATE, SAMPLES_PER_FRAME
from .themes import Theme

LOOP_FRAMES = 60  # 3 s loops


def _lowpass(x: np.ndarray, alpha: float) -> np.ndarray:
    """One-pole low-pass via FFT of its impulse response (vectorized, no Python loop)."""
    n = x.size
    kernel = (1 - alpha) * alpha ** np.arange(min(n, int(np.ceil(np.log(1e-4) / np.log(alpha)))))
    size = 1 << int(np.ceil(np.log2(n + kernel.size)))
    out = np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(kernel, size), size)[:n]
    return out.astype(np.float32)


def _periodic_lowpass(x: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """Brick-wall low-pass in the frequency domain; keeps the loop seamless."""
    spectrum = np.fft.rfft(x)
    freqs = np.fft.rfftfreq(x.size, 1 / SAMPLE_RATE)
    spectrum[freqs > cutoff_hz] = 0
    return np.fft.irfft(spectrum, x.size).astype(np.float32)


def _normalize(x: np.ndarray, peak: float) -> np.ndarray:
    return (x / (np.abs(x).max() + 1e-9) * peak).astype(np.float32)


def _envelope(n: int, attack: int, decay: float) -> np.ndarray:
    t = np.arange(n, dtype=np.float32)
    env = np.exp(-t / decay)
    env[:attack] *= np.linspace(0, 1, attack, dtype=np.float32)
    return env


def _chirp(f0: float, f1: float, seconds: float, rng: np.random.Generator) -> np.ndarray:
    n = int(seconds * SAMPLE_RATE)
    freq = np.geomspace(f0, f1, n)
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    tone = np.sin(phase) + 0.3 * np.sin(2 * phase)
    vibrato = 1 + 0.2 * np.sin(2 * np.pi * 18 * np.arange(n) / SAMPLE_RATE)
    env = np.sin(np.pi * np.arange(n) / n) ** 0.5
    return (tone * vibrato * env + 0.02 * rng.standard_normal(n)).astype(np.float32)


@dataclass
class AudioBank:
    loops: dict[str, np.ndarray]
    grains: dict[str, np.ndarray]


def build_audio_bank(theme: Theme, rng: np.random.Generator) -> AudioBank:
    n = LOOP_FRAMES * SAMPLES_PER_FRAME
    t = np.arange(n, dtype=np.float32) / SAMPLE_RATE
    slow = 0.6 + 0.4 * np.sin(2 * np.pi * t / 3.0)  # one cycle per loop: seamless
    drone = (
        np.sin(2 * np.pi * theme.ambient_hz * t) + 0.5 * np.sin(3 * np.pi * theme.ambient_hz * t)
    ) * slow
    bed = _periodic_lowpass(rng.standard_normal(n), 400.0)
    loops = {
        "ambient": _normalize(drone, 0.05) + _normalize(bed, 0.06 * theme.ambient_noise),
        "wind": _normalize(
            _periodic_lowpass(rng.standard_normal(n), 700.0)
            * (0.5 + 0.5 * np.sin(2 * np.pi * 2 * t / 3.0) ** 2),
            0.18,
        ),
    }
    hiss = rng.standard_normal(n)
    hiss = hiss - _periodic_lowpass(hiss, 2500.0)  # high-passed: rain is bright hiss
    drops = np.zeros(n, np.float32)
    where = rng.integers(0, n - 200, n // 400)
    for offset in range(60):
        drops[where + offset] += np.exp(-offset / 12) * rng.choice([-1, 1], where.size)
    loops["rain"] = _normalize(hiss, 0.22) + _normalize(drops, 0.12)
    crackle = np.zeros(n, np.float32)
    pops = rng.integers(0, n - 300, n // 500)
    for offset in range(150):
        crackle[pops + offset] += np.exp(-offset / 25) * rng.standard_normal(pops.size)
    roar = _periodic_lowpass(rng.standard_normal(n), 250.0)
    loops["fire"] = _normalize(crackle, 0.35) + _normalize(roar, 0.15)

    grains: dict[str, np.ndarray] = {}
    step = int(0.09 * SAMPLE_RATE)
    soft = _lowpass(rng.standard_normal(step), 0.94) * _envelope(step, 40, 300)
    grains["step_grass"] = _normalize(soft, 0.55)
    click = rng.standard_normal(step // 2) * _envelope(step // 2, 5, 60)
    knock = np.sin(2 * np.pi * 1100 * np.arange(step // 2) / SAMPLE_RATE) * _envelope(
        step // 2, 5, 120
    )
    grains["step_rock"] = _normalize(click + 0.8 * knock, 0.6)
    grains["step_sand"] = _normalize(
        _lowpass(rng.standard_normal(step), 0.85) * _envelope(step, 60, 500), 0.45
    )
    crunch = rng.standard_normal(step) * (rng.random(step) < 0.3) * _envelope(step, 30, 500)
    grains["step_snow"] = _normalize(_lowpass(crunch, 0.3), 0.5)
    grains["call_ask"] = _normalize(_chirp(600, 1100, 0.35, rng), 0.35)
    grains["call_happy"] = _normalize(
        np.concatenate(
            [_chirp(900, 1500, 0.12, rng), np.zeros(800, np.float32), _chirp(1000, 1700, 0.12, rng)]
        ),
        0.35,
    )
    grains["call_greet"] = _normalize(
        _chirp(800, 1600, 0.3, rng)
        * (1 + np.sin(np.arange(int(0.3 * SAMPLE_RATE)) * 2 * np.pi * 12 / SAMPLE_RATE)),
        0.35,
    )
    grains["call_scared"] = _normalize(_chirp(1500, 450, 0.4, rng), 0.4)
    grains["call_startle"] = _normalize(_chirp(1800, 2400, 0.15, rng), 0.45)
    chime_n = int(0.5 * SAMPLE_RATE)
    ct = np.arange(chime_n) / SAMPLE_RATE
    chime = sum(np.sin(2 * np.pi * f * ct) for f in (880, 1320, 1760)) * np.exp(-ct * 6)
    grains["chime"] = _normalize(chime, 0.25)
    return AudioBank(loops, grains)


STRONG_WIND = 0.6  # wind-bed gain from which the eval counts wind as an audible event


def wind_gain(theme_wind: float, weather: str) -> float:
    """The wind bed's gain: the theme's, raised by snow and rain."""
    return theme_wind * (1.6 if weather == "snow" else 1.2 if weather == "rain" else 1.0)


@dataclass
class AudioGains:
    ambient: float = 1.0
    wind: float = 0.0
    rain: float = 0.0
    fire: float = 0.0


@dataclass
class AudioMixer:
    bank: AudioBank
    voices: list[list] = field(default_factory=list)  # [grain, next sample]
    started: list[str] = field(default_factory=list)  # grains triggered since the last mix

    def trigger(self, grain: str) -> None:
        self.voices.append([self.bank.grains[grain], 0])
        self.started.append(grain)

    def mix(self, frame_index: int, gains: AudioGains) -> np.ndarray:
        start = (frame_index % LOOP_FRAMES) * SAMPLES_PER_FRAME
        end = start + SAMPLES_PER_FRAME
        loops = self.bank.loops
        out: np.ndarray = loops["ambient"][start:end] * np.float32(gains.ambient)
        for name in ("wind", "rain", "fire"):
            gain = getattr(gains, name)
            if gain > 0:
                out = out + loops[name][start:end] * np.float32(gain)
        alive = []
        for voice in self.voices:
            grain, pos = voice
            chunk = grain[pos : pos + SAMPLES_PER_FRAME]
            out[: chunk.size] += chunk
            voice[1] = pos + SAMPLES_PER_FRAME
            if voice[1] < grain.size:
                alive.append(voice)
        self.voices = alive
        self.started = []
        return (np.clip(out, -1.0, 1.0) * 32767).astype(np.int16)
