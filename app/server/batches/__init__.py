"""OpenAI's Files and Batch API (issue 37): files kept in the data folder, batches run as
app/jobs' jobs on the engine's spare capacity (service.py), routes in routes.py."""
