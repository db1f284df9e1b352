"""The wire: one request posted, its reply read within limits derived from the request.

Whole or as server-sent events, the connection closed past the limits or when the engine stops
waiting; what a reply states (its numbers, its JSON, a redirect's origin) read strictly.
"""
