"""How long a study will take, before it runs and as its points finish."""
