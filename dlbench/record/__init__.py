"""One point's result on disk: its fields, its store, its statuses, its provenance, the points a killed run finished."""
