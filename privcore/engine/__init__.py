"""Batched training and evaluation of the five methods, with an on-disk cache of results."""
