"""Scheduling: each step decides how many tokens of which requests go into the next batch
(decode first, then prefill chunks under a time-aware token budget), by priority and age.
"""
