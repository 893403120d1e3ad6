"""The conflict rules, one module an engine family, and the rules they share."""
