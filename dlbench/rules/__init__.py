"""The workflow's glue: what the rules are given, the code digests they rerun on, their logs and cluster requests."""
