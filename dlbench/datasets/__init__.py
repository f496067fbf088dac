"""Datasets: parsers of the real formats, preparation into one framework-neutral store."""
