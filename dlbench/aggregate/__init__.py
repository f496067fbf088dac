"""Records into tidy Parquet (runs, curves, samples), with a cache so that new points are the only ones parsed."""
