"""The web side's one door to the engine.

Views, consumers, services and Celery jobs touch the engine only through this package:

    constants      FPS, SAMPLE_RATE, ... re-exported from the import-light engine.spec
    world_spec     a gallery world -> the one spec shape the engine opens (EngineSpec)
    runtime        the process's loaded model; open a runtime session from an EngineSpec
    pictures       reference pictures as small PNG bytes (they cross machines, never paths)
    video          the one MP4 writer (H.264 + AAC) used by previews, exports and recordings
    recording      the versioned on-disk format of a played session: writer and reader

Importing this package (or `constants`) loads neither torch nor the simulator; `runtime` does.
"""
