"""Evaluation of the world model against the simulator (metrics, judges, rollouts)."""
