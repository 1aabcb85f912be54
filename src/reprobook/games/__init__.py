"""Games and mechanisms: pricing games, peer-prediction payments, exact equilibrium checks."""
