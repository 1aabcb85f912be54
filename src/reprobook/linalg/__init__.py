"""Small numerical linear-algebra helpers shared by chapters (spectra, ranks, condition numbers)."""
