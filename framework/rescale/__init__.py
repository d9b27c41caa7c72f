"""Rescaling a computation to another partition count (`logwheel rescale`)."""
