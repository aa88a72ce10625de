"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens): the body parsed,
the answer and events written.
"""
