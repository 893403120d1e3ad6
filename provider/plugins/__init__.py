"""The deltaguard Airflow UI plugin (registered through the provider's ``plugins`` entry)."""
