"""The framework-neutral description of a training: networks, initial weights, input handling and learning-rate
policies."""
