"""The KV cache: the sequence ids of the llama context, a radix tree of cached token
prefixes shared across requests, and the prompt cache on disk that survives restarts.
"""
