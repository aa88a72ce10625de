"""Grammars every caller shares (SamplingParams.grammar).

JSON_OBJECT: any JSON object, what response_format {"type": "json_object"} asks for.
"""

from inference.sample.json_schema import schema_grammar

JSON_OBJECT = schema_grammar({"type": "object"})
