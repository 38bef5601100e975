"""Reproducible experiments: the JASON Dinur-Nissim experiments and randomized response."""
