from collections import Counter

import numpy as np

from engine.data.episode import play_episode
from engine.sim.prompts import resolve
from engine.sim.script import EpisodeScript


def test_the_random_agent_plays_varied_episodes():
    actions, prompts, moved = Counter(), Counter(), []
    for seed in range(3):
        *frames, script = play_episode(seed, 150, 64)
        assert isinstance(script, EpisodeScript) and len(frames) == 150
        poses = np.array([(f.frame.labels["pose_x"], f.frame.labels["pose_y"]) for f in frames])
        moved.append(np.abs(np.diff(poses, axis=0)).sum())
        for item in script.inputs:
            if item["kind"] == "action":
                actions.update(item["keys"])
            elif item["kind"] == "prompt":
                prompts[resolve(item["text"]).event] += 1
                assert not resolve(item["text"]).heldout  # training never sees held-out text
    assert min(moved) > 5  # it walks around, it does not stay stuck
    assert {"W", "LEFT", "RIGHT"} <= set(actions)
    assert sum(prompts.values()) >= 3
