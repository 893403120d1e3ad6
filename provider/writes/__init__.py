"""What a write task is, without Airflow: its prepared write and identity (``prepared``) and its table URI
(``table_uri``)."""
