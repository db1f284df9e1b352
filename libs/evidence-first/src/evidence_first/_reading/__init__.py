"""What a reply says.

The ledger parsed, each citation verified and flagged, the fact-words and question-words checks,
the reader's confidence.
"""
