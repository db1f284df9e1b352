"""One answer.

The request planned and checked, the model called once, the reply judged, the result built and
judged again when stored.
"""
