"""Evaluation: datasets as items, the resumable run directory, metrics, reports."""
