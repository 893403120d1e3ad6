"""``python -m lab.simulation``: a synthetic workload played against the lease manager's admission rule in
virtual time, and (with the ``charts`` extra) its charts."""
