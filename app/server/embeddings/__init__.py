"""OpenAI's embeddings (/v1/embeddings): the body parsed, the engine's pooled vectors
answered.
"""
