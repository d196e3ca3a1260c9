"""Bayesian inference under differential privacy (Xiao & Xiong): BLUE, error laws, intervals, online answering."""

from .errors import METHODS, LinearNoise

__all__ = ["LinearNoise", "METHODS"]
