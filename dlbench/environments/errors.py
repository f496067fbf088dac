"""The error every part of an environment's life raises: one that cannot be chosen, locked, built, checked or
used. Its message is one line that names the environment, the step and the fix."""


class EnvError(RuntimeError):
    """An environment that cannot be built or used; the message says what to do."""
