"""One adapter per framework (pytorch.py, tensorflow.py, ...); registry.py says what differs between them.

This package stays importable in every environment: only the adapters import a framework.
"""
