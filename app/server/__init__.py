"""The OpenAI-compatible HTTP server (`chorus serve`, the app's switch). One folder per API
family (openai/, anthropic/, responses/, embeddings/), each behind one door, its routes.py;
calls/ what every call shares (state, intake, parsing, the run, the Reply); http/ the
plumbing no API owns. api.py assembles them; uvicorn_server.py runs the result.
"""
