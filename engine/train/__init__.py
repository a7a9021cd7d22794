"""Training: tokenizers first, then the causal generator. Resumable; CPU and CUDA presets."""
