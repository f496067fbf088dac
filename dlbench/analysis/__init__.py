"""Numbers from the Parquet tables: statistics, verdicts, the summary, the observations, guidance and comparison
statistics."""
