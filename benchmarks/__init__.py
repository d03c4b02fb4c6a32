"""Benchmarks: the evaluation suite (``python -m benchmarks``) and performance benchmarks
(``python -m benchmarks.<name>``). Nothing imports this package."""
