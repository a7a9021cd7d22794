"""Worldsite engine: pure numpy/PyTorch, never imports Django.

`engine.sim` is the deterministic reference world (teacher and ground truth);
`engine.data` turns it into sharded training episodes and reads them back.
"""
