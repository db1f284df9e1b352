"""What the engine knows of a model and its provider.

The profiles and their rules, the schema dialects, the strict call's settings.
"""
