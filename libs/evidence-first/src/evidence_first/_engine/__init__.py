"""One answer: the request checked and planned, the model called once, the reply judged.

The result built from the judgment, and judged again however else it is built; the same, as
the reply streams.
"""
