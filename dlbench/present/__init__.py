"""What people read: findings in words, charts, the runs table, a partial look, two result sets side by side."""
