"""This machine and its scheduler: locks, heavy work, the memory cap, outside load, the SLURM job, the machine's facts
and peak."""
