"""OpenAI's Responses API (/v1/responses, stored responses read and deleted by id): the
body parsed, a stored response continued, the answer and events written.
"""
