"""Citation styles, one module each: ``quote`` and ``passage``; ``modes`` names them."""
