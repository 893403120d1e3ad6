"""TaskFlow decorators (``@task.delta_write``)."""
