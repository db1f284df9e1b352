"""What one request sends.

The options, the sources packed and cut into passages, the injection defences, the prompt, the
request schema and the citation styles.
"""
