"""``deltaguard plan``: which of a DAG's writes wait for each other, why, and what one run takes.

:mod:`~deltaguard.planning.discover` finds the writes (Airflow), :mod:`~deltaguard.planning.analysis`
judges them with the conflict model, :mod:`~deltaguard.planning.schedule` simulates one run (pure),
:mod:`~deltaguard.planning.report`, :mod:`~deltaguard.planning.gantt` and
:mod:`~deltaguard.planning.baseline` present and compare plans.
"""
