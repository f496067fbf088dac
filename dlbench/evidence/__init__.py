"""docs/reproduction.md's evidence from one command: `dlbench evidence` (`python -m dlbench.evidence`).

study    runs config/evidence.yaml with Snakemake in a working directory of its own (never the user's results/)
render   the runs table -> each evidence table in Markdown (a pure function), with its stamp
stamp    what a measured table says of itself: commit, date, scale, machine, outside load
markers  writes those tables into the doc between their marker comments, and nowhere else
command  the command line that ties them together
"""
