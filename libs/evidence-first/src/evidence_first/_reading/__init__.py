"""What a reply says: the ledger parsed, whole or as it streams, each citation verified.

And flagged; whether a verified citation supports its fact and the question; the reader's
confidence.
"""
