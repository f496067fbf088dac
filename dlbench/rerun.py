"""What a job's result depends on, as the code says it: NO_RERUN marks a field that changes no result.

A dataclass field declared `field(metadata=NO_RERUN)` holds words for people or a figure no job reads for its
result (a description, a label, a colour, a time estimate's default). The code digests that decide what a change
reruns (dlbench/rules/code_digest.py) leave its value out of every construction of the class, so that changing it
reruns no training and rebuilds no record.

Standard library only: the trainer imports it in every framework's environment.
"""

NO_RERUN = {"rerun": False}
