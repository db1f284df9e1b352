"""What the engine knows of a model and its provider.

The profiles and the rule table that finds them, the schema dialects and the schema written in
one, the strict call's settings every framework shares, and the provider-table shape the
integrations fill in.
"""
