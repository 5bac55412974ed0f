"""Web-text quality heuristics (Gopher repetition and quality, C4, FineWeb, long n-gram runs):
the text algorithms behind the `quality` stage."""
