"""The harness deltaguard is measured with, kept out of the wheel: differential fuzzing of the conflict
model (``python -m lab.fuzz``, needs hypothesis) and the admission simulator (``python -m lab.simulation``).

The conformance cells (``python -m lab.conformance``) re-measure an engine against the model. A worker
installs only the product. Run from the repository root (``pythonpath = ["."]`` for pytest).
"""
