"""Differential fuzzing of the conflict model against a real engine (ADR 0013): ``python -m lab.fuzz``."""
