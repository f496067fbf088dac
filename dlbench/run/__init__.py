"""One point from start to record: the runner starts the trainer, the monitor samples it, the record is built from
both."""
