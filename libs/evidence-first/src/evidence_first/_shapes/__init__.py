"""What every layer shares.

The vocabularies and limits, Unicode text, the errors, `Evidence`, the parts of a result, the
fact markers, the model contract, the ledger's models and verified spans.
"""
