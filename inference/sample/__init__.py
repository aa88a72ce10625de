"""Sampling a step's logits rows: the C kernel (optional; numpy fallback), the numpy
threshold path, grammar chains on llama.cpp's samplers, log-probabilities.
"""
