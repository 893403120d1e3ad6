"""The harness deltaguard is measured with, kept out of the wheel: differential fuzzing of the conflict
model (``python -m lab.fuzz``, needs hypothesis) and the admission simulator (``python -m lab.simulation``).

A worker installs only the product; re-measuring an engine against the model stays a user command
(``deltaguard conformance``). Run from the repository root (``pythonpath = ["."]`` for pytest).
"""
