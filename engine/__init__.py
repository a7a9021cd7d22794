"""Worldsite engine: pure numpy/PyTorch, never imports Django.

`engine.sim` is the deterministic reference world (teacher and ground truth); `engine.data`
turns it into sharded training episodes and reads them back. The model, training, runtime and
eval packages build on those two (see DESIGN.md "The parts and how data flows").
"""
