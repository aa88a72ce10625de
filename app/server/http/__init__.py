"""The HTTP plumbing every API family shares and none owns: the API key, CORS, the header
and body limits, reading a body, the error JSON (in the dialect of the request's path),
server-sent events, and uvicorn's protocol with its header timeout.
"""
