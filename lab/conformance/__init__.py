"""Conformance harness: measures what a real engine does for each operation pair and checks the model."""
