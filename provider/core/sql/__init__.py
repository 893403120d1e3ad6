"""Reading SQL: classifying statements, predicates and their literal values."""
