"""The worker: the only code that drives llama.cpp's context (load, fill the batch,
llama_decode, KV memory calls) and its backend helpers.
"""
