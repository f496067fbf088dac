"""dlbench: a comparative measurement study of deep learning frameworks, as a workflow.

Modules that the trainer imports inside a framework's environment (models, lr,
frameworks/, datasets/store) need only numpy and that framework; everything else
runs in the base environment.
"""

__version__ = "0.1.0"
