"""Write engines behind one interface: delta-rs (embedded default) and Spark (delta-spark)."""
