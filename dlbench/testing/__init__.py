"""Tools for testing dlbench itself: a private copy of the workflow, the fault matrix, the forward check."""
