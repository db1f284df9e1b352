"""What every layer shares: the vocabularies, limits, errors and the contract's shapes.

Unicode text, `Evidence`, the parts of a result and their offsets, the stream's events, the
fact markers, the model contract, the ledger's models and verified spans.
"""
