"""The transport: what goes on the wire, below the engine.

The schema dialects each provider accepts, the strict call's settings shared by every
framework, and the provider-table shape the integrations fill in. It imports nothing of the
engine or the citation styles, so the OpenAI-compatible client and the local reader build on
it alone.
"""
