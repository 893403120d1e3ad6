"""The SQL lease stores: one base (:mod:`.base`) and its SQLite and PostgreSQL dialects, with the schema
migrations they share."""
