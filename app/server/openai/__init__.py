"""OpenAI's chat completions and completions (/v1/chat/completions, /v1/completions): the
bodies parsed, tools offered and read back, the answers and chunks written.
"""
