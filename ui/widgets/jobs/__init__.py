"""The Jobs window (Chat → Jobs…) and its New job dialog: background jobs over a CSV/JSONL
file's rows (app/jobs), shown and asked for; the controller (ui/controllers/jobs.py) runs them."""
