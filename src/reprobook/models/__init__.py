"""Small reusable networks."""
