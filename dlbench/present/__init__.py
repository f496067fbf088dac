"""What people read: the results page, findings in words, charts, the table of runs, the tables as CSV, a partial look,
two result sets side by side."""
